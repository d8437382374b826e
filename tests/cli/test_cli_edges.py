"""Issue 12's CLI edges: each user mistake is one ``error:`` line and exit 2, checked up front."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium
import pytest

import rlmesh_trio as rt

from .._cli import CLI, run_cli, serving

POLICY = "rlmesh_trio.inprocess._demo_policy:cartpole_policy"

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


# -- item 6: the --json path is checked before the run ---------------------------------------
def _json_runs(path: str) -> list[list[str]]:
    run = ["run", "--env", "CartPole-v1", "--model", POLICY, "--episodes", "1"]
    return [
        [*run, "--no-progress", "--json", path],
        ["demo", "--routes", "1", "--episodes", "1", "--no-progress", "--json", path],
    ]


def test_json_into_a_missing_folder_fails_before_running(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-folder"
    for args in _json_runs(str(missing / "report.json")):
        result = run_cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        line = one_error_line(result)
        assert line == f"error: --json: folder '{missing}/' does not exist"
        assert result.stdout == ""  # the run never started
        assert not missing.exists()


def test_json_naming_a_folder_fails_before_running(tmp_path: Path) -> None:
    for args in _json_runs(str(tmp_path)):
        result = run_cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert one_error_line(result) == f"error: --json: '{tmp_path}' is a folder, not a file"
        assert result.stdout == ""


def test_json_under_a_file_fails_before_running(tmp_path: Path) -> None:
    blocker = tmp_path / "plain-file"
    blocker.write_text("x")
    result = run_cli(*_json_runs(str(blocker / "report.json"))[0])
    assert result.returncode == 2, result.stderr
    assert one_error_line(result) == f"error: --json: '{blocker}/' is not a folder"


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into any folder")
def test_json_into_a_read_only_folder_fails_before_running(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    result = run_cli(*_json_runs(str(locked / "report.json"))[0])
    assert result.returncode == 2, result.stderr
    assert one_error_line(result) == f"error: --json: folder '{locked}/' is not writable"


def test_a_report_that_cannot_be_written_late_goes_to_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rlmesh_trio.cli._summary import write_report
    from rlmesh_trio.inprocess._demo_policy import cartpole_policy

    route = rt.Route(
        env=lambda: gymnasium.make("CartPole-v1"),
        model=cartpole_policy,
        seeds=[0],
        max_episode_steps=3,
    )
    report = rt.run([route])
    target = tmp_path / "removed-meanwhile" / "report.json"
    assert write_report(report, target) is False
    captured = capsys.readouterr()
    assert captured.err.startswith(f"error: --json: cannot write '{target}'")
    assert json.loads(captured.out)["total_episodes"] == 1


# -- item 9: check --timeout is validated at the option --------------------------------------
@pytest.mark.parametrize(
    ("value", "why"),
    [("0", "not in the range x>0"), ("-1", "not in the range x>0"), ("nan", "not a finite")],
)
def test_check_timeout_must_be_a_positive_finite_number(value: str, why: str) -> None:
    result = run_cli("check", "127.0.0.1:1", "--timeout", value)
    assert result.returncode == 2, result.stderr
    line = one_error_line(result)
    assert "'--timeout'" in line and why in line


# -- items 8 and 12: a target that is not callable is refused before serving or running -------
NOT_CALLABLE = "rlmesh_trio.inprocess._demo_policy:LOOKAHEAD"  # a float


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["serve-model", NOT_CALLABLE],
            f"error: policy {NOT_CALLABLE!r} is a float, not a policy",
        ),
        (
            ["run", "--env", "CartPole-v1", "--model", NOT_CALLABLE, "--episodes", "1"],
            f"error: model {NOT_CALLABLE!r} is a float, not a policy",
        ),
        (
            ["run", "--env", NOT_CALLABLE, "--model", POLICY, "--episodes", "1"],
            f"error: env factory {NOT_CALLABLE!r} is a float, not callable",
        ),
    ],
)
def test_a_target_that_is_not_callable_is_one_line(args: list[str], expected: str) -> None:
    result = run_cli(*args, "--no-progress") if args[0] == "run" else run_cli(*args)
    assert result.returncode == 2, result.stderr
    assert one_error_line(result).startswith(expected)
    assert result.stdout == ""


# -- item 7: a factory that returns no env --------------------------------------------------
@pytest.mark.parametrize(
    "args",
    [
        ["serve-env", "builtins:dict"],
        ["serve-env", "builtins:dict", "--lanes", "2"],
        ["serve-env", "builtins:dict", "--num-envs", "2"],
        ["run", "--env", "builtins:dict", "--model", POLICY, "--episodes", "1", "--no-progress"],
    ],
)
def test_a_factory_that_returns_no_env_is_one_line(args: list[str]) -> None:
    result = run_cli(*args)
    assert result.returncode == 2, result.stderr
    assert one_error_line(result) == (
        "error: factory builtins:dict returned dict, not a gymnasium Env"
    )
    assert result.stdout == ""


def test_a_factory_that_raises_is_one_line_before_the_run() -> None:
    args = ["--model", POLICY, "--episodes", "1", "--no-progress"]
    result = run_cli("run", "--env", "builtins:open", *args)  # open() needs a file name
    assert result.returncode == 2, result.stderr
    assert one_error_line(result).startswith("error: could not build env 'builtins:open': ")
    assert result.stdout == ""


# -- item 16: module:attr targets import from the current folder ----------------------------
SCRIPT = Path(sys.executable).parent / "rlmesh-trio"
USER_MODULE = """
import gymnasium


