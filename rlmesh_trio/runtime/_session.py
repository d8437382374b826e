"""Session setup: handshake both endpoints, check the contract, pick the edition, configure.

:func:`handshake` and :func:`configure` run the reference runtime's setup:
both endpoints connect at once, the env contract is validated (§4.1 of the
protocol), the workflow edition is negotiated, then the env is configured and
the model route resolved at once. The handshake's :class:`Session` says how
the route is driven.
"""

from __future__ import annotations

import attrs

from .._blocks import LaneBlockEnv
from .._editions import EditionOffer, describe_offers, select_edition
from .._endpoints import EndpointInfo
from .._errors import HandshakeError, InvalidSpec, ProtocolError
from .._protocol import CAP_SUBSET_STEP, WORKFLOW_EDITION, core_pb, model_pb, spaces_pb
from ._calls import RouteCalls, concurrently
from ._meta import TRIAL_INDEX_OPTION, declares_reset_option
from ._spec import RouteSpec
from ._timer import OperationTimer

__all__ = ["VECTOR_REFUSED", "Session", "check_contract", "configure", "handshake"]

VECTOR_REFUSED = (
    "vectorized runtime sessions (num_envs > 1) require NEXT_STEP autoreset unless "
    "the env steps lanes individually (the `subset_step` capability) or as one block "
    "(a lane block env with a batch policy and no observation, action or step hook); "
    "this env reports num_envs={num_envs} with autoreset disabled and no `subset_step`"
)


@attrs.frozen
class Session:
    """What setup settled: the contract, the edition and the drive mode it implies.

    ``env_owns_resets`` is NEXT_STEP autoreset; ``lanes`` is per-lane driving
    (autoreset disabled, ``num_envs > 1``, the ``subset_step`` capability, or
    ``block_only``: a lane block env without it, which only the block mode drives).
    """

    contract: core_pb.EnvContract
    num_envs: int
    env_owns_resets: bool
    lanes: bool
    trial_option: bool
    edition: str = ""
    block_only: bool = False

    @property
    def action_space(self) -> spaces_pb.SpaceSpec | None:
        return self.contract.spec.action_space if self.contract.spec else None

    @property
    def observation_space(self) -> spaces_pb.SpaceSpec | None:
        return self.contract.spec.observation_space if self.contract.spec else None


async def handshake(spec: RouteSpec, calls: RouteCalls, timer: OperationTimer) -> Session:
    """Connect both endpoints at once, check the contract and negotiate the edition.

    Cancellation: cancelling the caller cancels the connects in flight.
    Raises:
        OperationTimeout, EnvRpcError, ModelRpcError: a connect failed.
        ProtocolError, InvalidSpec: the env contract cannot be driven.
        HandshakeError: no workflow edition suits all three parties.
    """
    limits = spec.limits
    env, model = calls.env, calls.model
    env_info, model_info = await concurrently(
        lambda: calls.env_call(timer, "env.connect", limits.env_connect_timeout, env.connect),
        lambda: calls.model_call(
            timer, "model.connect", limits.model_connect_timeout, model.connect
        ),
    )
    block = isinstance(env, LaneBlockEnv) and env.block_ready
    session = check_contract(spec, env_info, block=block)
    offers = [
        # (ignores: mypy's attrs plugin cannot type EditionOffer's ``converter=tuple``)
        EditionOffer("env", env_info.editions, env_info.preferred_edition),  # type: ignore[arg-type]
        EditionOffer("model", model_info.editions, model_info.preferred_edition),  # type: ignore[arg-type]
        EditionOffer("runtime", (WORKFLOW_EDITION,), WORKFLOW_EDITION),  # type: ignore[arg-type]
    ]
    edition = select_edition(offers)
    if edition is None:
        raise HandshakeError(env_info.label, describe_offers(offers))
    return attrs.evolve(session, edition=edition)


