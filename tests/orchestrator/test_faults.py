"""The fault matrix, end to end: real server processes on loopback that crash, stall and misbehave.

Each test runs a faulty route next to a healthy sibling and checks:

* the faulty route ends with the right error kind and fields;
* the sibling ends ``RouteCancelled`` naming the faulty route (or, under
  ``on_failure="isolate"``, completes);
* the report keeps every episode that finished before the fault (compared with
  the ``episode_completed`` events the hooks saw);
* nothing hangs: the run ends within the close timeouts after the fault.

Servers: ours via ``python -m rlmesh_trio.cli serve-env/serve-model`` (with
stalling targets from ``_faults_targets``), and ``_faults_server.py`` for the
faults a real server cannot produce. Every row is collected into a table,
printed at the end of the module and written to ``FAULT_MATRIX_FILE``
(default: ``fault_matrix.md`` in pytest's cache dir). Times are measured from
the fault (the kill, the last event before a stall, or the run's start for
connect and handshake faults): "time to surface" is when the faulty route's
``session_failed`` hook fired (after its own bounded release), "run ended" is
when ``run_routes`` returned or raised.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import gymnasium
import pytest

import rlmesh_trio as rt
from rlmesh_trio._errors import CLOSED_CONNECTION_HINT
from rlmesh_trio.inprocess._demo_policy import cartpole_policy
from rlmesh_trio.transport.server._env_server import BUSY_MESSAGE

from .._cli import CLI
from .._faults_procs import REPO, ServerProc, faulty_server, our_env, our_model

# One xdist worker runs the whole module, so the fault matrix table collects every row.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(60), pytest.mark.xdist_group("faults")]

CLOSE = 1.0  # service close timeout of every route here
LIMITS = rt.Limits(
    env_connect_timeout=5.0,
    model_connect_timeout=5.0,
    env_step_timeout=1.0,
    model_predict_timeout=1.0,
    service_close_timeout=CLOSE,
)
#: RemoteEnv/RemoteModel.aclose waits this long for a half-closed stream to end.
CLIENT_CLOSE_GRACE = 1.0
#: Scheduling slack on top of every bound (2-core CI machines, subprocess servers).
SLACK = 1.5
FAULTY = "faulty"
SIBLING = "sibling"


# ---------------------------------------------------------------------- the table


@attrs.define
class Row:
    fault: str
    expected: str
    observed: str
    surfaced_s: float
    ended_s: float
    kept: str
    siblings: str


MATRIX: list[Row] = []


def _table(rows: list[Row]) -> str:
    lines = [
        "| fault | expected error | observed error (type: message) | "
        "time to surface (session_failed) | run ended after | episodes kept | siblings |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        observed = r.observed.replace("|", "\\|")
        lines.append(
            f"| {r.fault} | {r.expected} | {observed} | {r.surfaced_s:.2f} s | "
            f"{r.ended_s:.2f} s | {r.kept} | {r.siblings} |"
        )
    return "\n".join(lines)


@pytest.fixture(scope="module", autouse=True)
def fault_matrix(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if not MATRIX:
        return
    text = _table(MATRIX)
    target = os.environ.get("FAULT_MATRIX_FILE")
    cache = getattr(request.config, "cache", None)
    if target:
        path = Path(target)
    elif cache is not None:
        path = cache.mkdir("faults") / "fault_matrix.md"
    else:
        path = Path(tempfile.gettempdir()) / "rlmesh_trio_fault_matrix.md"
    path.write_text(text + "\n")
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return
    # Module teardown runs under output capture; step out of it so the table is seen.
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        reporter.write_line("")
        reporter.write_line(f"fault matrix (also in {path}):")
        for line in text.splitlines():
            reporter.write_line(line)


# ---------------------------------------------------------------------- helpers


class Watch(rt.RuntimeHooks):
    """Records when things happened, per route; optionally injects a fault at a step."""

    def __init__(self, inject_at: int | None = None, inject: Any = None) -> None:
        self.completed: dict[str, list[str]] = {}
        self.last_event: dict[str, float] = {}
        self.failed_at: dict[str, float] = {}
        self.inject_at = inject_at
        self.inject = inject
        self.injected_at: float | None = None
        self._steps = 0

    def _seen(self, route_id: str) -> None:
        self.last_event[route_id] = time.monotonic()

    async def episode_completed(self, event: Any) -> None:
        self.completed.setdefault(event.route_id, []).append(event.episode_id)
        self._seen(event.route_id)

    async def step_completed(self, event: Any) -> None:
        self._seen(event.route_id)
        if event.route_id == FAULTY and self.inject is not None:
            self._steps += 1
            if self._steps == self.inject_at:
                self.injected_at = time.monotonic()
                self.inject()

    async def observation_emitted(self, event: Any) -> None:
        self._seen(event.route_id)

    async def session_failed(self, event: Any) -> None:
        self.failed_at[event.route_id] = time.monotonic()


@attrs.define
class Outcome:
    report: rt.RunReport
    error: BaseException | None
    started: float
    ended: float


async def run(
    routes: list[rt.Route],
    watch: Watch,
    on_failure: str = "cancel_siblings",
    *,
    failing: str | None = FAULTY,
) -> Outcome:
    """Run ``routes``; ``failing`` is the route expected to fail first (``None``: any)."""
    started = time.monotonic()
    try:
        report = await rt.run_routes(routes, hooks=watch, on_failure=on_failure)  # type: ignore[arg-type]
        error = None
    except rt.RunFailed as failed:
        report, error = failed.report, failed.primary
        assert failing is None or failed.route_id == failing
        assert failed.__cause__ is error
    return Outcome(report, error, started, time.monotonic())


def cartpole() -> gymnasium.Env[Any, Any]:
    return gymnasium.make("CartPole-v1")


def cartpole_route(
    route_id: str, model: Any, episodes: int, max_episode_steps: int = 20
) -> rt.Route:
    """A route over an in-process CartPole, with this module's limits."""
    return rt.Route(
        env=cartpole,
        model=model,
        episodes=episodes,
        max_episode_steps=max_episode_steps,
        route_id=route_id,
        limits=LIMITS,
    )


