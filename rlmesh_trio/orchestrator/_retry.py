"""Which route errors a reconnect can cure, and how long to wait before trying.

Retriable: the connection to an env or model broke or could not be made
(``ConnectError``; ``EnvRpcError`` / ``ModelRpcError`` whose source is the
transport, not the peer's own error), or an env operation ran past its limit
(``OperationTimeout`` on ``env.*``). Never retried: ``ProtocolError``,
``InvalidSpec``, ``HookError``, ``ModelRouteMismatch``, ``HandshakeError``,
and any error the peer itself reported (an env's ``INVALID_ACTION`` and
every other coded ``EnvError`` / ``ModelError``): a rerun would meet it again.
"""

from __future__ import annotations

import random

import attrs

from .._errors import (
    ConnectError,
    EnvRpcError,
    ModelRpcError,
    OperationTimeout,
)

__all__ = ["DEFAULT_BACKOFF", "MAX_BACKOFF", "RetryPolicy", "is_retriable"]

#: First retry's nominal wait, seconds (doubling for each further retry of a route).
DEFAULT_BACKOFF = 0.5
#: No wait is ever longer than this, seconds.
MAX_BACKOFF = 30.0
#: Transport-side failure messages start with this (see transport._join / _local_env).
_TRANSPORT = "transport error"


def is_retriable(error: BaseException) -> bool:
    """Whether a new session (reconnect, configure, resolve) could cure ``error``."""
    if isinstance(error, ConnectError):
        return True
    if isinstance(error, EnvRpcError | ModelRpcError):
        return error.code is None and error.message.startswith(_TRANSPORT)
    if isinstance(error, OperationTimeout):
        return error.operation.startswith("env.")
    return False


@attrs.frozen
class RetryPolicy:
    """``retries`` reruns per route; waits grow as ``backoff * 2**(n-1)``, capped, jittered.

    The n-th wait is drawn uniformly from ``[d/2, d]`` with
    ``d = min(max_backoff, backoff * 2**(n-1))`` ("equal jitter"): routes that
    lost the same server do not all knock on it at the same instant, and no
    wait exceeds ``max_backoff``. Built from a :class:`~rlmesh_trio.RunOptions`
    (``retry_policy``), which checked ``retries`` and ``retry_backoff``: not here again.
    """

    retries: int = 0
    backoff: float = DEFAULT_BACKOFF
    max_backoff: float = MAX_BACKOFF

    def delay(self, retry: int, rng: random.Random) -> float:
        """Seconds to wait before the ``retry``-th rerun (1-based)."""
        nominal = min(self.max_backoff, self.backoff * 2.0 ** max(0, retry - 1))
        return rng.uniform(nominal / 2.0, nominal)
