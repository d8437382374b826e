"""ScriptedModel: an in-memory ``RuntimeModel`` that answers from a script."""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

import trio

from .._endpoints import EndpointInfo, Reply
from .._errors import ModelRpcError
from .._protocol import WORKFLOW_EDITION, model_pb, spaces_pb
from ._script import enter_call

__all__ = ["ScriptedModel"]

_ACTION = struct.Struct("<q")


class ScriptedModel:
    """A ``RuntimeModel`` fake for Trio test suites.

    * ``action``: the INT64 action returned for every row (matches
      :func:`~rlmesh_trio.testing.scripted_contract`'s ``Discrete(2)``).
    * ``frames``: action frames per predict response (``> 1`` exercises the
      driver's replay of chunks).
    * ``delays``: seconds to ``trio.sleep`` per operation (``connect``,
      ``resolve``, ``predict``, ``reset``, ``release``); zero still checkpoints.
    * ``fail_at``: ``{operation: n}`` fails the n-th call (1-based) of that
      operation with a ``ModelRpcError``, or hangs when ``failure="hang"``.
    * ``wrong_context_at``: the n-th predict answers with a different
      ``env_id`` in its context. ``empty_actions_at``: the n-th predict answers
      with no actions.
    * ``release_hangs``: ``release_adapter`` never returns (it ignores its
      timeout, as a broken peer would), to test that route shutdown is bounded.
    * ``editions``, ``preferred_edition``: what ``connect`` reports;
      ``telemetry`` is returned with every predict reply.

    Records: ``calls``, ``resolves``, ``predicts``, ``resets`` and
    ``releases`` (``(request, timeout)`` pairs), ``aclosed``.
    """

    def __init__(
        self,
        *,
        action: int = 0,
        frames: int = 1,
        delays: Mapping[str, float] | None = None,
        fail_at: Mapping[str, int] | None = None,
        failure: str = "error",
        wrong_context_at: int | None = None,
        empty_actions_at: int | None = None,
        release_hangs: bool = False,
        editions: Sequence[str] = (WORKFLOW_EDITION,),
        preferred_edition: str | None = WORKFLOW_EDITION,
        label: str = "scripted-model",
        telemetry: Mapping[str, float] | None = None,
        record: bool = True,
    ) -> None:
        #: Keep every request and call name (``calls``, ``resets``, ...) for assertions;
        #: ``record=False`` keeps memory flat for long runs and benchmarks.
        self.record = record
        if frames < 1:
            raise ValueError("frames must be >= 1 (use empty_actions_at for an empty answer)")
        if failure not in ("error", "hang"):
            raise ValueError(f"failure must be 'error' or 'hang', got {failure!r}")
        self.action = action
        self.frames = frames
        self.delays = dict(delays or {})
        self.fail_at = dict(fail_at or {})
        self.failure = failure
        self.wrong_context_at = wrong_context_at
        self.empty_actions_at = empty_actions_at
        self.release_hangs = release_hangs
        self.editions = tuple(editions)
        self.preferred_edition = preferred_edition
        self.label = label
        self.telemetry = dict(telemetry or {})
        self.calls: list[str] = []
        self.counts: dict[str, int] = {}
        self.resolves: list[model_pb.ResolveAdapterRequest] = []
        self.predicts: list[model_pb.PredictRequest] = []
        self.resets: list[model_pb.ResetAdapterRequest] = []
        self.releases: list[tuple[model_pb.ReleaseAdapterRequest, float]] = []
        self.aclosed = False

    async def _enter(self, op: str) -> int:
        count, fail = await enter_call(self, op)
        if fail:
            raise ModelRpcError(
                self.label,
                f"model error: injected failure at {op} call {count}",
                code=int(model_pb.ModelErrorCode.INTERNAL),
                recoverable=False,
            )
        return count

    async def connect(self) -> EndpointInfo:
        await self._enter("connect")
        return EndpointInfo(
            label=self.label, editions=self.editions, preferred_edition=self.preferred_edition
        )

    async def resolve_adapter(self, request: model_pb.ResolveAdapterRequest) -> None:
        self.resolves.append(request)
        await self._enter("resolve")

    async def predict(self, request: model_pb.PredictRequest) -> Reply[model_pb.PredictResponse]:
        if self.record:
            self.predicts.append(request)
        count = await self._enter("predict")
        ctx = request.context if request.context is not None else model_pb.AdapterContext()
        env_id = ctx.env_id
        if self.wrong_context_at == count:
            env_id = env_id + "-other"
        context = model_pb.AdapterContext(
            session_id=ctx.session_id, env_id=env_id, request_id=ctx.request_id
        )
        if self.empty_actions_at == count:
            return Reply(model_pb.PredictResponse(context=context, actions=[]), self.telemetry)
        slab = _ACTION.pack(self.action) * len(request.episode_info)
        actions = [spaces_pb.SpaceValue(leaves=[slab]) for _ in range(self.frames)]
        return Reply(model_pb.PredictResponse(context=context, actions=actions), self.telemetry)

    async def reset_adapter(self, request: model_pb.ResetAdapterRequest) -> None:
        if self.record:
            self.resets.append(request)
        await self._enter("reset")

    async def release_adapter(
        self, request: model_pb.ReleaseAdapterRequest, timeout: float
    ) -> None:
        self.releases.append((request, timeout))
        if self.release_hangs:
            self.calls.append("release")
            await trio.sleep_forever()
        await self._enter("release")

    async def aclose(self) -> None:
        self.aclosed = True
