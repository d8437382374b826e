"""A served lane endpoint (``subset_step``) as a lane block: many lanes per call, on arrays.

:class:`RemoteLaneBlock` drives the lanes of an env endpoint (a configured
:class:`~._remote_env.RemoteEnv`) whose observation and action spaces are
Box or Discrete. Against a server that advertises ``CAP_MULTI_LANE_SUBSET``
(ours) a block step is ONE ``StepRequest`` naming every lane in
``env_indices``, the actions encoded as one slab and the observations decoded
as one array, and a block reset is one ``ResetRequest`` per distinct reset
option (one in the common case: ``options`` is one map per request). Against
any other lane server (rlmesh 0.1.0's, which does not say) it sends what
0.1.0 runtimes send: one request per lane, every lane in flight at once on
the one stream (protocol notes §4.5).

The block remembers each lane's episode id (the caller's, or minted at its
reset) and sends it with that lane's steps, as the 0.1.0 runtime does; the
server echoes it in ``completed_episodes``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import betterproto2
import numpy as np
import trio

from ... import spaces
from ..._blocks import BlockReset
from ..._endpoints import EndpointInfo, Reply, RuntimeEnv
from ..._errors import EnvRpcError, ProtocolError
from ..._protocol import CAP_MULTI_LANE_SUBSET, CAP_SUBSET_STEP, core_pb, env_pb, spaces_pb
from ...runtime._spec import mint_uuid7
from ._lane_values import ServedBlockStep, join_steps, lane_infos, step_arrays

__all__ = ["RemoteLaneBlock", "block_info"]

#: Space kinds a block moves as arrays (what the block driver checks and stacks).
_ARRAY_KINDS = frozenset({"box", "discrete"})
#: The autoreset modes under which the caller owns resets (a lane server's is DISABLED).
_DRIVER_RESETS = frozenset({core_pb.AutoresetMode.DISABLED, core_pb.AutoresetMode.UNSPECIFIED})
#: How our lane server names the lane at fault in a several-lane request's error.
_NAMED_LANE = re.compile(r"env_index (\d+): ")


def _is_array_space(spec: spaces_pb.SpaceSpec | None) -> bool:
    return spec is not None and betterproto2.which_one_of(spec, "spec")[0] in _ARRAY_KINDS


def block_info(info: EndpointInfo | None) -> EndpointInfo | None:
    """``info`` when its endpoint can be driven as a lane block, else None.

    It can when it is a lane server (``subset_step``, driver-owned resets)
    whose action and observation spaces are Box or Discrete.
    """
    if info is None or info.contract is None or not info.has_capability(CAP_SUBSET_STEP):
        return None
    contract = info.contract
    spec = contract.spec
    if spec is None or contract.autoreset_mode not in _DRIVER_RESETS:
        return None
    if not (_is_array_space(spec.action_space) and _is_array_space(spec.observation_space)):
        return None
    return info


class RemoteLaneBlock:
    """An env endpoint's lanes reset and stepped in blocks (see the module docstring).

    ``env`` is configured (its Join open) before the first call. Every call
    may be cancelled; like any cancelled Join call, that tears the stream down.
    """

    def __init__(self, env: RuntimeEnv, info: EndpointInfo) -> None:
        contract = info.contract
        assert contract is not None and contract.spec is not None
        assert contract.spec.action_space is not None
        assert contract.spec.observation_space is not None
        self._env = env
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
        *,
        episode_ids: Sequence[str] | None = None,
    ) -> BlockReset:
        """Start a new episode on each of ``lanes`` (seeds, options and ids by position).

        Lanes sharing their options and seededness go in one request; without
        ``CAP_MULTI_LANE_SUBSET`` each lane goes alone. ``episode_ids`` default to
        fresh UUIDv7s. ``timeout`` (seconds) is sent as the requests' ``timeout_ms``.

        Raises:
            EnvRpcError: the env refused or failed a reset (``env_index``: the lane).
            ProtocolError: the reply does not fit the observation space.
        """
        order = [int(lane) for lane in lanes]
        count = len(order)
        if len(seeds) != count or len(options) != count:
            raise ValueError(f"reset_lanes: {count} lanes need {count} seeds and options")
        ids = list(episode_ids) if episode_ids is not None else [mint_uuid7() for _ in order]
        groups = self._reset_groups(seeds, options)
        rows: list[np.ndarray | None] = [None] * len(groups)
        infos: list[Mapping[str, Any]] = [{} for _ in order]
        telemetry: dict[str, float] = {}
        timeout_ms = _ms(timeout)

        async def one(g: int) -> None:
            positions = groups[g]
            lanes_of = [order[k] for k in positions]
            option = options[positions[0]]
            request = env_pb.ResetRequest(
                seeds=[s for s in (seeds[k] for k in positions) if s is not None],
                options=spaces.meta_map_from_python(option) if option is not None else None,
                timeout_ms=timeout_ms,
                env_indices=lanes_of,
                episode_ids=[ids[k] for k in positions],
            )
            reply = await _calling(self._env.reset, request, "env.reset", lanes_of)
            rows[g] = self._observations(reply.response.observation, lanes_of)
            got = lane_infos(reply.response.infos, len(positions))
            for k, info in zip(positions, got, strict=True):
                infos[k] = info
            telemetry.update(reply.telemetry)

        await _all([functools.partial(one, g) for g in range(len(groups))])
        for lane, episode_id in zip(order, ids, strict=True):
            self._ids[lane] = episode_id
        return BlockReset(
            observations=_assemble([r for r in rows if r is not None], groups, count),
            infos=infos,
            telemetry=telemetry,
        )

    def _reset_groups(
        self, seeds: Sequence[int | None], options: Sequence[Mapping[str, Any] | None]
    ) -> list[list[int]]:
        """Positions grouped per request: by (options, seeded), or one per lane.

        One ``ResetRequest`` has one ``options`` map and seeds for all its lanes or none.
        """
        if not self.multi_lane:
            return [[k] for k in range(len(seeds))]
        distinct: list[Mapping[str, Any] | None] = []
        groups: dict[tuple[int, bool], list[int]] = {}
        for k, (seed, option) in enumerate(zip(seeds, options, strict=True)):
            if option not in distinct:
                distinct.append(option)
            groups.setdefault((distinct.index(option), seed is not None), []).append(k)
        return list(groups.values())

    # -- steps -------------------------------------------------------------------------

    async def step_lanes(
        self, lanes: np.ndarray | Sequence[int], actions: np.ndarray, timeout: float
    ) -> ServedBlockStep:
        """Step each of ``lanes`` with its row of ``actions``: one request if the server
        takes several lanes, else one per lane, all in flight at once.

        Raises:
            EnvRpcError: the env refused or failed the step (``env_index``: the lane,
                where the server named it or the request had one lane).
            ProtocolError: the reply does not fit (widths, lanes echoed, observation space).
        """
        order = [int(lane) for lane in lanes]
        timeout_ms = _ms(timeout)
        if self.multi_lane or len(order) == 1:
            return await self._step(order, actions, timeout_ms)
        parts: list[ServedBlockStep | None] = [None] * len(order)

        async def one(k: int) -> None:
            parts[k] = await self._step([order[k]], actions[k : k + 1], timeout_ms)

        await _all([functools.partial(one, k) for k in range(len(order))])
        return join_steps([p for p in parts if p is not None])

    async def _step(
        self, lanes: list[int], actions: np.ndarray, timeout_ms: int
    ) -> ServedBlockStep:
        try:
            value = spaces.encode_stacked(self._action_spec, actions, len(lanes))
        except ProtocolError as exc:
            raise EnvRpcError(
                "env.step",
                0,
                f"invalid action: {exc}",
                code=int(env_pb.EnvErrorCode.INVALID_ACTION),
            ) from None
        ids = self._ids
        request = env_pb.StepRequest(
            action=value,
            timeout_ms=timeout_ms,
            env_indices=lanes,
            episode_ids=[ids[lane] for lane in lanes],
        )
        reply = await _calling(self._env.step, request, "env.step", lanes)
        response = reply.response
        if response.env_indices and list(response.env_indices) != lanes:
            raise ProtocolError(
                f"env.step: the env answered lanes {list(response.env_indices)} for lanes {lanes}"
            )
        observations = self._observations(response.observation, lanes)
        return step_arrays(response, observations, lanes, reply.telemetry)

    # -- values ------------------------------------------------------------------------

    def _observations(self, value: spaces_pb.SpaceValue | None, lanes: list[int]) -> np.ndarray:
        if value is None:
            raise ProtocolError(f"the env sent no observation for lanes {lanes}")
        # Writable rows (one small copy): a policy may write into what it receives.
        rows = spaces.decode_stacked(self._observation_spec, value, len(lanes))
        assert isinstance(rows, np.ndarray)
        return rows


def _assemble(rows: list[np.ndarray], groups: list[list[int]], count: int) -> np.ndarray:
    """The groups' rows (``rows[g]`` for the positions ``groups[g]``) in the order asked."""
    if len(rows) == 1:
        return rows[0]  # one request: its rows are already in order
    first = rows[0]
    out = np.empty((count, *first.shape[1:]), dtype=first.dtype)
    for positions, part in zip(groups, rows, strict=True):
        out[positions] = part
    return out


