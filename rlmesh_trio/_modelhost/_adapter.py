"""What ResolveAdapter recorded for one ``env_id``: specs, horizon and the policy to call;
and its one-row predict answered right here (:func:`answer_row`), for a server that
reads the request from its parts."""

from __future__ import annotations

import time

import attrs

from .._errors import ProtocolError
from .._protocol import core_pb, spaces_pb
from ._faults import ModelFault
from ._one_row import RowPlan
from ._phases import ENCODE_ERRORS, encode_fault
from ._policy import Policy, PolicyFn

__all__ = ["Adapter", "RowAnswer", "answer_row", "observation_space", "sync_row"]

#: What :func:`answer_row` gives: the action frame (or the request's fault) and the
#: three phase times in nanoseconds (decode, policy call, encode).
RowAnswer = tuple[spaces_pb.SpaceValue | ModelFault, int, int, int]


@attrs.frozen(slots=True)
class Adapter:
    """What ResolveAdapter recorded for one ``env_id``."""

    env_id: str
    env_spec: core_pb.EnvSpec
    observation_space: spaces_pb.SpaceSpec | None
    action_space: spaces_pb.SpaceSpec
    execution_horizon: int
    #: Groups whose adapters share this key (the observation spec's bytes) can be fused.
    fuse_key: bytes
    #: The policy this adapter calls: the host's, or what its ``for_spaces`` built for
    #: these specs (one object per distinct pair of specs, shared by their adapters).
    policy: Policy = attrs.field(eq=False, repr=False)
    #: The codec calls of one-row predicts, planned from the two specs (None: general path).
    row_plan: RowPlan | None = attrs.field(default=None, eq=False, repr=False)
    #: The action spec's bytes: fused groups with equal keys encode their actions as one slab.
    action_key: bytes = attrs.field(default=b"", eq=False, repr=False)


def observation_space(adapter: Adapter) -> spaces_pb.SpaceSpec:
    """The adapter's observation spec.

    Raises:
        ModelFault: the env spec had none (0.1.0's message).
    """
    if adapter.observation_space is None:
        raise ModelFault.internal(
            "internal error: model error: env EnvSpec has no observation_space"
        )
    return adapter.observation_space


def sync_row(adapter: Adapter | None) -> tuple[RowPlan, PolicyFn] | None:
    """The one-row plan and the synchronous ``predict`` of an adapter whose plain one-row
    predicts can be answered right away (one action per predict: horizon 1), else None."""
    if adapter is None or adapter.execution_horizon > 1:
        return None
    plan = adapter.row_plan
    predict = adapter.policy.predict
    if plan is None or predict is None or predict.is_async:
        return None
    return plan, predict


def answer_row(adapter: Adapter, observation: spaces_pb.SpaceValue) -> RowAnswer | None:
    """Answer one valid one-row predict for ``adapter`` now, as ``ModelHost.handle``'s
    planned path does (same action frame, same faults, the same three timed phases),
    when its policy's ``predict`` is synchronous and the request is a plain one-row
    step; ``None`` (before calling anything) otherwise, or when the observation does
    not fit its space: the general path then answers, with its message.

    The caller has checked what ``ModelHost.check_predict`` checks (the context's ids,
    one non-empty ``episode_id``) and found ``adapter`` for the context's ``env_id``.
    Never raises for the policy's or the action's faults: they come back as the answer.
    """
    plan = adapter.row_plan
    predict = adapter.policy.predict
    # A horizon of 2 or more may mean action chunks: the general path decides.
    if plan is None or predict is None or predict.is_async or adapter.execution_horizon > 1:
        return None
    clock = time.perf_counter_ns
    started = clock()
    try:
        value = plan.decode(observation)
    except ProtocolError:
        return None
    called = clock()
    try:
        action = predict.fn(value)
    except Exception as exc:  # the user's policy failed: a ModelError naming the exception
        return ModelFault.from_exception(exc), called - started, clock() - called, 0
    returned = clock()
    answer: spaces_pb.SpaceValue | ModelFault
    try:
        answer = plan.encode(action)
    except ENCODE_ERRORS as exc:
        answer = encode_fault(exc)
    return answer, called - started, returned - called, clock() - returned