def sibling(episodes: int = 100_000) -> rt.Route:
    """A healthy in-process route that runs until cancelled (or ``episodes`` short episodes)."""
    return cartpole_route(SIBLING, cartpole_policy, episodes)


def faulty(env: Any, model: Any = cartpole_policy, **kw: Any) -> rt.Route:
    options: dict[str, Any] = {"episodes": 1000, "max_episode_steps": 8, **kw}
    return rt.Route(env=env, model=model, route_id=FAULTY, limits=LIMITS, **options)


def check_kept(outcome: Outcome, watch: Watch) -> str:
    """Every episode a route finished (as the hooks saw it) is in the report, for every route."""
    for route in outcome.report:
        seen = watch.completed.get(route.route_id, [])
        assert [ep.episode_id for ep in route.episodes] == seen, route.route_id
    kept = outcome.report.outcome(FAULTY).total_episodes
    return f"{kept} (faulty route, all kept)"


def check_siblings_cancelled(outcome: Outcome) -> str:
    sib = outcome.report.outcome(SIBLING)
    assert sib.status == "cancelled"
    assert isinstance(sib.error, rt.RouteCancelled)
    assert sib.error.route_id == SIBLING
    assert f"sibling route {FAULTY} failed" in sib.error.reason
    return f"RouteCancelled ({sib.total_episodes} episodes kept)"


def check_ended(outcome: Outcome, since: float, bound: float) -> float:
    """The run ended no later than ``bound`` seconds (plus slack) after ``since``."""
    ended = outcome.ended - since
    assert ended <= bound + SLACK, f"run ended {ended:.2f}s after the fault (bound {bound}s)"
    return ended


def record(
    fault: str,
    expected: str,
    outcome: Outcome,
    watch: Watch,
    fault_at: float,
    kept: str,
    siblings: str,
) -> None:
    error = outcome.error
    if error is None:
        # isolate: the run returned; the faulty route's own error is in the report.
        with contextlib.suppress(KeyError):
            error = outcome.report.outcome(FAULTY).error
    if error is None:
        observed = "none (run completed)"
    else:
        message = str(error)
        if len(message) > 200:
            message = message[:200] + "..."
        observed = f"{type(error).__name__}: {message}"
    surfaced = watch.failed_at.get(FAULTY, outcome.ended) - fault_at
    MATRIX.append(
        Row(fault, expected, observed, surfaced, outcome.ended - fault_at, kept, siblings)
    )