def act(obs):
    return 0


def make_env():
    with open("built.log", "a") as log:
        log.write("built\\n")
    return gymnasium.make("CartPole-v1")
"""


@pytest.mark.skipif(not SCRIPT.exists(), reason="the rlmesh-trio script is not installed")
def test_the_installed_script_imports_targets_from_the_current_folder(tmp_path: Path) -> None:
    (tmp_path / "mypol.py").write_text(USER_MODULE)
    out = tmp_path / "report.json"
    envs = ["--env", "mypol:make_env", "--env", "mypol:make_env"]
    rest = ["--episodes", "3", "--max-episode-steps", "5", "--no-progress", "--json", str(out)]
    result = subprocess.run(
        [str(SCRIPT), "run", *envs, "--model", "mypol:act", *rest],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(out.read_text())
    assert data["total_episodes"] == 3
    assert [route["env"] for route in data["routes"]] == ["mypol:make_env"] * 2
    # One env per route: the env built ahead of the run (to check it) is the one the route uses.
    assert (tmp_path / "built.log").read_text().splitlines() == ["built", "built"]


@pytest.mark.skipif(not SCRIPT.exists(), reason="the rlmesh-trio script is not installed")
def test_the_installed_script_serves_a_policy_from_the_current_folder(tmp_path: Path) -> None:
    (tmp_path / "mypol.py").write_text(USER_MODULE)
    result = subprocess.run(
        [str(SCRIPT), "serve-model", "mypol:act", "--address", "127.0.0.1:99999"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    # The policy imported (no "cannot import"): the next check, the address, is what fails.
    assert result.returncode == 2
    assert one_error_line(result).startswith("error: invalid address")


# -- item 21: gymnasium's own word on an id it does not make --------------------------------
def test_a_deprecated_env_id_passes_gymnasium_s_message_on() -> None:
    try:
        gymnasium.spec("Taxi-v3")
    except gymnasium.error.DeprecatedEnv as exc:
        expected = str(exc)
    else:  # pragma: no cover - depends on the installed gymnasium
        pytest.skip("this gymnasium still registers Taxi-v3")
    for command in (["serve-env"], ["run", "--model", POLICY, "--episodes", "1", "--env"]):
        result = run_cli(*command, "Taxi-v3")
        assert result.returncode == 2, result.stderr
        line = one_error_line(result)
        assert line == f"error: gymnasium env id 'Taxi-v3': {expected}"
        assert "deprecated" in line and "unknown" not in line


def test_a_misspelt_env_id_gets_gymnasium_s_suggestion() -> None:
    result = run_cli("serve-env", "cartpole-v1")
    assert result.returncode == 2, result.stderr
    line = one_error_line(result)
    assert line.startswith("error: unknown gymnasium env id 'cartpole-v1': ")
    assert "CartPole" in line  # gymnasium's "Did you mean" names the right spelling


# -- item 24 (part): --timeouts errors echo the user's key and value ------------------------
@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("-5", "envStepTimeoutMs must be > 0, got -5"),
        ("0", "envStepTimeoutMs must be > 0, got 0"),
        ('"100"', "envStepTimeoutMs must be a number of milliseconds, got '100'"),
        ("Infinity", "envStepTimeoutMs must be finite, got inf"),
    ],
)
def test_timeouts_errors_echo_the_json_key_and_value(value: str, message: str) -> None:
    with pytest.raises(rt.InvalidSpec) as info:
        rt.Limits.from_json(json.loads(f'{{"envStepTimeoutMs": {value}}}'))
    assert info.value.detail == message
    result = run_cli(
        *["run", "--env", "CartPole-v1", "--model", POLICY, "--episodes", "1"],
        *["--timeouts", f'{{"envStepTimeoutMs": {value}}}'],
    )
    assert result.returncode == 2, result.stderr
    assert one_error_line(result) == f"error: --timeouts: {message}"


# -- a spec that fails only once the route meets its env: still one line, exit 2 -------------
VECTOR_MODULE = """
import gymnasium


