"""The three timed phases of one predict: decode the observation, call the policy, encode.

Each wrapper adds its duration to a :class:`PhaseTimes` (reported on the
response as ``decode_ns``, ``user_ns`` and ``encode_ns``, as 0.1.0 servers do)
and turns a failure into the :class:`ModelFault` with 0.1.0's message.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from .._errors import ProtocolError
from .._protocol import spaces_pb
from ._faults import ModelFault
from ._policy import PolicyFn

__all__ = [
    "ENCODE_ERRORS",
    "Invoke",
    "PhaseTimes",
    "decode_fault",
    "describe",
    "encode_fault",
    "timed_call",
    "timed_decode",
    "timed_encode",
]

#: Runs one user function on one argument in the caller's world and returns its result.
Invoke = Callable[[PolicyFn, Any], Awaitable[Any]]


class PhaseTimes:
    """Where one request's time went, in nanoseconds (reported as ``decode_ns``,
    ``user_ns`` and ``encode_ns`` on the response)."""

    __slots__ = ("decode_ns", "encode_ns", "user_ns")

    def __init__(self) -> None:
        self.decode_ns = 0
        self.user_ns = 0
        self.encode_ns = 0


def describe(exc: ProtocolError) -> str:
    """A codec error as one line: ``path: detail`` (just the detail at the top level)."""
    return f"{exc.path}: {exc.detail}" if exc.path else exc.detail


#: What an encoder raises for an action that does not fit the action space.
ENCODE_ERRORS = (ProtocolError, TypeError, ValueError, OverflowError)


def decode_fault(exc: ProtocolError) -> ModelFault:
    """The fault for an observation that does not fit the observation space."""
    return ModelFault.internal(f"internal error: model error: {describe(exc)}")


def encode_fault(exc: Exception) -> ModelFault:
    """The fault for a policy action that does not fit the action space (one of
    :data:`ENCODE_ERRORS`)."""
    detail = describe(exc) if isinstance(exc, ProtocolError) else f"{type(exc).__name__}: {exc}"
    return ModelFault.internal(
        "internal error: model error: the policy returned an action that does not fit "
        f"the action space: {detail}"
    )


async def timed_call(invoke: Invoke, fn: PolicyFn, arg: Any, times: PhaseTimes) -> Any:
    """``fn(arg)`` through ``invoke``, timed as user time.

    Cancellation: whatever ``invoke`` does; the time spent is counted either way.

    Raises:
        ModelFault: the policy raised (a ModelError naming its exception).
    """
    started = time.perf_counter_ns()
    try:
        return await invoke(fn, arg)
    except Exception as exc:  # the user's policy failed: a ModelError naming the exception
        raise ModelFault.from_exception(exc) from exc
    finally:
        times.user_ns += time.perf_counter_ns() - started


def timed_decode(
    decoder: Callable[..., Any],
    spec: spaces_pb.SpaceSpec,
    value: Any,
    rows: int,
    times: PhaseTimes,
) -> Any:
    """``decoder(spec, value, rows)``, timed as decoding.

    Raises:
        ModelFault: INTERNAL when the observation does not fit ``spec``.
    """
    started = time.perf_counter_ns()
    try:
        return decoder(spec, value, rows)
    except ProtocolError as exc:
        raise decode_fault(exc) from None
    finally:
        times.decode_ns += time.perf_counter_ns() - started


def timed_encode(
    encoder: Callable[..., Any], spec: spaces_pb.SpaceSpec, times: PhaseTimes, *args: Any
) -> Any:
    """``encoder(spec, *args)``, timed as encoding.

    Raises:
        ModelFault: INTERNAL when the policy's action does not fit the action space.
    """
    started = time.perf_counter_ns()
    try:
        return encoder(spec, *args)
    except ENCODE_ERRORS as exc:
        raise encode_fault(exc) from None
    finally:
        times.encode_ns += time.perf_counter_ns() - started