def check_cancelled_run(
    outcome: Outcome,
    watch: Watch,
    fault: str,
    expected: str,
    *,
    since: float | None = None,
    bound: float = 2 * CLOSE,
    fault_at: float | None = None,
) -> None:
    """The common end of a cancel_siblings fault: every finished episode kept, the sibling
    cancelled, the run ended within ``bound`` of ``since`` (default: the run's start), and
    the row recorded with its fault at ``fault_at`` (default: ``since``)."""
    since = outcome.started if since is None else since
    kept = check_kept(outcome, watch)
    siblings = check_siblings_cancelled(outcome)
    check_ended(outcome, since, bound)
    record(fault, expected, outcome, watch, since if fault_at is None else fault_at, kept, siblings)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ---------------------------------------------------------------------- env process killed


@pytest.mark.parametrize("on_failure", ["cancel_siblings", "isolate"])
async def test_env_server_sigkilled_mid_episode(on_failure: str) -> None:
    with our_env() as env:
        watch = Watch(inject_at=30, inject=env.kill)  # mid-episode 4 (8-step episodes)
        sib = sibling() if on_failure == "cancel_siblings" else sibling(episodes=5)
        outcome = await run([faulty(env.address), sib], watch, on_failure)
    assert watch.injected_at is not None
    failed = outcome.report.outcome(FAULTY)
    error = failed.error
    assert failed.status == "failed"
    assert isinstance(error, rt.EnvRpcError)
    assert error.operation == "env.step"
    assert error.step == 31  # the step whose reply never came
    assert error.message == "transport error: connection closed"
    assert CLOSED_CONNECTION_HINT in str(error)
    assert not error.recoverable
    kept = check_kept(outcome, watch)
    assert failed.total_episodes == 3
    if on_failure == "cancel_siblings":
        assert outcome.error is error
        siblings = check_siblings_cancelled(outcome)
    else:
        assert outcome.error is None  # isolate: the report is returned
        healthy = outcome.report.outcome(SIBLING)
        assert healthy.status == "completed" and healthy.total_episodes == 5
        siblings = "completed (isolate)"
    # The failed route's release, the sibling's cancel + release: each bounded by CLOSE.
    check_ended(outcome, watch.injected_at, 2 * CLOSE)
    record(
        f"env server SIGKILLed mid-episode ({on_failure})",
        "EnvRpcError (env.step, closed-connection hint)",
        outcome,
        watch,
        watch.injected_at,
        kept,
        siblings,
    )


async def test_model_server_sigkilled_mid_run() -> None:
    """Both routes share the model's connection: the first to notice fails, the other ends
    cancelled (or, if it noticed in the same instant, failed the same way)."""
    with our_model() as model:
        watch = Watch(inject_at=30, inject=model.kill)
        shared_sibling = attrs.evolve(sibling(), model=model.address)
        outcome = await run([faulty(cartpole, model.address), shared_sibling], watch, failing=None)
    assert watch.injected_at is not None
    error = outcome.error
    assert isinstance(error, rt.ModelRpcError)
    assert error.message == "transport error: connection closed"
    assert not error.recoverable
    first = next(o for o in outcome.report if o.error is error)
    other = next(o for o in outcome.report if o is not first)
    assert first.status == "failed"
    if other.status == "cancelled":
        assert isinstance(other.error, rt.RouteCancelled)
        assert f"sibling route {first.route_id} failed" in other.error.reason
    else:
        assert other.status == "failed" and isinstance(other.error, rt.ModelRpcError)
    kept = check_kept(outcome, watch)
    check_ended(outcome, watch.injected_at, 2 * CLOSE)
    record(
        "model server SIGKILLed mid-run (shared by both routes)",
        "ModelRpcError (connection closed)",
        outcome,
        watch,
        watch.injected_at,
        kept,
        f"{other.status} ({other.total_episodes} episodes kept)",
    )


# ---------------------------------------------------------------------- stalls


async def test_model_stalls_past_predict_timeout() -> None:
    with our_model("tests._faults_targets:stalling_policy", FAULTS_STALL_AT="30") as model:
        watch = Watch()
        outcome = await run([faulty(cartpole, model.address), sibling()], watch)
    error = outcome.error
    assert isinstance(error, rt.OperationTimeout)
    assert error.operation == "model.predict"
    assert error.route_id == FAULTY
    assert error.component_id == "model"
    assert error.timeout == LIMITS.model_predict_timeout
    # The step the route had reached when the predict stalled.
    assert error.step == outcome.report.outcome(FAULTY).total_steps
    assert str(error) == (
        f"model.predict timed out on route {FAULTY} component model "
        f"at runtime step {error.step} after 1s"
    )
    # Bound: predict timeout, then the failed route's release (queued behind the stalled
    # predict on the server, so it runs out its CLOSE), the sibling's cancel and release, and
    # the shared model client's close grace.
    check_cancelled_run(
        outcome,
        watch,
        "model server stalls past model_predict_timeout",
        "OperationTimeout (model.predict, route, step)",
        since=watch.last_event[FAULTY],  # the stalled predict was sent right after this
        bound=LIMITS.model_predict_timeout + 2 * CLOSE + CLIENT_CLOSE_GRACE,
    )


