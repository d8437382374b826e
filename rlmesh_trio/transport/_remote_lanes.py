"""A served lane endpoint (``subset_step``) as a lane block: many lanes per call, on arrays.

:class:`RemoteLaneBlock` sits on a configured :class:`RemoteEnv` whose spaces
are fixed-stride (Box, Discrete, MultiBinary, MultiDiscrete). Against a server
that advertises ``CAP_MULTI_LANE_SUBSET`` (ours) a block reset is one
``ResetRequest`` per distinct reset option and a block step is ONE
``StepRequest`` naming every lane in ``env_indices``, with the actions encoded
as one slab and the observations decoded as one array. Against any other
lane server (rlmesh 0.1.0's) it falls back to what 0.1.0 runtimes send: one
request per lane, all lanes in flight at once on the one stream (§4.5).

The block remembers each lane's episode id (given or minted at its reset) and
sends it with that lane's steps, as the 0.1.0 runtime does; the server echoes
it in ``completed_episodes``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import betterproto2
import numpy as np
import trio

from .. import spaces
from .._endpoints import EndpointInfo
from .._errors import EnvRpcError, ProtocolError
from .._wire import CAP_MULTI_LANE_SUBSET, CAP_SUBSET_STEP, env_pb, spaces_pb
from ..runtime._spec import mint_uuid7
from ._lane_values import BlockReset, BlockStep, lane_infos, step_arrays
from ._remote_env import RemoteEnv

__all__ = ["RemoteLaneBlock", "lane_block"]

#: Space kinds whose values stack into one array per block (no per-lane Python objects).
_ARRAY_KINDS = frozenset({"box", "discrete", "multi_binary", "multi_discrete"})

#: ``(options, seeded)``: lanes sharing both go in one ResetRequest.
_GroupKey = tuple[int, bool]


def _is_array_space(spec: spaces_pb.SpaceSpec | None) -> bool:
    if spec is None:
        return False
    return betterproto2.which_one_of(spec, "spec")[0] in _ARRAY_KINDS


def lane_block(env: RemoteEnv) -> RemoteLaneBlock | None:
    """The lane block over ``env`` (connected), or None where there is no block path.

    There is one for a lane server (``subset_step``) whose action and
    observation spaces are fixed-stride; anything else is driven lane by
    lane (or as a whole-width env) as before.
    """
    info = env.info
    if info is None or info.contract is None or not info.has_capability(CAP_SUBSET_STEP):
        return None
    spec = info.contract.spec
    if spec is None:
        return None
    if not (_is_array_space(spec.action_space) and _is_array_space(spec.observation_space)):
        return None
    return RemoteLaneBlock(env, info)


class RemoteLaneBlock:
    """A lane server's lanes reset and stepped in blocks (see the module docstring).

    Use :func:`lane_block` to build one; the env must be configured (Join open)
    before the first call. Every call may be cancelled; like any cancelled
    Join call, that tears the stream down.
    """

    def __init__(self, env: RemoteEnv, info: EndpointInfo) -> None:
        contract = info.contract
        assert contract is not None and contract.spec is not None
        assert contract.spec.action_space is not None
        assert contract.spec.observation_space is not None
        self.env = env
        self._action_spec: spaces_pb.SpaceSpec = contract.spec.action_space
        self._observation_spec: spaces_pb.SpaceSpec = contract.spec.observation_space
        self._num_lanes = max(1, contract.num_envs)
        #: Whether one request may name several lanes (else one request per lane).
        self.multi_lane = info.has_capability(CAP_MULTI_LANE_SUBSET)
        self._ids = [""] * self._num_lanes

    @property
    def num_lanes(self) -> int:
        return self._num_lanes

    def episode_id(self, lane: int) -> str:
        """The id of the episode ``lane`` runs (its last reset's)."""
        return self._ids[lane]

    # -- resets ------------------------------------------------------------------------

    async def reset_lanes(
        self,
        lanes: np.ndarray | Sequence[int],
        seeds: Sequence[int | None],
        options: Sequence[Mapping[str, Any] | None],
        timeout: float,
        episode_ids: Sequence[str] | None = None,
    ) -> BlockReset:
        """Start a new episode on each lane in ``lanes`` (seeds, options and ids by position).

        Lanes sharing the same options and seededness go in one request (all of them in
        one, in the common case); without ``CAP_MULTI_LANE_SUBSET`` each lane goes alone.
        ``episode_ids`` default to fresh UUIDv7s. ``timeout`` (seconds) is sent as the
        request's ``timeout_ms``; the caller bounds the wait.

        Raises:
            EnvRpcError: the env refused or failed a reset (the message names the lanes).
            ProtocolError: the reply does not fit the observation space.
        """
        order = [int(lane) for lane in lanes]
        count = len(order)
        if len(seeds) != count or len(options) != count:
            raise ValueError(f"reset_lanes: {count} lanes need {count} seeds and options")
        ids = list(episode_ids) if episode_ids is not None else [mint_uuid7() for _ in order]
        groups = self._reset_groups(seeds, options)
        rows: list[np.ndarray | None] = [None] * len(groups)
        infos: list[dict[str, Any]] = [{} for _ in order]
        timeout_ms = _ms(timeout)

        async def one(g: int, positions: list[int]) -> None:
            rows[g] = await self._reset_group(
                positions, order, seeds, options, ids, timeout_ms, infos
            )

        await _all(one, list(enumerate(groups.values())))
        observations = self._assemble(groups, rows, count)
        for lane, episode_id in zip(order, ids, strict=True):
            self._ids[lane] = episode_id
        return BlockReset(observations=observations, infos=infos, episode_ids=tuple(ids))

    def _reset_groups(
        self, seeds: Sequence[int | None], options: Sequence[Mapping[str, Any] | None]
    ) -> dict[_GroupKey | int, list[int]]:
        """Positions grouped per request: by (options, seeded), or one per lane."""
        if not self.multi_lane:
            return {k: [k] for k in range(len(seeds))}
        distinct: list[Mapping[str, Any] | None] = []
        groups: dict[_GroupKey | int, list[int]] = {}
        for k, (seed, option) in enumerate(zip(seeds, options, strict=True)):
            if option not in distinct:
                distinct.append(option)
            groups.setdefault((distinct.index(option), seed is not None), []).append(k)
        return groups

    async def _reset_group(
        self,
        positions: list[int],
        order: list[int],
        seeds: Sequence[int | None],
        options: Sequence[Mapping[str, Any] | None],
        ids: list[str],
        timeout_ms: int,
        infos: list[dict[str, Any]],
    ) -> np.ndarray:
        """One ResetRequest for ``positions`` (of ``order``); their rows, in that order."""
        lanes = [order[k] for k in positions]
        chosen = [seeds[k] for k in positions]
        option = options[positions[0]]
        request = env_pb.ResetRequest(
            seeds=[s for s in chosen if s is not None] if chosen[0] is not None else [],
            options=spaces.meta_map_from_python(option) if option is not None else None,
            timeout_ms=timeout_ms,
            env_indices=lanes,
            episode_ids=[ids[k] for k in positions],
        )
        try:
            reply = (await self.env.reset(request)).response
        except EnvRpcError as exc:
            raise _naming(exc, lanes) from None
        rows = self._observations(reply.observation, len(lanes), "env.reset")
        for k, info in zip(positions, lane_infos(reply.infos, len(lanes)), strict=True):
            infos[k] = info
        return rows

    # -- steps -------------------------------------------------------------------------

    async def step_lanes(
        self, lanes: np.ndarray | Sequence[int], actions: np.ndarray, timeout: float
    ) -> BlockStep:
        """Step every lane in ``lanes`` with its row of ``actions`` (one request if the
        server takes several lanes, else one per lane, all in flight at once).

        Raises:
            EnvRpcError: the env refused or failed the step (the message names the lanes).
            ProtocolError: the reply does not fit (widths, lanes echoed, observation space).
        """
        order = [int(lane) for lane in lanes]
        count = len(order)
        timeout_ms = _ms(timeout)
        if self.multi_lane or count == 1:
            return await self._step_group(order, actions, timeout_ms)
        parts: list[BlockStep | None] = [None] * count

        async def one(k: int, lane: int) -> None:
            parts[k] = await self._step_group([lane], actions[k : k + 1], timeout_ms)

        await _all(one, list(enumerate(order)))
        return BlockStep.join([p for p in parts if p is not None])

    async def _step_group(
        self, lanes: list[int], actions: np.ndarray, timeout_ms: int
    ) -> BlockStep:
        count = len(lanes)
        try:
            value = spaces.encode_stacked(self._action_spec, actions, count)
        except ProtocolError as exc:
            raise ProtocolError(
                f"actions for lanes {_lanes_text(lanes)}: {exc.detail}", path=exc.path
            ) from None
        ids = self._ids
        request = env_pb.StepRequest(
            action=value,
            timeout_ms=timeout_ms,
            env_indices=lanes,
            episode_ids=[ids[lane] for lane in lanes],
        )
        try:
            reply = (await self.env.step(request)).response
        except EnvRpcError as exc:
            raise _naming(exc, lanes) from None
        if reply.env_indices and list(reply.env_indices) != lanes:
            raise ProtocolError(
                f"env.step: the env answered lanes {list(reply.env_indices)} for lanes {lanes}"
            )
        observations = self._observations(reply.observation, count, "env.step")
        return step_arrays(reply, observations, count)

    # -- values ------------------------------------------------------------------------

    def _observations(self, value: spaces_pb.SpaceValue | None, count: int, op: str) -> np.ndarray:
        if value is None:
            raise ProtocolError(f"{op}: the env sent no observation")
        rows = spaces.decode_stacked(self._observation_spec, value, count, copy=False)
        assert isinstance(rows, np.ndarray)
        return rows

    @staticmethod
    def _assemble(
        groups: dict[Any, list[int]], rows: list[np.ndarray | None], count: int
    ) -> np.ndarray:
        """The groups' rows put back in the order the lanes were asked in."""
        parts = [r for r in rows if r is not None]
        if len(parts) == 1:
            return parts[0]
        out = np.empty((count, *parts[0].shape[1:]), dtype=parts[0].dtype)
        for positions, part in zip(groups.values(), parts, strict=True):
            out[positions] = part
        return out


def _ms(timeout: float) -> int:
    return max(1, int(timeout * 1000)) if timeout and timeout != float("inf") else 0


def _lanes_text(lanes: Sequence[int]) -> str:
    return str(lanes[0]) if len(lanes) == 1 else "[" + ", ".join(map(str, lanes)) + "]"


def _naming(exc: EnvRpcError, lanes: Sequence[int]) -> EnvRpcError:
    """``exc`` with the lane(s) of the failed request named in its message."""
    where = f"env_index {lanes[0]}" if len(lanes) == 1 else f"env_indices {_lanes_text(lanes)}"
    return EnvRpcError(
        exc.operation,
        exc.step,
        f"{where}: {exc.message}",
        code=exc.code,
        recoverable=exc.recoverable,
    )


async def _all(fn: Any, jobs: list[tuple[int, Any]]) -> None:
    """Run ``fn(*job)`` for every job: inline for one, concurrently for more.

    Raises:
        Exception: the first job's error, bare (it cancels the other jobs).
    """
    if len(jobs) == 1:
        await fn(*jobs[0])
        return
    failures: list[Exception] = []
    async with trio.open_nursery() as nursery:

        async def job_task(job: tuple[int, Any]) -> None:
            try:
                await fn(*job)
            except Exception as exc:
                if not failures:
                    failures.append(exc)
                nursery.cancel_scope.cancel()

        for job in jobs:
            nursery.start_soon(job_task, job)
    if failures:
        raise failures[0]
