"""The package's exception hierarchy.

Every error this package raises on purpose derives from :class:`RlmeshTrioError`.
The route error kinds mirror the reference runtime driver one for one, and
their ``str()`` reads the same way, so logs from either runtime look alike.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ConnectError",
    "EnvRpcError",
    "HandshakeError",
    "HookError",
    "InvalidSpec",
    "ModelRouteMismatch",
    "ModelRpcError",
    "OperationTimeout",
    "PolicyError",
    "ProtocolError",
    "RlmeshTrioError",
    "RouteCancelled",
    "RunFileError",
    "ShardLost",
    "WrongEventLoop",
    "format_duration",
    "rebuild_exception",
]

#: The source message of an env error whose Join stream closed before the reply came.
CLOSED_CONNECTION_SOURCE = "transport error: connection closed"
CLOSED_CONNECTION_HINT = (
    "If the source is 'transport error: connection closed', the environment server exited, "
    "crashed, or received SIGTERM before replying; inspect the environment container logs "
    "immediately before the runtime error timestamp"
)


def format_duration(seconds: float) -> str:
    """Render a duration the way the reference driver prints one (``300s``, ``1.5s``, ``200ms``)."""
    if seconds >= 1 or seconds == 0:
        text = f"{seconds:.9f}".rstrip("0").rstrip(".")
        return f"{text}s"
    millis = seconds * 1000
    if millis >= 1:
        return f"{millis:.6f}".rstrip("0").rstrip(".") + "ms"
    micros = millis * 1000
    if micros >= 1:
        return f"{micros:.3f}".rstrip("0").rstrip(".") + "µs"
    return f"{round(micros * 1000)}ns"


def rebuild_exception(
    cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]
) -> Any:
    """Recreate a pickled exception from its ``args`` and fields, without calling ``__init__``.

    Our constructors take the fields (``route_id``, ``step``, ...) and build
    the message from them, so the default pickling, which calls
    ``cls(*args)`` with the message alone, cannot recreate them.
    """
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class RlmeshTrioError(Exception):
    """Base class of every error raised by rlmesh-trio.

    Every subclass pickles with its fields (``args`` and ``__dict__`` as they
    are), so a report with a failed route can cross a process boundary.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (rebuild_exception, (type(self), self.args, dict(self.__dict__)))


class InvalidSpec(RlmeshTrioError):
    """A route or session spec failed validation before anything was sent."""

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(f"invalid runtime session spec: {detail}")


class RunFileError(InvalidSpec):
    """A file the user named (a run report, a ledger) cannot be read or written as one.

    ``str()`` is the detail alone ("PATH: is a PNG image, not ..."): a file is
    not a session spec, so the spec prefix of :class:`InvalidSpec` is left off.
    It stays an :class:`InvalidSpec` so callers that catch a user's mistake
    catch this one too.
    """

    def __init__(self, detail: str) -> None:
        self.detail = detail
        RlmeshTrioError.__init__(self, detail)


class OperationTimeout(RlmeshTrioError):
    """One remote operation (``env.reset``, ``env.step``, ...) ran past its limit.

    ``fused_with``: the other routes whose lanes were in the same call (routes
    sharing one in-process policy run as one fused block: one predict, one step
    of all their envs), named after the route the error fails.
    """

    def __init__(
        self,
        route_id: str,
        component_id: str,
        operation: str,
        step: int,
        timeout: float,
        *,
        fused_with: tuple[str, ...] = (),
    ) -> None:
        self.route_id = route_id
        self.component_id = component_id
        self.operation = operation
        self.step = step
        self.timeout = timeout
        self.fused_with = fused_with
        text = (
            f"{operation} timed out on route {route_id} component {component_id} "
            f"at runtime step {step} after {format_duration(timeout)}"
        )
        if fused_with:
            text += f" (one fused call with {_some_routes(fused_with)})"
        super().__init__(text)


def _some_routes(route_ids: tuple[str, ...], shown: int = 3) -> str:
    """``route r1``, ``routes r1, r2``, ``routes r1, r2, r3 and 29 more``."""
    if len(route_ids) == 1:
        return f"route {route_ids[0]}"
    named = ", ".join(route_ids[:shown])
    more = len(route_ids) - shown
    return f"routes {named} and {more} more" if more > 0 else f"routes {named}"


class RouteCancelled(RlmeshTrioError):
    """A route stopped because it was cancelled: a sibling failed, or the caller cancelled."""

    def __init__(self, route_id: str, step: int, reason: str) -> None:
        self.route_id = route_id
        self.step = step
        self.reason = reason
        super().__init__(f"route {route_id} cancelled at runtime step {step}: {reason}")


