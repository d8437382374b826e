"""The policy each adapter calls: the host's own, or one built for the route's spaces.

A framework policy (``Policy.for_spaces``) decides per pair of spaces how its
output becomes an action (argmax for a Discrete space, the output itself for a
Box), so the host builds one :class:`Policy` per distinct pair of specs at
ResolveAdapter and every adapter with those specs shares it. Groups fuse into
one batched call only when they share that policy.

What ResolveAdapter derives from a pair of specs (their checks, bytes, keys,
one-row plan and policy: a :class:`Bound`) depends on nothing else, so
:meth:`BoundPolicies.bind` keeps it by the specs' bytes: many routes over
one kind of env (``rt.shard`` over 32 envs, one policy) pay for it once.
"""

from __future__ import annotations

import attrs

from .. import spaces
from .._errors import ProtocolError
from .._protocol import spaces_pb
from ..spaces._bytes import spec_bytes
from ._coerce import as_policy
from ._faults import ModelFault
from ._one_row import RowPlan, plan_rows
from ._phases import describe
from ._policy import Policy

__all__ = ["Bound", "BoundPolicies"]

#: Distinct pairs of specs whose :class:`Bound` is kept (a server resolving more kinds
#: of env than this rebuilds the oldest ones' when they come back).
_KEPT_PAIRS = 64


@attrs.frozen(slots=True)
class Bound:
    """What adapters with one pair of specs share (see the module doc)."""

    fuse_key: bytes
    action_key: bytes
    row_plan: RowPlan | None
    policy: Policy


class BoundPolicies:
    """The policies adapters call, keyed by their fuse key (see the module doc).

    Synchronous, no checkpoint: nothing to cancel.
    """

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._built: dict[bytes, Policy] = {}
        self._pairs: dict[tuple[bytes, bytes], Bound] = {}
        #: No function of any policy here is ``async def`` (kept as policies are built).
        self.all_sync = _sync(policy)

    def bind(self, obs: spaces_pb.SpaceSpec | None, action: spaces_pb.SpaceSpec) -> Bound:
        """The checks, keys, one-row plan and policy of an adapter with these specs
        (computed once per distinct pair; see the module doc).

        Raises:
            ModelFault: a spec the codec cannot decode (INVALID_REQUEST, ``decode
                error: ...``), or ``for_spaces`` refused the spaces.
        """
        obs_key = spec_bytes(obs) if obs is not None else b""
        action_key = spec_bytes(action)
        pair = (obs_key, action_key)
        bound = self._pairs.get(pair)
        if bound is not None:
            return bound
        for space in (action, obs):
            if space is None:
                continue
            try:
                spaces.to_gymnasium(space)
            except ProtocolError as exc:
                raise ModelFault.invalid(f"decode error: {describe(exc)}") from None
        key = self.fuse_key(obs_key, action_key)
        bound = Bound(key, action_key, plan_rows(obs, action), self.policy_for(key, obs, action))
        if len(self._pairs) >= _KEPT_PAIRS:
            del self._pairs[next(iter(self._pairs))]
        self._pairs[pair] = bound
        return bound

    def fuse_key(self, obs_key: bytes, action_key: bytes) -> bytes:
        """The key under which adapters' groups can share one batched call, from the
        specs' bytes (``obs_key`` empty without an observation spec)."""
        if self.policy.for_spaces is None:
            return obs_key
        # Policies built per pair of specs fuse only with adapters of the same pair.
        return len(obs_key).to_bytes(8, "little") + obs_key + action_key

    def policy_for(
        self, key: bytes, obs: spaces_pb.SpaceSpec | None, action: spaces_pb.SpaceSpec
    ) -> Policy:
        """The host's policy, or the one its ``for_spaces`` builds for these specs (cached).

        Raises:
            ModelFault: ``for_spaces`` refused the spaces (INVALID_REQUEST, its message).
        """
        build = self.policy.for_spaces
        if build is None:
            return self.policy
        built = self._built.get(key)
        if built is None:
            observation_space = spaces.to_gymnasium(obs) if obs is not None else None
            try:
                built = as_policy(build(observation_space, spaces.to_gymnasium(action)))
            except Exception as exc:  # the route's spaces do not fit the policy: refuse it
                raise ModelFault.invalid(f"model error: {type(exc).__name__}: {exc}") from None
            self._built[key] = built
            self.all_sync = self.all_sync and _sync(built)
        return built


def _sync(policy: Policy) -> bool:
    fns = (policy.predict, policy.predict_batch, policy.predict_chunk)
    return not any(fn is not None and fn.is_async for fn in fns)