async def configure(
    spec: RouteSpec, session: Session, calls: RouteCalls, timer: OperationTimer
) -> None:
    """Configure the env and resolve the model route at once, for ``session``'s edition.

    Cancellation: cancelling the caller cancels both calls.
    Raises:
        OperationTimeout, EnvRpcError, ModelRpcError: a call failed.
    """
    edition = session.edition
    resolve = model_pb.ResolveAdapterRequest(
        context=calls.context("resolve_adapter"),
        env_spec=session.contract.spec,
        selected_workflow_edition=edition,
        execution_horizon=spec.execution_horizon,
    )
    env, model = calls.env, calls.model
    timeout = spec.limits.configure_route_timeout
    await concurrently(
        lambda: calls.env_call(timer, "env.configure", timeout, env.configure, edition),
        lambda: calls.model_call(
            timer, "model.resolve_adapter", timeout, model.resolve_adapter, resolve
        ),
    )


def check_contract(spec: RouteSpec, env_info: EndpointInfo, *, block: bool = False) -> Session:
    """Validate the contract and autoreset mode exactly as the 0.1.0 runtime does (§4.1).

    ``block``: the env endpoint is a ready lane block (``rlmesh_trio._blocks``), so a
    vector env with autoreset disabled and no ``subset_step`` can still be driven,
    by the block mode only (``Session.block_only``).

    Raises:
        ProtocolError: no contract, no spaces, or an unknown autoreset mode.
        InvalidSpec: the spec asks for what this env's autoreset mode cannot do.
    """
    contract = spec.contract if spec.contract is not None else env_info.contract
    if contract is None or contract.spec is None:
        raise ProtocolError(f"env endpoint {env_info.label} reported no env contract")
    if contract.spec.action_space is None or contract.spec.observation_space is None:
        raise ProtocolError(
            f"env endpoint {env_info.label} sent an env contract without "
            "an action space and an observation space"
        )
    mode = int(contract.autoreset_mode)
    if mode not in (0, 1, 2, 3):
        raise ProtocolError(
            f"invalid spaces spec from env: decode error: unknown autoreset mode {mode}"
        )
    if mode == core_pb.AutoresetMode.SAME_STEP:
        raise InvalidSpec(
            "SAME_STEP autoreset is reserved but not yet supported by the runtime; "
            "construct the env with NEXT_STEP or DISABLED autoreset"
        )
    num_envs = contract.num_envs or 1
    if spec.num_envs is not None and contract.num_envs and spec.num_envs != num_envs:
        raise InvalidSpec(
            f"num_envs={spec.num_envs} does not match the env contract (num_envs={num_envs})"
        )
    if spec.num_envs is not None:
        num_envs = spec.num_envs
    next_step = mode == core_pb.AutoresetMode.NEXT_STEP
    if next_step:
        _refuse_driver_owned_options(spec)
    block_only = False
    if not next_step and num_envs > 1 and not env_info.has_capability(CAP_SUBSET_STEP):
        if not block:
            raise InvalidSpec(VECTOR_REFUSED.format(num_envs=num_envs))
        block_only = True
    return Session(
        contract=contract,
        num_envs=num_envs,
        env_owns_resets=next_step,
        lanes=not next_step and num_envs > 1,
        trial_option=declares_reset_option(contract.spec.metadata, TRIAL_INDEX_OPTION),
        block_only=block_only,
    )


def _refuse_driver_owned_options(spec: RouteSpec) -> None:
    """Seeds, runtime caps and trials need driver-owned resets; a NEXT_STEP env owns its own."""
    if spec.seeds is not None:
        raise InvalidSpec(
            "episode_seeds requires an env with autoreset disabled; this env reports "
            "NEXT_STEP autoreset and owns its resets"
        )
    if spec.max_episode_steps is not None or spec.max_episode_seconds is not None:
        raise InvalidSpec(
            "max_episode_steps / max_episode_seconds require an env with autoreset "
            "disabled; this env reports NEXT_STEP autoreset and owns its resets"
        )
    if spec.trial_index_base:
        raise InvalidSpec(
            "trial_index_base requires an env with autoreset disabled; this env reports "
            "NEXT_STEP autoreset and owns its resets"
        )