class EnvRpcError(RlmeshTrioError):
    """The environment endpoint failed an operation (an ``EnvError``, or the connection broke).

    The message ends with the reference driver's "inspect the environment
    container logs" hint only when ``message`` is exactly
    ``CLOSED_CONNECTION_SOURCE`` (a served env's stream closed before it
    replied): for an env error, an in-process env or an invalid action the
    hint would point the wrong way.

    ``env_index`` names the lane at fault when a call covered many lanes
    (a lane block); the text then says ``on env_index K``.
    """

    def __init__(
        self,
        operation: str,
        step: int,
        message: str,
        *,
        code: int | None = None,
        recoverable: bool = False,
        env_index: int | None = None,
    ) -> None:
        self.operation = operation
        self.step = step
        self.message = message
        self.code = code
        self.recoverable = recoverable
        self.env_index = env_index
        where = "" if env_index is None else f" on env_index {env_index}"
        text = f"environment {operation} failed at runtime step {step}{where}: {message}"
        if message == CLOSED_CONNECTION_SOURCE:
            text = f"{text}. {CLOSED_CONNECTION_HINT}"
        super().__init__(text)


class ModelRpcError(RlmeshTrioError):
    """The model endpoint failed a request (a ``ModelError``, or the connection broke).

    ``env_index`` names the lane whose row was at fault in a block predict, when
    one row was; the text then says ``on env_index K``.
    """

    def __init__(
        self,
        component_id: str,
        message: str,
        *,
        code: int | None = None,
        recoverable: bool = False,
        env_index: int | None = None,
    ) -> None:
        self.component_id = component_id
        self.message = message
        self.code = code
        self.recoverable = recoverable
        self.env_index = env_index
        where = "" if env_index is None else f" on env_index {env_index}"
        super().__init__(f"model endpoint {component_id} request failed{where}: {message}")


class ModelRouteMismatch(RlmeshTrioError):
    """The model answered with an ``AdapterContext`` other than the one it was sent."""

    def __init__(self, component_id: str, request_id: str) -> None:
        self.component_id = component_id
        self.request_id = request_id
        super().__init__(
            f"model endpoint {component_id} returned mismatched route identity "
            f"for request {request_id}"
        )


class ProtocolError(RlmeshTrioError):
    """A peer sent bytes or messages that break the wire-v1 protocol.

    ``path`` names the leaf of a value (``$.image``, ``$.pair[1]``) when the
    fault is inside a payload.
    """

    def __init__(self, detail: str, *, path: str | None = None) -> None:
        self.detail = detail
        self.path = path
        text = f"{path}: {detail}" if path else detail
        super().__init__(f"protocol error: {text}")


class HandshakeError(RlmeshTrioError):
    """A peer's handshake ruled the connection out (generation, editions, contract)."""

    def __init__(self, address: str, detail: str) -> None:
        self.address = address
        self.detail = detail
        super().__init__(f"handshake with {address} failed: {detail}")


class ConnectError(RlmeshTrioError):
    """An endpoint could not be reached, or refused the session (busy, unreachable, timed out)."""

    def __init__(self, address: str, detail: str) -> None:
        self.address = address
        self.detail = detail
        super().__init__(f"could not connect to {address}: {detail}")


class HookError(RlmeshTrioError):
    """A transform hook failed; transforms are fatal to their route."""

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(f"runtime hook failed: {detail}")


class ShardLost(RlmeshTrioError):
    """A distributed route's shard died ``attempts`` times; its owed tickets never ran."""

    def __init__(self, route_id: str, shard_id: str, attempts: int, detail: str) -> None:
        self.route_id = route_id
        self.shard_id = shard_id
        self.attempts = attempts
        self.detail = detail
        super().__init__(
            f"route {route_id} lost its shard {attempts} time(s) (last {shard_id}: {detail})"
        )


class WrongEventLoop(RlmeshTrioError, RuntimeError):
    """An entry point was called where it cannot run, with the call that fits there.

    ``run_routes`` awaited outside Trio (e.g. under asyncio), or the blocking
    ``run`` called inside a running Trio or asyncio loop.
    """

    def __init__(self, detail: str) -> None:
        self.detail = detail
        super().__init__(detail)


class PolicyError(RlmeshTrioError):
    """A framework policy (torch, jax, Stable-Baselines3) failed on a batch of observations.

    ``policy`` names the wrapper and the wrapped model (``TorchPolicy(Sequential)``);
    the original exception is the ``__cause__``.
    """

    def __init__(self, policy: str, detail: str) -> None:
        self.policy = policy
        self.detail = detail
        super().__init__(f"{policy} raised {detail}")