def _ms(timeout: float) -> int:
    """Seconds as the wire's ``timeout_ms`` (0: none)."""
    return max(1, int(timeout * 1000)) if 0 < timeout < float("inf") else 0


async def _calling(
    call: Callable[[Any], Awaitable[Reply[Any]]], request: Any, op: str, lanes: list[int]
) -> Reply[Any]:
    """``call(request)``, its env error naming the lane at fault.

    Raises:
        EnvRpcError: with ``env_index`` set: the one lane of a one-lane request, or
            the lane our server named in a several-lane request's failure.
    """
    try:
        return await call(request)
    except EnvRpcError as exc:
        message, lane = exc.message, lanes[0] if len(lanes) == 1 else None
        named = _NAMED_LANE.search(message) if len(lanes) > 1 else None
        if named is not None:
            lane = int(named[1])
            message = message[: named.start()] + message[named.end() :]
        raise EnvRpcError(
            op, exc.step, message, code=exc.code, recoverable=exc.recoverable, env_index=lane
        ) from None


async def _all(jobs: list[Callable[[], Awaitable[None]]]) -> None:
    """Run every job: inline for one, concurrently for more.

    Raises:
        Exception: the first job's error, bare (it cancels the other jobs).
    """
    if len(jobs) == 1:
        await jobs[0]()
        return
    failures: list[Exception] = []
    async with trio.open_nursery() as nursery:

        async def job_task(job: Callable[[], Awaitable[None]]) -> None:
            try:
                await job()
            except Exception as exc:
                if not failures:
                    failures.append(exc)
                nursery.cancel_scope.cancel()

        for job in jobs:
            nursery.start_soon(job_task, job)
    if failures:
        raise failures[0]