async def test_env_stalls_past_step_timeout() -> None:
    with our_env("tests._faults_targets:slow_cartpole", FAULTS_STALL_AT="30") as env:
        watch = Watch()
        outcome = await run([faulty(env.address), sibling()], watch)
    error = outcome.error
    assert isinstance(error, rt.OperationTimeout)
    assert error.operation == "env.step"
    assert error.route_id == FAULTY
    assert error.component_id == "env"
    assert error.step == 30  # the step the stalled action would have produced
    assert error.timeout == LIMITS.env_step_timeout
    assert outcome.report.outcome(FAULTY).total_steps == 29
    check_cancelled_run(
        outcome,
        watch,
        "env stalls past env_step_timeout",
        "OperationTimeout (env.step)",
        since=watch.last_event[FAULTY],
        bound=LIMITS.env_step_timeout + 2 * CLOSE,
    )


# ---------------------------------------------------------------------- malformed replies


async def _bad_slab_run(tmp_path: Path) -> tuple[Outcome, Watch, ServerProc]:
    with faulty_server("env-bad-slab", tmp_path / "env.log") as env:
        watch = Watch()
        outcome = await run([faulty(env.address, lambda obs: 0), sibling()], watch)
    return outcome, watch, env


async def test_env_malformed_observation_names_the_leaf(tmp_path: Path) -> None:
    """The driver refuses the short ``$.vel`` slab itself; episodes and siblings are right."""
    outcome, watch, _ = await _bad_slab_run(tmp_path)
    error = outcome.error
    assert isinstance(error, rt.RlmeshTrioError)
    assert isinstance(error, rt.ProtocolError)
    assert "$.vel: environment endpoint" in str(error)
    assert "length mismatch: slab: got 4 bytes, expected 1 lanes * 8" in str(error)
    assert outcome.report.outcome(FAULTY).total_episodes == 2  # GOOD_EPISODES
    check_cancelled_run(
        outcome,
        watch,
        "env replies with a malformed observation (vel slab 4 bytes short)",
        "ProtocolError naming $.vel",
        fault_at=watch.last_event[FAULTY],
    )


async def test_env_malformed_observation_is_a_protocol_error(tmp_path: Path) -> None:
    outcome, _, _ = await _bad_slab_run(tmp_path)
    assert isinstance(outcome.error, rt.ProtocolError)
    assert outcome.error.path == "$.vel"


async def test_model_replies_with_another_routes_context(tmp_path: Path) -> None:
    with faulty_server("model-wrong-context", tmp_path / "model.log") as model:
        watch = Watch()
        routes = [
            faulty(cartpole, model.address, max_episode_steps=5),
            cartpole_route(SIBLING, model.address, 100_000, max_episode_steps=5),
        ]
        started = time.monotonic()
        outcome = await run(routes, watch, failing=None)
        events = model.events()
    assert "wrong-context" in events
    error = outcome.error
    assert isinstance(error, rt.ModelRouteMismatch)
    # Either route may be the one that got the other's context; it is the one that failed.
    failed = next(o for o in outcome.report if o.status == "failed")
    other = next(o for o in outcome.report if o is not failed)
    assert failed.error is error
    assert ":step_observation:" in error.request_id or ":reset_observation:" in error.request_id
    # Named as the route names every model error (test_model_stalls_past_predict_timeout).
    assert error.component_id == "model"
    assert "returned mismatched route identity for request" in str(error)
    assert other.status == "cancelled" and isinstance(other.error, rt.RouteCancelled)
    assert f"sibling route {failed.route_id} failed" in other.error.reason
    for route in outcome.report:
        assert [ep.episode_id for ep in route.episodes] == watch.completed.get(route.route_id, [])
    check_ended(outcome, started, 2 * CLOSE)
    record(
        "model replies with another route's context",
        "ModelRouteMismatch",
        outcome,
        watch,
        started,
        f"{failed.total_episodes} (failed route, all kept)",
        f"RouteCancelled ({other.total_episodes} episodes kept)",
    )


# ---------------------------------------------------------------------- before any Join


