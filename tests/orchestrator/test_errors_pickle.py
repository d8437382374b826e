"""Every exception of ours crosses a process boundary: pickled, it comes back with its fields."""

from __future__ import annotations

import ast
import pathlib
import pickle

import pytest

import rlmesh_trio as rt
from rlmesh_trio.testing import ScriptedEnv, ScriptedModel


async def _failed_run() -> rt.RunFailed:
    failing = ScriptedEnv(episode_lengths=2, fail_at={"step": 3})
    routes = [
        rt.Route(env=ScriptedEnv(episode_lengths=2), model=ScriptedModel(), episodes=2),
        rt.Route(env=failing, model=ScriptedModel(), episodes=3, route_id="bad"),
    ]
    with pytest.raises(rt.RunFailed) as caught:
        await rt.run_routes(routes)
    return caught.value


ERRORS: list[BaseException] = [
    rt.RouteCancelled("r1", 7, "cancelled by caller"),
    rt.EnvRpcError("env.step", 3, "boom", code=10, recoverable=True),
    rt.OperationTimeout("r1", "env", "env.reset", 0, 1.5),
    rt.ModelRpcError("model", "bad request", code=3, recoverable=False),
    rt.ConnectError("127.0.0.1:1", "refused"),
    rt.HandshakeError("127.0.0.1:1", "editions differ"),
    rt.InvalidSpec("route r1: seed 2**70 is out of range"),
    rt.ProtocolError("bad varint", path="$.image"),
    rt.HookError("transform_action raised ValueError"),
    rt.ModelRouteMismatch("model", "req-9"),
    rt.WrongEventLoop("run_routes must run under Trio"),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_error_round_trips_with_its_fields(error: BaseException) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.args == error.args
    assert vars(copy) == vars(error) and vars(copy)


async def test_run_failed_round_trips_with_its_report() -> None:
    failure = await _failed_run()
    copy = pickle.loads(pickle.dumps(failure))
    assert type(copy) is rt.RunFailed
    assert str(copy) == str(failure)
    assert copy.route_id == "bad"
    assert type(copy.primary) is type(failure.primary)
    assert str(copy.primary) == str(failure.primary)
    assert vars(copy.primary) == vars(failure.primary)
    assert copy.report.to_dict() == failure.report.to_dict()
    assert copy.report.total_episodes == failure.report.total_episodes == 3


def test_run_interrupted_round_trips_with_its_report() -> None:
    report = rt.RunReport(routes=(), wall_s=1.25)
    error = rt.RunInterrupted(report)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is rt.RunInterrupted
    assert str(copy) == str(error)
    assert copy.report == report


def test_run_failed_lives_next_to_run_report() -> None:
    from rlmesh_trio.report import _report

    assert rt.RunFailed is _report.RunFailed
    assert rt.RunFailed.__module__ == rt.RunReport.__module__


def test_errors_module_imports_nothing_of_ours() -> None:
    import rlmesh_trio._errors as errors

    tree = ast.parse(pathlib.Path(errors.__file__).read_text())
    ours = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and (node.level > 0 or (node.module or "").startswith("rlmesh_trio"))
    ]
    assert ours == []


# ------------------------------------------------------- issue 12 item 23: the hint's place


def test_closed_connection_hint_only_for_a_closed_connection() -> None:
    from rlmesh_trio._errors import CLOSED_CONNECTION_HINT, CLOSED_CONNECTION_SOURCE

    closed = rt.EnvRpcError("env.step", 4, CLOSED_CONNECTION_SOURCE)
    assert str(closed) == (
        "environment env.step failed at runtime step 4: transport error: connection closed. "
        + CLOSED_CONNECTION_HINT
    )
    for message in (
        "environment error: [InvalidAction] action 7 is outside Discrete(2)",
        "ValueError: bad action",
        "transport error: connection closed (the local env session ended)",
    ):
        error = rt.EnvRpcError("env.step", 4, message)
        assert str(error) == f"environment env.step failed at runtime step 4: {message}"
        assert "container logs" not in str(error)


async def test_in_process_env_errors_carry_no_hint() -> None:
    import gymnasium

    class Broken(gymnasium.Wrapper):  # type: ignore[type-arg]
        def step(self, action: object) -> object:
            raise ValueError("bad action")

    route = rt.Route(env=Broken(gymnasium.make("CartPole-v1")), model=lambda obs: 0, episodes=1)
    report = await rt.run_routes([route], on_failure="isolate")
    error = report.routes[0].error
    assert isinstance(error, rt.EnvRpcError)
    assert "bad action" in str(error)
    assert "container logs" not in str(error)
