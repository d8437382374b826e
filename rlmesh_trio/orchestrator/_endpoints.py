"""Turning what a user put in a :class:`Route` into runtime endpoints, and labelling them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs

from .._errors import InvalidSpec
from ..inprocess._local_env import LocalEnv
from ..inprocess._local_model import LocalModel
from ..inprocess._random_model import RandomBaseline, RandomModel
from ..runtime import RuntimeEnv, RuntimeModel
from ..transport import RemoteEnv, RemoteModel
from ._batching import PredictBatcher

__all__ = ["EndpointPool", "ResolvedEnv", "ResolvedModel"]


@attrs.frozen
class ResolvedEnv:
    env: RuntimeEnv
    label: str
    owned: bool  # we made it, so we close it


@attrs.frozen
class ResolvedModel:
    model: RuntimeModel
    label: str
    owned: bool


def _is_gym_env(value: Any) -> bool:
    import gymnasium

    if isinstance(value, gymnasium.Env | gymnasium.vector.VectorEnv):
        return True
    if not isinstance(value, type) and hasattr(value, "reset") and hasattr(value, "step"):
        return True  # duck-typed vector envs and legacy gym envs, served as rlmesh serves them
    return (
        isinstance(value, list | tuple)
        and bool(value)
        and all(isinstance(item, gymnasium.Env) for item in value)
    )


def _env_label(value: Any) -> str:
    """What a report calls an endpoint: its env id, its ``label``, or a client's address."""
    if isinstance(value, list | tuple):
        return f"{_env_label(value[0])}x{len(value)}"
    spec = getattr(value, "spec", None)
    if spec is not None and getattr(spec, "id", None):
        return str(spec.id)
    label = getattr(value, "label", None)
    if isinstance(label, str):
        return label
    address = getattr(value, "address", None)  # RemoteEnv / RemoteModel
    if isinstance(address, str):
        return address
    name = getattr(value, "__qualname__", None) or type(value).__qualname__
    return str(name)


class EndpointPool:
    """Resolves route endpoints for one run.

    Model addresses are shared: every route naming the same model address uses
    one client (one connection, one Join stream), demultiplexed by request id.
    """

    def __init__(
        self,
        *,
        batch_predicts: bool = False,
        start_service: Callable[[Callable[[], Awaitable[None]]], None] | None = None,
        client_options: Mapping[str, Any] | None = None,
    ) -> None:
        if batch_predicts and start_service is None:
            raise ValueError("batch_predicts needs start_service to run the batchers")
        self._models: dict[str, ResolvedModel] = {}
        self.owned_models: list[RuntimeModel] = []
        self._batch = batch_predicts
        self._start_service = start_service
        # Passed to every RemoteEnv/RemoteModel made from an address (token=, ssl=, ...).
        self._client_options = dict(client_options or {})

    def env(self, value: Any, where: str) -> ResolvedEnv:
        if isinstance(value, str):
            return ResolvedEnv(RemoteEnv(value, **self._client_options), value, owned=True)
        if isinstance(value, RuntimeEnv):
            return ResolvedEnv(value, _env_label(value), owned=False)
        if _is_gym_env(value) or callable(value):
            local = LocalEnv(value)
            return ResolvedEnv(local, _env_label(value), owned=True)
        raise InvalidSpec(
            f"{where}: env must be an address, a gymnasium env or env factory, or a RuntimeEnv; "
            f"got {type(value).__name__}"
        )

    def renew_model(self, value: Any, broken: RuntimeModel) -> None:
        """Forget the shared client of model address ``value`` if it is still ``broken``.

        The next :meth:`model` call dials a new one (a retry after the model
        connection broke); the old client is still closed at the end of the run.
        """
        shared = self._models.get(value) if isinstance(value, str) else None
        if shared is not None and shared.model is broken:
            del self._models[value]

    def model(self, value: Any, where: str) -> ResolvedModel:
        if isinstance(value, str):
            shared = self._models.get(value)
            if shared is None:
                remote = RemoteModel(value, **self._client_options)
                endpoint: RuntimeModel = remote
                if self._batch:
                    batcher = PredictBatcher(remote)
                    assert self._start_service is not None
                    self._start_service(batcher.serve)
                    endpoint = batcher
                shared = ResolvedModel(endpoint, value, owned=False)
                self._models[value] = shared
                self.owned_models.append(remote)
            return shared
        if isinstance(value, RandomBaseline):  # rt.RANDOM: a fresh sampler per route
            return ResolvedModel(RandomModel(), "random", owned=True)
        if isinstance(value, RuntimeModel):
            return ResolvedModel(value, _env_label(value), owned=False)
        # ``for_spaces``: the framework policies (TorchPolicy, JaxPolicy, SB3Policy).
        if callable(value) or hasattr(value, "predict") or hasattr(value, "for_spaces"):
            name = getattr(value, "__name__", None) or type(value).__name__
            return ResolvedModel(LocalModel(value), str(name), owned=True)
        raise InvalidSpec(
            f"{where}: model must be an address, a policy callable or object with predict(), "
            f"or a RuntimeModel; got {type(value).__name__}"
        )