async def test_handshake_wrong_protocol_generation(tmp_path: Path) -> None:
    with faulty_server("env-wrong-generation", tmp_path / "env.log") as env:
        watch = Watch()
        outcome = await run([faulty(env.address), sibling()], watch)
        events = env.events()
    assert events == ["handshake"]  # no Join was ever opened
    error = outcome.error
    assert isinstance(error, rt.HandshakeError)
    assert error.address == env.address
    assert env.address in str(error)
    assert "rlmesh-wire-v1" in error.detail and "rlmesh-wire-v2" in error.detail
    check_cancelled_run(
        outcome,
        watch,
        "handshake: wrong protocol generation",
        "HandshakeError before Join, naming address and both generations",
    )


async def test_handshake_no_mutual_edition(tmp_path: Path) -> None:
    with faulty_server("env-no-edition", tmp_path / "env.log") as env:
        watch = Watch()
        outcome = await run([faulty(env.address), sibling()], watch)
        events = env.events()
    assert events == ["handshake"]
    error = outcome.error
    assert isinstance(error, rt.HandshakeError)
    assert error.address == env.address
    assert "no mutual workflow edition" in error.detail
    assert 'env declares no edition and can ["2099.01"]' in error.detail
    assert 'runtime wants "2026.06" and can ["2026.06"]' in error.detail
    assert 'model declares no edition and can ["2026.06"]' in error.detail
    check_cancelled_run(
        outcome,
        watch,
        "handshake: no mutual workflow edition",
        "HandshakeError before Join, naming address and every offer",
    )


async def test_env_endpoint_already_in_use() -> None:
    with our_env() as env:
        async with rt.RemoteEnv(env.address) as holder:
            await holder.connect()
            await holder.configure("2026.06")  # takes the single Join slot
            watch = Watch()
            outcome = await run([faulty(env.address), sibling()], watch)
            # The holder's session is untouched by the refused client.
            await holder.reset(_reset_request())
    error = outcome.error
    assert isinstance(error, rt.ConnectError)
    assert error.address == env.address
    assert "in use by another client" in error.detail
    assert BUSY_MESSAGE in error.detail
    check_cancelled_run(
        outcome,
        watch,
        "env endpoint already in use by another client",
        "ConnectError naming the address",
    )


def _reset_request() -> Any:
    from rlmesh_trio._protocol import env_pb

    return env_pb.ResetRequest(seeds=[0], episode_ids=["held"])


@pytest.mark.parametrize("side", ["env", "model"])
async def test_unreachable_address_refused(side: str) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    watch = Watch()
    route = faulty(address) if side == "env" else faulty(cartpole, address)
    outcome = await run([route, sibling()], watch)
    error = outcome.error
    assert isinstance(error, rt.ConnectError)
    assert error.address == address
    assert error.detail == "connection refused"
    assert str(error) == f"could not connect to {address}: connection refused"
    check_cancelled_run(
        outcome,
        watch,
        f"unreachable {side} address (connection refused)",
        "ConnectError naming the address, fast",
    )


