"""Issue 12's CLI edges: each user mistake is one ``error:`` line and exit 2, checked up front."""

from __future__ import annotations

import pytest

import rlmesh_trio as rt

from ._cli import run_cli

POLICY = "rlmesh_trio._demo_policy:cartpole_policy"

BAD_ADDRESSES = [
    ("127.0.0.1:99999", "port out of range"),
    ("tcp://", "no host or port"),
    ("unix://", "no socket path"),
    ("tcp://127.0.0.1", "missing port"),
]


def one_error_line(result: object) -> str:
    """The single ``error:`` line a failed command printed (and nothing else on stderr)."""
    stderr: str = result.stderr  # type: ignore[attr-defined]
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


def _commands_with(address: str) -> list[list[str]]:
    return [
        ["run", "--env", address, "--model", POLICY, "--episodes", "1", "--no-progress"],
        ["run", "--env", "CartPole-v1", "--model", address, "--episodes", "1", "--no-progress"],
        ["serve-env", "CartPole-v1", "--address", address],
        ["serve-model", POLICY, "--address", address],
        ["check", address],
    ]


# -- item 11: addresses are parsed up front -------------------------------------------------
@pytest.mark.parametrize(("address", "reason"), BAD_ADDRESSES)
def test_bad_address_is_a_usage_error_in_every_command(address: str, reason: str) -> None:
    for args in _commands_with(address):
        result = run_cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        line = one_error_line(result)
        assert line.startswith(f"error: invalid address {address!r}: {reason}"), (args, line)
        assert "invalid runtime session spec" not in line
        assert result.stdout == ""  # no summary table: nothing ran


@pytest.mark.parametrize(("address", "reason"), BAD_ADDRESSES)
def test_bad_address_fails_when_the_python_route_is_made(address: str, reason: str) -> None:
    for make in (
        lambda: rt.Route(env=address, model=lambda obs: 0, episodes=1),
        lambda: rt.Route(env="127.0.0.1:5", model=address, episodes=1),
        lambda: rt.RemoteEnv(address),
        lambda: rt.RemoteModel(address),
    ):
        with pytest.raises(rt.InvalidSpec) as info:
            make()
        assert info.value.detail.startswith(f"invalid address {address!r}: {reason}")


def test_port_out_of_range_names_the_range() -> None:
    with pytest.raises(rt.InvalidSpec, match=r"port out of range: 99999 is not in 0\.\.65535"):
        rt.RemoteEnv("127.0.0.1:99999")
