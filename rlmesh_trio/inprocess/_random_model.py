"""``rt.RANDOM``: a random baseline that samples the env's action space, reproducibly.

rlmesh 0.1.0's ``RANDOM_SAMPLE`` draws ``action_space.sample()`` with no
adapter resolution. Ours does the same from the action space each route's
ResolveAdapter carries (the env's contract), and seeds every episode's draws
from that episode's seed, so the same seeds give the same actions on every
run, whatever the env kind (one env, lanes, NEXT_STEP vector envs) and however
routes interleave.
"""

from __future__ import annotations

import copy
import zlib
from typing import Any, Final

import gymnasium
import trio

from .. import spaces
from .._endpoints import EndpointInfo, Reply
from .._errors import ModelRpcError, ProtocolError
from .._protocol import CAP_CONCURRENT_PREDICT, WORKFLOW_EDITION, model_pb

__all__ = ["RANDOM", "RandomBaseline", "RandomModel"]

_NO_TELEMETRY: dict[str, float] = {}


class RandomBaseline:
    """The type of :data:`RANDOM`: pass it as a route's ``model`` (``--model random``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "rlmesh_trio.RANDOM"

    def __reduce__(self) -> str:
        return "RANDOM"  # unpickles as the module-level singleton


#: Use as ``model=rt.RANDOM``: each step samples the env's action space (see :class:`RandomModel`).
RANDOM: Final = RandomBaseline()


class _Adapter:
    __slots__ = ("action_spec", "space", "streams", "unseeded")

    def __init__(self, action_spec: Any, space: gymnasium.Space[Any]) -> None:
        self.action_spec = action_spec
        self.space = space
        self.streams: dict[str, gymnasium.Space[Any]] = {}
        self.unseeded = 0


class RandomModel:
    """A ``RuntimeModel`` whose actions are samples of the route's action space.

    Episode ``e`` with seed ``s`` draws its actions from a copy of the action
    space seeded with ``s``: the k-th action of the episode is the same on
    every run. An episode without a seed (a NEXT_STEP env's autoreset) is
    seeded from ``seed`` (default 0) and how many unseeded episodes this
    route's adapter has seen, so it is reproducible when the env is.

    Cancellation: every method is a checkpoint and never blocks otherwise.
    Raises (from ``resolve_adapter``/``predict``): :class:`ModelRpcError` for a
    spec without an action space or a predict before its adapter was resolved.
    """

    def __init__(self, *, seed: int = 0, label: str = "random") -> None:
        self.label = label
        self._seed = seed
        self._adapters: dict[str, _Adapter] = {}

    def _error(self, message: str) -> ModelRpcError:
        return ModelRpcError(self.label, message, code=int(model_pb.ModelErrorCode.INVALID_REQUEST))

    async def connect(self) -> EndpointInfo:
        """Describe the baseline; nothing to reach."""
        await trio.lowlevel.checkpoint()
        return EndpointInfo(
            label=self.label,
            editions=(WORKFLOW_EDITION,),
            capabilities={CAP_CONCURRENT_PREDICT: "true"},
        )

    async def resolve_adapter(self, request: model_pb.ResolveAdapterRequest) -> None:
        """Take the route's action space from its env spec."""
        await trio.lowlevel.checkpoint()
        spec = request.env_spec
        if request.context is None or spec is None or spec.action_space is None:
            raise self._error("resolve_adapter needs a context and an env spec with action_space")
        try:
            space = spaces.to_gymnasium(spec.action_space)
        except ProtocolError as exc:
            raise self._error(f"cannot sample the action space: {exc}") from None
        self._adapters[request.context.env_id] = _Adapter(spec.action_space, space)

    def _stream(self, adapter: _Adapter, episode_id: str, seed: int | None) -> Any:
        space = adapter.streams.get(episode_id)
        if space is None:
            if seed is None:
                # Unseeded (autoreset) episodes: the n-th one of this route, reproducibly.
                adapter.unseeded += 1
                seed = zlib.crc32(f"{self._seed}:{adapter.unseeded}".encode())
            space = copy.deepcopy(adapter.space)
            space.seed(seed)
            adapter.streams[episode_id] = space
        return space

    async def predict(self, request: model_pb.PredictRequest) -> Reply[model_pb.PredictResponse]:
        """One sampled action per row, drawn from that row's episode stream."""
        await trio.lowlevel.checkpoint()
        context = request.context
        adapter = self._adapters.get(context.env_id) if context is not None else None
        if adapter is None:
            raise self._error("model error: model env adapter was not resolved")
        actions = [
            self._stream(adapter, info.episode_id, info.seed).sample()
            for info in request.episode_info
        ]
        frame = spaces.encode_batch(adapter.action_spec, actions)
        return Reply(model_pb.PredictResponse(context=context, actions=[frame]), _NO_TELEMETRY)

    async def reset_adapter(self, request: model_pb.ResetAdapterRequest) -> None:
        """Forget finished episodes' streams."""
        await trio.lowlevel.checkpoint()
        if request.context is not None:
            adapter = self._adapters.get(request.context.env_id)
            if adapter is not None:
                for episode_id in request.episode_ids:
                    adapter.streams.pop(episode_id, None)

    async def release_adapter(
        self, request: model_pb.ReleaseAdapterRequest, timeout: float
    ) -> None:
        """Forget the route's adapter (instant)."""
        await trio.lowlevel.checkpoint()
        if request.context is not None:
            self._adapters.pop(request.context.env_id, None)

    async def aclose(self) -> None:
        """Drop every adapter."""
        await trio.lowlevel.checkpoint()
        self._adapters.clear()
