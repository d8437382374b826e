"""The env of a fused block: the single envs of many in-process endpoints as one block.

Routes that share one in-process policy run as one fused block (see
``rlmesh_trio.runtime._fused``). Their env endpoints are :class:`LocalEnv`
objects over one gymnasium env each (or a list of them): :meth:`FusedEnvs.add`
takes each endpoint's envs as the block's next lanes, so one ``step_lanes``
call steps every route's env in one tight loop, with the checks and messages
of a one-route block (``_envhost/_block.py``). Endpoints join only with the
spaces (exactly: ``same_space``) and action checks of the first one.

Calls run where an adaptive placement says (inline on the Trio thread while
each lane's step stays fast, else in a worker thread), judged per lane.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import trio

from .._blocks import BlockReset, BlockStep
from .._envhost._block import EnvBlock
from ..runtime._placement import DEFAULT_INLINE_LIMIT, TIME_SLICE, CallPlacement
from ._local_env import LocalEnv

__all__ = ["FusedEnvs"]


class FusedEnvs:
    """The lanes of every joined :class:`LocalEnv`, in join order (a ``LaneBlockEnv``)."""

    def __init__(self) -> None:
        self._envs: list[Any] = []
        #: The first endpoint's block: its spaces and checks are the fused block's.
        self._first: EnvBlock | None = None
        # The block over every joined env, built at the first call after a join (not per
        # join: the routes of a run join one by one before the first round).
        self._block: EnvBlock | None = None
        self.placement = CallPlacement(
            None, inline_limit=DEFAULT_INLINE_LIMIT, time_slice=TIME_SLICE
        )
        self.placement.set_limiter(trio.CapacityLimiter(1))

    def add(self, endpoint: Any) -> int | None:
        """Take ``endpoint``'s envs as the next lanes: the first one's index, or None when
        it is not a ready in-process endpoint over single envs with the block's spaces."""
        block = endpoint.lane_block if isinstance(endpoint, LocalEnv) else None
        if block is None or block.envs is None:
            return None
        first = self._first
        if first is None:
            first = self._first = block
        elif not first.fuses_with(block):
            return None
        offset = len(self._envs)
        self._envs.extend(block.envs)
        self._block = None
        return offset

    def _joined(self) -> EnvBlock:
        """The block over every env joined so far."""
        block = self._block
        if block is None:
            assert self._first is not None, "a call before any endpoint joined"
            block = self._block = self._first.fused(self._envs)
        return block

    @property
    def block_ready(self) -> bool:
        return self._first is not None

    @property
    def num_lanes(self) -> int:
        return len(self._envs)

    async def reset_lanes(
        self,
        lanes: np.ndarray,
        seeds: Sequence[int | None],
        options: Sequence[Mapping[str, Any] | None],
        timeout: float,
        *,
        episode_ids: Sequence[str] | None = None,
    ) -> BlockReset:
        """Reset ``lanes`` in one call (see ``LaneBlockEnv``); ``timeout`` is the caller's.

        Cancellation: a threaded call is abandoned.
        Raises:
            EnvRpcError: a lane's reset raised (``env_index``: the block's lane).
        """
        reply: BlockReset = await self._call(self._joined().reset, lanes, seeds, options)
        return reply

    async def step_lanes(self, lanes: np.ndarray, actions: np.ndarray, timeout: float) -> BlockStep:
        """Step ``lanes`` in one call (see ``LaneBlockEnv``); ``timeout`` is the caller's.

        Cancellation: a threaded call is abandoned.
        Raises:
            EnvRpcError: an invalid action, or a lane's env raised (``env_index`` set).
        """
        reply: BlockStep = await self._call(self._joined().step, lanes, actions)
        return reply

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        start = time.perf_counter_ns()
        reply = await self.placement.run(fn, *args, rows=len(args[0]))
        took = (time.perf_counter_ns() - start) / 1e6
        reply.telemetry.update({"endpoint.total": took, "endpoint.user": took})
        return reply
