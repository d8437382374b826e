"""``LocalModel``: a Python policy as a ``RuntimeModel``, in process, with no server.

It wraps the same :class:`~rlmesh_trio._modelhost.ModelHost` the gRPC
``ModelServer`` uses, so a route sees the same validation, the same
messages and the same ``PredictResponse`` shape whether its policy is local
or served.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np
import trio

from .._endpoints import EndpointInfo, Reply
from .._errors import ModelRpcError
from .._modelhost import (
    Adapter,
    ModelFault,
    ModelHost,
    PlacedInvoker,
    decode_row,
    encode_row,
    sync_row,
)
from .._modelhost._host import NOT_RESOLVED
from .._modelhost._rows import RowsPlan, predict_rows, rows_plan
from .._protocol import CAP_CONCURRENT_PREDICT, WORKFLOW_EDITION, model_pb
from ..runtime._placement import DEFAULT_INLINE_LIMIT, CallPlacement, settle_inline

__all__ = ["LocalModel"]

_NO_TELEMETRY: dict[str, float] = {}


class LocalModel:
    """Run ``policy`` in the caller's Trio process as a ``RuntimeModel``.

    ``policy`` is anything :func:`rlmesh_trio.policy` accepts: a callable
    ``predict(obs)`` (sync or async), an object with ``predict`` and optional
    ``predict_batch``, or a :class:`~rlmesh_trio._modelhost.Policy`.

    Where a sync policy runs (``threaded``):

    * ``None`` (default, adaptive): inline on the Trio thread, where a
      thread hop would cost more than a typical (numpy) policy call; after
      two calls in a row slower than ``inline_limit`` seconds (default 1 ms)
      the policy moves to a worker thread, and comes back inline only if 8
      timed threaded calls say it is cheap after all.
    * ``True``: always in a worker thread (one call at a time), so a slow
      policy never stalls other routes.
    * ``False``: always inline.

    Timeouts (``Limits.model_predict_timeout``): a threaded call that
    overruns is abandoned AT the deadline (it finishes in its thread; the
    next call waits for it) and the route fails with ``OperationTimeout``
    (operation ``model.predict``). An inline call cannot be interrupted:
    when it returns past the deadline, the route fails with the same
    ``OperationTimeout`` then, and meanwhile other routes wait (a policy
    that may hang belongs in a thread: ``threaded=True``). Async
    policies are awaited in the calling task, so their timeout fires at
    the deadline at their next await.

    A route whose env is a one-env ``LocalEnv`` and whose policy runs inline,
    with no observation, action or step hook, skips the messages: the route
    calls :meth:`predict_leaves` and ``LocalEnv.step_leaves`` with the frames'
    leaves (the same codec calls, checks and faults as :meth:`predict`).

    Cost: four such CartPole routes spent 32 us of client CPU per step
    (``benchmarks/compare_rlmesh.py`` case 6, 2 cores; 40-60 us when the
    machine was loaded), about 13 us of it in gymnasium's own ``step`` and
    wrappers; with both endpoints in worker threads several times that
    (``benchmarks/local_placement.py``).
    A one-row predict costs about 4.5 us here, 2.5 us of it in the host's
    planned one-row path (``benchmarks/model_predict.py``).

    One ``LocalModel`` may serve many routes at once: adapters are keyed by
    ``env_id``, exactly as on a model server.

    Cancellation: ``predict`` can be cancelled while an async or threaded
    policy call is running; the route then treats the model as failed, as it
    would a remote one. After an inline sync call it is a checkpoint only if
    a deadline passed meanwhile or a cancellation is pending (so per-operation
    timeouts still fire); otherwise it returns without a scheduler pass.
    ``release_adapter`` never blocks.
    """

    def __init__(
        self,
        policy: Any,
        *,
        threaded: bool | None = None,
        inline_limit: float = DEFAULT_INLINE_LIMIT,
        label: str = "in-process model",
        editions: Iterable[str] = (WORKFLOW_EDITION,),
    ) -> None:
        self.host = ModelHost(policy, editions=editions)
        self.label = label
        #: Where sync policy calls run now (``placement.inline``); see the class doc.
        self.placement = CallPlacement(
            # predict() settles once per request (after all rows), not once per row.
            threaded,
            inline_limit=inline_limit,
            limiter=trio.CapacityLimiter(1),
            settle=False,
            start_inline=True,
        )
        self._invoke = PlacedInvoker(self.placement)
        # Block-predict plans by env_id, with the adapter each was planned for; and by
        # what decides a plan (the adapter's keys, whether it chunks), so routes over
        # one kind of env plan once.
        self._plans: dict[str, tuple[Adapter, RowsPlan | None]] = {}
        self._plans_by_key: dict[tuple[bytes, bytes, bool], RowsPlan | None] = {}

    def _fused_invoke(self, rows: int) -> PlacedInvoker:
        """The invoke of one fused call of ``rows`` rows: the placement judges it per row
        (a 32-row forward replaces 32 single ones; see ``CallPlacement.run``)."""
        return PlacedInvoker(self.placement, rows=rows)

    def _error(self, fault: ModelFault | model_pb.ModelError) -> ModelRpcError:
        if isinstance(fault, ModelFault):
            return ModelRpcError(
                self.label, fault.message, code=int(fault.code), recoverable=fault.recoverable
            )
        return ModelRpcError(
            self.label, fault.message, code=int(fault.code), recoverable=fault.is_recoverable
        )

    async def connect(self) -> EndpointInfo:
        """Describe the in-process model; nothing to reach."""
        return EndpointInfo(
            label=self.label,
            editions=self.host.editions,  # type: ignore[arg-type]  # attrs converter=tuple typing
            preferred_edition=None,
            capabilities={CAP_CONCURRENT_PREDICT: "true"},
        )

    async def resolve_adapter(self, request: model_pb.ResolveAdapterRequest) -> None:
        """Record the route's env spec; ``ModelRpcError`` with 0.1.0's message if refused."""
        try:
            self.host.resolve_adapter(request)
        except ModelFault as fault:
            raise self._error(fault) from None

    async def predict(self, request: model_pb.PredictRequest) -> Reply[model_pb.PredictResponse]:
        """Run the policy on the request's rows; a policy exception is a ``ModelRpcError``."""
        try:
            response = await self.host.predict(request, self._invoke)
        except ModelFault as fault:
            raise self._error(fault) from fault.__cause__
        # An inline sync (or never-awaiting async) policy does not yield. A full checkpoint
        # costs a scheduler pass per step, so yield only when it changes the outcome: a
        # deadline that passed during the call, or a cancellation already pending.
        await settle_inline()
        return Reply(response, _NO_TELEMETRY)

    def takes_leaves(self, env_id: str) -> bool:
        """Whether the route ``env_id``'s predicts may go through :meth:`predict_leaves`:
        its adapter is resolved with one action per predict, a planned one-row path and
        a synchronous ``predict``."""
        return sync_row(self.host.adapters.get(env_id)) is not None

    async def predict_leaves(self, env_id: str, leaves: list[bytes]) -> list[bytes] | None:
        """The route ``env_id``'s one-row predict with its observation and action as
        frame leaves (no request or response message), run inline right now; None when
        it cannot run so (the placement has moved to a thread, or the adapter is gone):
        send :meth:`predict` a request instead.

        The decode, policy call, encode, faults and placement of :meth:`predict`'s
        planned path; the deadline check comes once, between the call and the encode.
        Cancellation: as :meth:`predict` after an inline call.

        Raises:
            ModelRpcError: what :meth:`predict` raises for the same observation and policy.
        """
        row = sync_row(self.host.adapters.get(env_id))
        placement = self.placement
        if row is None or not placement.inline:
            return None
        plan, predict = row
        try:
            value = decode_row(plan, leaves)
            try:
                action, turn = placement.call_inline(predict.fn, value)
            except Exception as exc:  # the user's policy failed: a ModelError naming it
                raise ModelFault.from_exception(exc) from exc
            await settle_inline(yield_now=turn)
            return encode_row(plan, action)
        except ModelFault as fault:
            raise self._error(fault) from fault.__cause__

    # -- LaneBlockModel (rlmesh_trio._blocks) -------------------------------------------

    def _rows_plan(self, env_id: str) -> RowsPlan | None:
        adapter = self.host.adapters.get(env_id)
        if adapter is None:
            return None
        cached = self._plans.get(env_id)
        if cached is not None and cached[0] is adapter:
            return cached[1]
        chunked = adapter.execution_horizon > 1 and adapter.policy.predict_chunk is not None
        # The fuse key decides the adapter's policy (``BoundPolicies``), the action key
        # its action spec: together with ``chunked``, everything ``rows_plan`` reads.
        key = (adapter.fuse_key, adapter.action_key, chunked)
        if key in self._plans_by_key:
            plan = self._plans_by_key[key]
        else:
            plan = self._plans_by_key[key] = rows_plan(adapter, chunked)
        self._plans[env_id] = (adapter, plan)
        return plan

    def block_ready(self, env_id: str) -> bool:
        """Whether route ``env_id`` can predict blocks of rows: its adapter is resolved, its
        policy has a batched form (a torch module, ``predict_batch``), single actions,
        an array observation space and a Discrete or Box action space."""
        return self._rows_plan(env_id) is not None

    #: The host keeps no per-episode state, so ResetAdapter is a no-op a block may skip.
    keeps_episode_state = False

    def rows_key(self, env_id: str) -> Hashable | None:
        """Routes with equal keys predict rows alike (this policy, the same spaces and
        single actions): one :meth:`predict_rows` may serve all their rows. None when
        route ``env_id`` has no rows plan."""
        plan = self._rows_plan(env_id)
        adapter = self.host.adapters.get(env_id)
        if plan is None or adapter is None or adapter.observation_space is None:
            return None
        # The specs' bytes, as ResolveAdapter keyed them (the fuse key holds the
        # observation spec's, the action key the action spec's: the plan's).
        return (adapter.fuse_key, adapter.action_key)

    async def predict_rows(
        self, env_id: str, observations: np.ndarray, timeout: float
    ) -> np.ndarray:
        """One batched policy call over ``observations`` for route ``env_id``, where the
        placement says (judged per row); ``timeout`` is the caller's to keep.

        Cancellation: as :meth:`predict`.

        Raises:
            ModelRpcError: the adapter is gone, the policy raised, or its output does
                not fit the action space (the message path's messages).
        """
        plan = self._rows_plan(env_id)
        if plan is None:
            raise ModelRpcError(self.label, NOT_RESOLVED)
        try:
            actions = await predict_rows(plan, observations, self._fused_invoke(len(observations)))
        except ModelFault as fault:
            raise self._error(fault) from fault.__cause__
        await settle_inline()
        return actions

    async def grouped_predict(
        self, requests: Sequence[model_pb.PredictRequest]
    ) -> list[Reply[model_pb.PredictResponse] | ModelRpcError]:
        """Predict several routes' requests at once (the same shape as
        ``RemoteModel.grouped_predict``): requests whose adapters share an
        observation space go to the policy's batched form in one fused call.
        One entry per request, in order: a :class:`Reply`, or the
        ``ModelRpcError`` for that request alone."""
        grouped = await self.host.grouped_predict(
            model_pb.GroupedPredictRequest(groups=list(requests)),
            self._invoke,
            fused_invoke=self._fused_invoke,
        )
        await settle_inline(yield_now=True)
        out: list[Reply[model_pb.PredictResponse] | ModelRpcError] = []
        for result in grouped.results:
            if result.response is not None:
                out.append(Reply(result.response, _NO_TELEMETRY))
            else:
                out.append(self._error(result.error or model_pb.ModelError()))
        return out

    async def reset_adapter(self, request: model_pb.ResetAdapterRequest) -> None:
        """Garbage-collect per-episode state (the host keeps none); best-effort."""
        try:
            self.host.reset_adapter(request)
        except ModelFault as fault:
            raise self._error(fault) from None

    async def release_adapter(
        self, request: model_pb.ReleaseAdapterRequest, timeout: float
    ) -> None:
        """Forget the route's adapter (instant; ``timeout`` is never reached)."""
        try:
            self.host.release_adapter(request)
        except ModelFault as fault:
            raise self._error(fault) from None
        await trio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        """Nothing to release: adapters belong to routes, which release their own."""
        await trio.lowlevel.checkpoint()
