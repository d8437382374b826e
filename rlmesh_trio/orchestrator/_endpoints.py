"""Turning what a user put in a :class:`Route` into runtime endpoints, and labelling them.

``LocalEnv`` and ``LocalModel`` are imported where an in-process env or policy is met, so
a run of remote endpoints loads neither the env host nor the model host.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs

from .._endpoints import GroupsPredicts, RuntimeEnv, RuntimeModel
from .._errors import InvalidSpec
from ..inprocess._random_model import RandomBaseline, RandomModel
from ..runtime._fused import FusedBlock, FusedSeat
from ..transport.client._remote_env import RemoteEnv
from ..transport.client._remote_model import RemoteModel
from ._batching import PredictBatcher
from ._grouping import WINDOW_ROWS, GroupingRule

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
    With ``batch_predicts`` an in-process model is shared the same way: every
    route naming the same policy object (or the same ``RuntimeModel`` that can
    ``grouped_predict``, such as a ``LocalModel``) goes through one
    :class:`PredictBatcher`, which groups their predicts while grouping pays.
    With ``fuse`` (which comes first) routes naming the same in-process policy
    object (or ``LocalModel``) share one ``LocalModel`` and one
    :class:`~rlmesh_trio.runtime._fused.FusedBlock`: each route takes a seat
    (:meth:`fused_seat`) and the block drives the routes that can be fused.
    """

    def __init__(
        self,
        *,
        batch_predicts: bool = False,
        start_service: Callable[[Callable[[], Awaitable[None]]], None] | None = None,
        client_options: Mapping[str, Any] | None = None,
        fuse: bool = False,
    ) -> None:
        if (batch_predicts or fuse) and start_service is None:
            raise ValueError("batch_predicts and fuse need start_service to run their tasks")
        # fuse: routes sharing an in-process policy object share one LocalModel and
        # one FusedBlock (its task a run service), by the policy's identity.
        self._fuse = fuse
        self._fused: dict[int, tuple[Any, ResolvedModel, FusedBlock]] = {}
        self._models: dict[str, ResolvedModel] = {}
        # batch_predicts: the batcher of each in-process model object, by identity.
        self._local: dict[int, tuple[Any, ResolvedModel]] = {}
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
            from ..inprocess._local_env import LocalEnv

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

    def _batcher(self, client: Any) -> PredictBatcher:
        """A measuring batcher over ``client``, its sender running as a run service."""
        # A run's first window (env resets, the model's first calls) is not steady state.
        rule = GroupingRule(warmup_rows=WINDOW_ROWS, probe_share=True)
        batcher = PredictBatcher(client, rule=rule)
        assert self._start_service is not None
        self._start_service(batcher.serve)
        return batcher

    def _shared_local(self, value: Any) -> ResolvedModel | None:
        """The one batcher of in-process model ``value`` (None: not a model to batch)."""
        known = self._local.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        if isinstance(value, RuntimeModel):
            if not isinstance(value, GroupsPredicts):
                return None
            client: Any = value
            label = _env_label(value)
        elif _is_policy(value):
            from ..inprocess._local_model import LocalModel

            client, label = LocalModel(value), _policy_name(value)
        else:
            return None
        shared = ResolvedModel(self._batcher(client), label, owned=False)
        self._local[id(value)] = (value, shared)  # value kept: its id stays its own
        return shared

    def _fused_local(self, value: Any) -> tuple[ResolvedModel, FusedBlock] | None:
        """The shared model and fused block of in-process policy ``value`` (None: not one)."""
        known = self._fused.get(id(value))
        if known is not None and known[0] is value:
            return known[1], known[2]
        from ..inprocess._fused_env import FusedEnvs
        from ..inprocess._local_model import LocalModel

        if isinstance(value, LocalModel):
            local, label = value, value.label
        elif not isinstance(value, RuntimeModel) and _is_policy(value):
            local, label = LocalModel(value), _policy_name(value)
            self.owned_models.append(local)
        else:
            return None
        block = FusedBlock(FusedEnvs(), local, label)
        assert self._start_service is not None
        self._start_service(block.serve)
        shared = ResolvedModel(local, label, owned=False)
        self._fused[id(value)] = (value, shared, block)  # value kept: its id stays its own
        return shared, block

    def fused_seat(self, value: Any, model: RuntimeModel) -> FusedSeat | None:
        """A seat in the fused block of ``value`` when ``model`` is its shared model."""
        known = self._fused.get(id(value))
        if known is None or known[0] is not value or known[1].model is not model:
            return None
        return known[2].seat()

    def model(self, value: Any, where: str) -> ResolvedModel:
        if self._fuse and not isinstance(value, str | RandomBaseline):
            fused = self._fused_local(value)
            if fused is not None:
                return fused[0]
        if isinstance(value, str):
            shared = self._models.get(value)
            if shared is None:
                remote = RemoteModel(value, **self._client_options)
                endpoint: RuntimeModel = remote
                if self._batch:
                    endpoint = self._batcher(remote)
                shared = ResolvedModel(endpoint, value, owned=False)
                self._models[value] = shared
                self.owned_models.append(remote)
            return shared
        if isinstance(value, RandomBaseline):  # rt.RANDOM: a fresh sampler per route
            return ResolvedModel(RandomModel(), "random", owned=True)
        if self._batch:
            shared_local = self._shared_local(value)
            if shared_local is not None:
                return shared_local
        if isinstance(value, RuntimeModel):
            return ResolvedModel(value, _env_label(value), owned=False)
        if _is_policy(value):
            from ..inprocess._local_model import LocalModel

            return ResolvedModel(LocalModel(value), _policy_name(value), owned=True)
        raise InvalidSpec(
            f"{where}: model must be an address, a policy callable or object with predict(), "
            f"or a RuntimeModel; got {type(value).__name__}"
        )


def _is_policy(value: Any) -> bool:
    """A policy object: a callable, an object with ``predict()``, or a framework policy
    (TorchPolicy, JaxPolicy, SB3Policy build theirs per spaces: ``for_spaces``)."""
    return callable(value) or hasattr(value, "predict") or hasattr(value, "for_spaces")


def _policy_name(value: Any) -> str:
    return str(getattr(value, "__name__", None) or type(value).__name__)