async def _silent_listener_run() -> tuple[Outcome, Watch, str]:
    """A socket that accepts TCP (kernel backlog) but never speaks HTTP/2."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        address = f"127.0.0.1:{sock.getsockname()[1]}"
        watch = Watch()
        limits = attrs.evolve(LIMITS, env_connect_timeout=1.0)
        route = attrs.evolve(faulty(address), limits=limits)
        outcome = await run([route, sibling()], watch)
    return outcome, watch, address


async def test_unreachable_address_silent_times_out_at_connect_limit() -> None:
    outcome, watch, _ = await _silent_listener_run()
    error = outcome.error
    assert isinstance(error, rt.OperationTimeout | rt.ConnectError)
    if isinstance(error, rt.OperationTimeout):
        assert error.operation == "env.connect"
        assert error.timeout == 1.0
    check_cancelled_run(
        outcome,
        watch,
        "unreachable address (listens, never answers; env_connect_timeout=1s)",
        "connect-timeout error naming the address",
        bound=1.0 + 2 * CLOSE,
    )


async def test_unreachable_address_silent_names_the_address() -> None:
    outcome, _, address = await _silent_listener_run()
    assert address in str(outcome.error)


# ---------------------------------------------------------------------- release never answered


@pytest.mark.parametrize("mode", ["model-release-hang", "model-wedged"])
async def test_model_release_never_answers(mode: str, tmp_path: Path) -> None:
    with faulty_server(mode, tmp_path / "model.log") as model:
        watch = Watch()
        routes = [
            cartpole_route(route_id, model.address, 3, max_episode_steps=5)
            for route_id in (FAULTY, SIBLING)
        ]
        outcome = await run(routes, watch)
        events = model.events()
    assert events.count("release_adapter") == 2  # both sent, neither answered
    assert outcome.error is None
    for route in outcome.report:
        assert route.status == "completed"
        assert route.total_episodes == 3
        assert [ep.episode_id for ep in route.episodes] == watch.completed[route.route_id]
    last_episode = max(watch.last_event.values())
    # Releases run concurrently per route, each bounded by CLOSE; a wedged stream then costs
    # the shared client's close grace on top.
    bound = CLOSE + (CLIENT_CLOSE_GRACE if mode == "model-wedged" else 0.0)
    check_ended(outcome, last_episode, bound)
    record(
        "model ReleaseAdapter never answers"
        + (" (stream never ends either)" if mode == "model-wedged" else ""),
        "run still ends within the close timeout",
        outcome,
        watch,
        last_episode,
        "3 + 3 (all, routes completed)",
        "completed",
    )


# ---------------------------------------------------------------------- Ctrl+C while a peer hangs


@attrs.frozen
class Interrupted:
    returncode: int
    stderr: str
    elapsed: float
    report: dict[str, Any]
    episodes_seen: int


INTERRUPT_CLOSE = 2.0


@functools.cache
def _interrupt_while_model_hangs() -> Interrupted:
    """``rlmesh-trio run`` against a model whose 30th predict never returns; SIGINT once hung.

    Cached: the two tests below look at the same (7 s) scenario.
    """
    tmp = Path(tempfile.mkdtemp(prefix="rlmesh-trio-interrupt-"))
    out, stalled = tmp / "partial.json", tmp / "stalled"
    with (
        our_env() as env,
        our_model(
            "tests._faults_targets:stalling_policy",
            FAULTS_STALL_AT="30",
            FAULTS_STALL_MARK=str(stalled),
        ) as model,
    ):
        proc = subprocess.Popen(
            [
                *CLI,
                "run",
                "--env",
                env.address,
                "--model",
                model.address,
                "--episodes",
                "1000",
                "--max-episode-steps",
                "5",
                "--json",
                str(out),
                "--no-progress",
                "--timeouts",
                json.dumps({"serviceCloseTimeoutMs": int(INTERRUPT_CLOSE * 1000)}),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        try:
            deadline = time.monotonic() + 30
            # A bounded poll on a condition (the policy marks its hang as it begins), not
            # a settle-down sleep: the route is awaiting the hung predict from here on.
            while not stalled.exists():
                assert proc.poll() is None and time.monotonic() < deadline, "no stall"
                time.sleep(0.05)
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
            elapsed = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    data = json.loads(out.read_text())
    shutil.rmtree(tmp, ignore_errors=True)
    return Interrupted(proc.returncode, err, elapsed, data, data["total_episodes"])


def test_sigint_while_model_hangs_exits_130_with_partial_report() -> None:
    result = _interrupt_while_model_hangs()
    assert result.returncode == 130, result.stderr
    (route,) = result.report["routes"]
    assert route["status"] == "cancelled"
    assert route["error"]["type"] == "RouteCancelled"
    assert "interrupted by the user" in route["error"]["message"]
    # The episodes finished before the stall are in the partial report.
    assert route["total_episodes"] >= 1
    assert len(route["episodes"]) == route["total_episodes"]
    assert all(ep["steps"] == 5 and ep["truncated"] for ep in route["episodes"])
    # The release queues behind the hung predict and runs out the close timeout; the
    # shared model client then waits its close grace.
    bound = INTERRUPT_CLOSE + CLIENT_CLOSE_GRACE + 1.0
    assert result.elapsed <= bound + SLACK
    MATRIX.append(
        Row(
            "SIGINT to `rlmesh-trio run` while the model hangs (close timeout 2 s)",
            "exit 130 within close timeout + 1 s, partial JSON report",
            f"exit {result.returncode}: {result.stderr.strip().splitlines()[-1]}",
            result.elapsed,
            result.elapsed,
            f"{route['total_episodes']} (all kept)",
            "-",
        )
    )


def test_sigint_while_model_hangs_exits_within_close_timeout_plus_one_second() -> None:
    result = _interrupt_while_model_hangs()
    assert result.returncode == 130
    assert result.elapsed <= INTERRUPT_CLOSE + 1.0
