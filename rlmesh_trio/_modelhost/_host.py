"""The model host: rlmesh 0.1.0's model-server semantics, independent of any transport.

One :class:`ModelHost` wraps one policy and answers ``model_pb.JoinRequest``
kinds. The gRPC ``ModelServer`` feeds it requests from Join streams; the
in-process ``LocalModel`` calls it directly. Both therefore share every
validation message, the adapter map and the fused batched calls.

The host is framework-neutral: it never sleeps, locks or spawns. The only
place it awaits is the ``invoke`` callable its caller passes in, which runs
one user function in the caller's world (inline or in a worker thread). So
the same coroutine serves the in-process model (on the caller's Trio run) and
the gRPC ``ModelServer`` (on the server thread's own ``trio.run``).

Adapters live in one map keyed by ``env_id`` for the whole host, shared by
all streams, as in 0.1.0: a Close on one stream releases every adapter.

A one-row predict with single actions (every route's step) takes the
planned path of ``_one_row``: codec calls chosen once at ResolveAdapter, no
clock read unless the caller asks for the phase times; its answers and
messages are those of the general path.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, cast

import betterproto2
import numpy as np

from .. import spaces
from .._protocol import WORKFLOW_EDITION, model_pb, spaces_pb
from ._adapter import Adapter, observation_space
from ._bind import BoundPolicies
from ._coerce import as_policy
from ._faults import Code, ModelFault
from ._fused import predict_fused
from ._one_row import RowPlan, predict_row
from ._phases import Invoke, PhaseTimes, timed_call, timed_decode, timed_encode
from ._policy import Policy, PolicyFn
from ._tree import concat_rows, leading_len, split_rows

__all__ = ["Adapter", "Invoke", "ModelHost", "PhaseTimes", "inline_invoke"]

UNSUPPORTED_KIND = (
    "empty or unrecognized Join request (a newer-edition arm this build does not implement?)"
)
NOT_RESOLVED = "model error: model env adapter was not resolved"


async def inline_invoke(fn: PolicyFn, arg: Any) -> Any:
    """Call ``fn`` right here; await it if it is async (valid on Trio and on asyncio alike
    for sync functions, and on the framework the async function was written for)."""
    result = fn.fn(arg)
    if fn.is_async:
        result = await result
    return result


class ModelHost:
    """Answers model Join requests for one policy.

    ``editions`` is the CAN list this host implements; a ResolveAdapter pinned
    to anything else is refused with 0.1.0's message.
    """

    def __init__(self, policy: Any, *, editions: Iterable[str] = (WORKFLOW_EDITION,)) -> None:
        self.policy: Policy = as_policy(policy)
        self._chunks_refused = False
        self.editions: tuple[str, ...] = tuple(editions)
        self._adapters: dict[str, Adapter] = {}
        self._bound = BoundPolicies(self.policy)

    @property
    def synchronous(self) -> bool:
        """Whether every policy function :meth:`handle` may call is synchronous: then
        it never suspends when ``invoke`` does not for such functions."""
        return self._bound.all_sync

    @property
    def adapters(self) -> Mapping[str, Adapter]:
        """A read-only live view of the resolved adapters by ``env_id``."""
        return MappingProxyType(self._adapters)

    # ------------------------------------------------------------------ dispatch

    async def handle(self, request: model_pb.JoinRequest, invoke: Invoke) -> model_pb.JoinResponse:
        """Answer one Join request; never raises for a refused request or a policy error.

        The response echoes ``request.request_id`` and carries
        ``endpoint_total_ns``. Cancellation: only ``invoke`` can be interrupted,
        in which case the cancellation propagates and no response is produced.
        """
        started = time.perf_counter_ns()
        response = model_pb.JoinResponse(request_id=request.request_id)
        try:
            name, body = betterproto2.which_one_of(request, "kind")
            body = cast(Any, body)  # the arm's message type follows from ``name``
            if name == "predict" or name == "grouped_predict":
                times = PhaseTimes()
                if name == "predict":
                    response.predict = await self.predict(body, invoke, times)
                else:
                    response.grouped_predict = await self.grouped_predict(body, invoke, times)
                # The endpoint timing counters 0.1.0 servers send (telemetry on the client).
                response.decode_ns = times.decode_ns
                response.user_ns = times.user_ns
                response.encode_ns = times.encode_ns
            elif name == "resolve_adapter":
                response.resolve_adapter = self.resolve_adapter(body)
            elif name == "reset_adapter":
                response.reset_adapter = self.reset_adapter(body)
            elif name == "release_adapter":
                response.release_adapter = self.release_adapter(body)
            elif name == "close":
                response.close = self.close(body)
            else:
                raise ModelFault(Code.UNSUPPORTED, UNSUPPORTED_KIND, recoverable=True)
        except ModelFault as fault:
            response = model_pb.JoinResponse(request_id=request.request_id, error=fault.to_proto())
        except Exception as exc:  # a bug of ours: still answer, so the caller never hangs
            response = model_pb.JoinResponse(
                request_id=request.request_id,
                error=ModelFault.internal(
                    f"internal error: {type(exc).__name__}: {exc}"
                ).to_proto(),
            )
        response.endpoint_total_ns = time.perf_counter_ns() - started
        return response

    # ------------------------------------------------------------------ adapters

    def resolve_adapter(
        self, request: model_pb.ResolveAdapterRequest
    ) -> model_pb.ResolveAdapterResponse:
        """Create or replace the adapter of ``context.env_id`` (idempotent upsert)."""
        context = request.context
        if context is None:
            raise ModelFault.invalid("resolve_adapter missing adapter context")
        if not context.env_id:
            raise ModelFault.invalid("resolve_adapter env_id is empty")
        env_spec = request.env_spec
        if env_spec is None:
            raise ModelFault.invalid("resolve_adapter missing env_spec")
        if env_spec.action_space is None:
            raise ModelFault.invalid(
                "env EnvSpec has no action_space; a model worker cannot encode actions without it"
            )
        edition = request.selected_workflow_edition
        if edition and edition not in self.editions:
            raise ModelFault.invalid(
                f"runtime pinned this route to workflow edition {json.dumps(edition)}, which this "
                f"model build does not implement (implements {json.dumps(list(self.editions))})"
            )
        obs = env_spec.observation_space
        bound = self._bound.bind(obs, env_spec.action_space)
        self._adapters[context.env_id] = Adapter(
            env_id=context.env_id,
            env_spec=env_spec,
            observation_space=obs,
            action_space=env_spec.action_space,
            execution_horizon=request.execution_horizon,
            fuse_key=bound.fuse_key,
            row_plan=bound.row_plan,
            policy=bound.policy,
            action_key=bound.action_key,
        )
        return model_pb.ResolveAdapterResponse()

    def reset_adapter(self, request: model_pb.ResetAdapterRequest) -> model_pb.ResetAdapterResponse:
        """Garbage collection of per-episode state; the host keeps none, so any env_id is fine."""
        if request.context is None or not request.context.env_id:
            raise ModelFault.invalid("reset_adapter missing env_id")
        return model_pb.ResetAdapterResponse()

    def release_adapter(
        self, request: model_pb.ReleaseAdapterRequest
    ) -> model_pb.ReleaseAdapterResponse:
        """Forget ``env_id``'s adapter; unknown ids succeed."""
        if request.context is None or not request.context.env_id:
            raise ModelFault.invalid("release_adapter missing env_id")
        self._adapters.pop(request.context.env_id, None)
        return model_pb.ReleaseAdapterResponse()

    def close(
        self, request: model_pb.CloseParticipantRequest | None = None
    ) -> model_pb.CloseParticipantResponse:
        """Release every adapter, server-wide."""
        self._adapters.clear()
        return model_pb.CloseParticipantResponse()

    # ------------------------------------------------------------------ predict

    def check_predict(self, request: model_pb.PredictRequest) -> Adapter:
        """Validate a predict request (0.1.0's messages, in its order) and find its adapter."""
        context = request.context
        if context is None:
            raise ModelFault.internal("internal error: model request missing adapter context")
        if not context.env_id:
            raise ModelFault.internal("internal error: model env_id is empty")
        if not context.request_id:
            raise ModelFault.internal("internal error: model request_id is empty")
        infos = request.episode_info
        if not infos:
            raise ModelFault.internal(
                "internal error: model predict must include at least one episode_id"
            )
        if len(infos) == 1:
            if not infos[0].episode_id:
                raise ModelFault.internal(
                    "internal error: model predict episode_info[0].episode_id is empty"
                )
        else:
            seen: set[str] = set()
            for i, info in enumerate(infos):
                if not info.episode_id:
                    raise ModelFault.internal(
                        f"internal error: model predict episode_info[{i}].episode_id is empty"
                    )
                if info.episode_id in seen:
                    raise ModelFault.internal(
                        "internal error: model predict has duplicate episode_id "
                        f"{json.dumps(info.episode_id)}"
                    )
                seen.add(info.episode_id)
        adapter = self._adapters.get(context.env_id)
        if adapter is None:
            raise ModelFault.internal(NOT_RESOLVED)
        return adapter

    async def predict(
        self, request: model_pb.PredictRequest, invoke: Invoke, times: PhaseTimes | None = None
    ) -> model_pb.PredictResponse:
        """Predict R rows; one action frame, batched over the same R rows.

        ``times``, when given, accumulates the decode/policy/encode durations
        (without it a one-row predict reads no clock).

        Cancellation: only ``invoke`` can be interrupted; the cancellation propagates.

        Raises:
            ModelFault: a refused request or a policy error (0.1.0's code and message).
        """
        adapter = self.check_predict(request)
        planned = self._row_plan(adapter, request)
        if planned is not None:
            # Straight to the planned one-row call: this is every in-process route's step.
            return await predict_row(*planned, invoke, request, times)
        return await self._predict_checked(request, adapter, invoke, times)

    def _row_plan(
        self, adapter: Adapter, request: model_pb.PredictRequest
    ) -> tuple[RowPlan, PolicyFn] | None:
        """The adapter's one-row plan and the policy's ``predict`` if this request takes
        the planned path (one row, a per-observation ``predict``, single actions)."""
        plan = adapter.row_plan
        predict = adapter.policy.predict
        if (
            plan is None
            or predict is None
            or len(request.episode_info) != 1
            or (adapter.execution_horizon > 1 and self._chunked(adapter))
        ):
            return None
        return plan, predict

    async def _predict_checked(
        self,
        request: model_pb.PredictRequest,
        adapter: Adapter,
        invoke: Invoke,
        times: PhaseTimes | None,
    ) -> model_pb.PredictResponse:
        planned = self._row_plan(adapter, request)
        if planned is not None:
            return await predict_row(*planned, invoke, request, times)
        rows = len(request.episode_info)
        policy = adapter.policy
        if times is None:
            times = PhaseTimes()
        obs_space = observation_space(adapter)
        observation = request.observation
        if observation is None:  # not ``or``: a message's truth test walks all its fields
            observation = spaces_pb.SpaceValue()
        if self._chunked(adapter):
            frames = await self._chunk_frames(adapter, obs_space, observation, rows, invoke, times)
            if frames is not None:
                return model_pb.PredictResponse(context=request.context, actions=frames)
        if policy.predict is not None and (rows == 1 or policy.predict_batch is None):
            values = timed_decode(spaces.decode_batch, obs_space, observation, rows, times)
            actions = [await timed_call(invoke, policy.predict, value, times) for value in values]
            frame = timed_encode(spaces.encode_batch, adapter.action_space, times, actions)
        else:
            assert policy.predict_batch is not None
            stacked = timed_decode(spaces.decode_stacked, obs_space, observation, rows, times)
            result = await timed_call(invoke, policy.predict_batch, stacked, times)
            frame = timed_encode(spaces.encode_stacked, adapter.action_space, times, result, rows)
        # The context goes back untouched: 0.1.0 and our driver compare it field by field.
        return model_pb.PredictResponse(context=request.context, actions=[frame])

    def _chunked(self, adapter: Adapter) -> bool:
        """Whether predicts for ``adapter`` are answered with action chunks."""
        return (
            adapter.execution_horizon > 1
            and adapter.policy.predict_chunk is not None
            and not self._chunks_refused
        )

    async def _chunk_frames(
        self,
        adapter: Adapter,
        obs_space: spaces_pb.SpaceSpec,
        observation: spaces_pb.SpaceValue,
        rows: int,
        invoke: Invoke,
        times: PhaseTimes,
    ) -> list[spaces_pb.SpaceValue] | None:
        """The first ``min(K, execution_horizon)`` steps of every row's chunk, one frame each.

        ``None`` when the policy's ``predict_chunk`` turns out not to be
        implemented (an rlmesh-style base class's default raises
        ``NotImplementedError``): single actions from then on.
        """
        chunk_fn = adapter.policy.predict_chunk
        assert chunk_fn is not None
        values = timed_decode(spaces.decode_batch, obs_space, observation, rows, times)
        chunks = []
        for value in values:
            try:
                chunks.append(_stackable(await timed_call(invoke, chunk_fn, value, times)))
            except ModelFault as fault:
                if isinstance(fault.__cause__, NotImplementedError):
                    self._chunks_refused = True
                    return None
                raise
        try:
            lengths = [leading_len(chunk) for chunk in chunks]
            steps = min(adapter.execution_horizon, *lengths)
            per_step = [
                split_rows(chunk, [1] * n) for chunk, n in zip(chunks, lengths, strict=True)
            ]
            stacked = [concat_rows([row[j] for row in per_step]) for j in range(steps)]
        except (ValueError, TypeError, IndexError) as exc:
            raise ModelFault.internal(
                "internal error: model error: predict_chunk returned a value without a "
                f"leading chunk axis: {type(exc).__name__}: {exc}"
            ) from None
        if steps < 1:
            raise ModelFault.internal(
                "internal error: model error: predict_chunk returned an empty chunk"
            )
        return [
            timed_encode(spaces.encode_stacked, adapter.action_space, times, step, rows)
            for step in stacked
        ]

    async def grouped_predict(
        self,
        request: model_pb.GroupedPredictRequest,
        invoke: Invoke,
        times: PhaseTimes | None = None,
        *,
        fused_invoke: Callable[[int], Invoke] | None = None,
    ) -> model_pb.GroupedPredictResponse:
        """Predict every group; one group failing never fails another.

        With a batched policy, groups whose adapters share an observation space
        go to ``predict_batch`` in one fused call (rows concatenated in group
        order, actions split back by row counts). A lone group is predicted
        exactly as a plain Predict would be. ``fused_invoke(rows)``, when given,
        is the invoke of a fused call of ``rows`` rows (``invoke`` otherwise).

        Cancellation: only the invokes can be interrupted; the cancellation propagates.
        """
        groups = request.groups
        times = PhaseTimes() if times is None else times
        results: list[model_pb.GroupedPredictResult | None] = [None] * len(groups)
        buckets: dict[bytes, list[tuple[int, Adapter]]] = {}
        for index, group in enumerate(groups):
            try:
                adapter = self.check_predict(group)
            except ModelFault as fault:
                results[index] = model_pb.GroupedPredictResult(error=fault.to_proto())
                continue
            # Without a batched form (or answering with chunks) every group is its own bucket.
            fusable = adapter.policy.batched and not self._chunked(adapter)
            key = adapter.fuse_key if fusable else index.to_bytes(8, "little")
            buckets.setdefault(key, []).append((index, adapter))
        for members in buckets.values():
            if len(members) == 1:
                index, adapter = members[0]
                results[index] = await self._group_alone(groups[index], adapter, invoke, times)
            else:
                await predict_fused(groups, members, results, invoke, times, fused_invoke)
        return model_pb.GroupedPredictResponse(results=[r for r in results if r is not None])

    async def _group_alone(
        self, group: model_pb.PredictRequest, adapter: Adapter, invoke: Invoke, times: PhaseTimes
    ) -> model_pb.GroupedPredictResult:
        try:
            response = await self._predict_checked(group, adapter, invoke, times)
        except ModelFault as fault:
            return model_pb.GroupedPredictResult(error=fault.to_proto())
        return model_pb.GroupedPredictResult(response=response)


# ---------------------------------------------------------------------- helpers


def _stackable(chunk: Any) -> Any:
    """A chunk as a stacked value: a plain list of numbers becomes an array (texts stay a list)."""
    if isinstance(chunk, list) and not all(isinstance(item, str) for item in chunk):
        return np.asarray(chunk)
    return chunk
