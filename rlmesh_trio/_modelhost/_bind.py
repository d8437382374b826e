"""The policy each adapter calls: the host's own, or one built for the route's spaces.

A framework policy (``Policy.for_spaces``) decides per pair of spaces how its
output becomes an action (argmax for a Discrete space, the output itself for a
Box), so the host builds one :class:`Policy` per distinct pair of specs at
ResolveAdapter and every adapter with those specs shares it. Groups fuse into
one batched call only when they share that policy.
"""

from __future__ import annotations

from .. import spaces
from .._protocol import spaces_pb
from ._coerce import as_policy
from ._faults import ModelFault
from ._policy import Policy

__all__ = ["BoundPolicies"]


class BoundPolicies:
    """The policies adapters call, keyed by their fuse key (see the module doc).

    Synchronous, no checkpoint: nothing to cancel.
    """

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._built: dict[bytes, Policy] = {}
        #: No function of any policy here is ``async def`` (kept as policies are built).
        self.all_sync = _sync(policy)

    def fuse_key(self, obs: spaces_pb.SpaceSpec | None, action: spaces_pb.SpaceSpec) -> bytes:
        """The key under which adapters' groups can share one batched call."""
        key = bytes(obs) if obs is not None else b""
        if self.policy.for_spaces is None:
            return key
        # Policies built per pair of specs fuse only with adapters of the same pair.
        return len(key).to_bytes(8, "little") + key + bytes(action)

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