def make():
    return gymnasium.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
"""


def _run_in(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], cwd=folder, capture_output=True, text=True, timeout=120, check=False
    )


def test_a_route_spec_refused_by_its_env_is_one_line_and_keeps_the_report(
    tmp_path: Path,
) -> None:
    (tmp_path / "vecenv.py").write_text(VECTOR_MODULE)
    out = tmp_path / "report.json"
    result = _run_in(
        tmp_path,
        *["run", "--env", "vecenv:make", "--model", POLICY, "--episodes", "2"],
        *["--max-episode-steps", "5", "--no-progress", "--json", str(out)],
    )
    assert result.returncode == 2, result.stderr
    line = one_error_line(result)
    assert line.startswith("error: route route-0: max_episode_steps")
    assert "autoreset" in line
    assert result.stdout == ""  # no table of empty routes
    assert json.loads(out.read_text())["routes"][0]["status"] == "failed"


def test_a_spec_failure_beside_finished_episodes_keeps_the_table(tmp_path: Path) -> None:
    (tmp_path / "vecenv.py").write_text(VECTOR_MODULE)
    result = _run_in(
        tmp_path,
        *["run", "--env", "vecenv:make", "--env", "CartPole-v1", "--model", POLICY],
        *["--seeds", "0:4", "--max-episode-steps", "5", "--on-failure", "isolate"],
        "--no-progress",
    )
    assert result.returncode == 1, result.stderr
    assert "route-1" in result.stdout and "completed" in result.stdout


def test_an_env_that_gets_no_episode_is_never_built(tmp_path: Path) -> None:
    (tmp_path / "mypol.py").write_text(USER_MODULE)
    result = _run_in(
        tmp_path,
        *["run", "--env", "mypol:make_env", "--env", "mypol:make_env", "--model", "mypol:act"],
        *["--episodes", "1", "--max-episode-steps", "5", "--no-progress"],
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "built.log").read_text().splitlines() == ["built"]


def test_json_into_a_missing_relative_folder_names_it_as_typed(tmp_path: Path) -> None:
    result = _run_in(
        tmp_path,
        *["run", "--env", "CartPole-v1", "--model", POLICY, "--episodes", "1"],
        *["--no-progress", "--json", "x/report.json"],
    )
    assert result.returncode == 2, result.stderr
    assert one_error_line(result) == "error: --json: folder 'x/' does not exist"
    assert result.stdout == ""


# -- issue 34 item 6: check opens one connection ----------------------------------------------
def test_check_answers_from_a_server_that_allows_one_connection() -> None:
    one = ("--limit", "max-connections=1")
    with (
        serving("serve-env", "CartPole-v1", *one) as env,
        serving("serve-model", POLICY, *one) as model,
    ):
        checked = run_cli("check", env, "--timeout", "10")
        checked_model = run_cli("check", model, "--model", "--timeout", "10")
        ran = run_cli("run", "--env", env, "--model", model, "--episodes", "1", "--no-progress")
    assert (checked.returncode, checked.stderr) == (0, ""), checked.stderr
    lines = checked.stdout.splitlines()
    assert lines[0] == f"endpoint      {env}"
    for line in (
        "health        SERVING",
        "env id        CartPole-v1",
        "num_envs      1",
        "autoreset     DISABLED",
        "action        Discrete(2)",
    ):
        assert line in lines, checked.stdout
    assert (checked_model.returncode, checked_model.stderr) == (0, ""), checked_model.stderr
    assert f"endpoint      {model}" in checked_model.stdout
    assert "health        SERVING" in checked_model.stdout.splitlines()
    assert ran.returncode == 0, ran.stderr  # and the server still takes a run afterwards


def test_check_at_a_servers_connection_limit_says_so() -> None:
    import socket

    from rlmesh_trio.transport._address import parse_address

    with serving("serve-env", "CartPole-v1", "--limit", "max-connections=1") as env:
        bound = parse_address(env)
        with socket.create_connection((bound.host, bound.port), timeout=10) as held:
            assert held.recv(65536)  # served: the server's SETTINGS; it holds the one slot
            refused = run_cli("check", env, "--timeout", "10")
    assert refused.returncode == 1
    assert one_error_line(refused) == (
        f"error: could not connect to {env}: the server closed the connection: "
        "too many connections: the server allows 1 at once (max_connections)"
    )
