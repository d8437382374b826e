"""What a "policy" is: a per-observation ``predict`` and/or a batched ``predict_batch``.

Users hand us a plain callable, an object with ``predict`` (and maybe
``predict_batch`` and ``predict_chunk``), a :class:`Policy` built with
:func:`policy`, or a framework model (a torch ``nn.Module``, or a
``TorchPolicy`` / ``JaxPolicy`` / ``SB3Policy``), whose functions depend on
the route's spaces (``for_spaces``). We normalise them once, up front, so the
hot path never inspects the user's object again.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import attrs

__all__ = ["Policy", "PolicyFn", "policy"]


def _is_async(fn: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    # A callable object whose __call__ is ``async def``.
    call = getattr(fn, "__call__", None)  # noqa: B004 - we want the bound method itself
    return call is not None and inspect.iscoroutinefunction(call)


@attrs.frozen(slots=True)
class PolicyFn:
    """One user function plus whether it must be awaited (decided once, at wrap time)."""

    fn: Callable[[Any], Any] = attrs.field(validator=attrs.validators.is_callable())
    is_async: bool = attrs.field()

    @is_async.default
    def _detect(self) -> bool:
        return _is_async(self.fn)

    @property
    def name(self) -> str:
        return getattr(self.fn, "__qualname__", None) or type(self.fn).__name__


def _to_fn(value: Any) -> PolicyFn | None:
    if value is None or isinstance(value, PolicyFn):
        return value
    return PolicyFn(value)


@attrs.frozen(slots=True)
class Policy:
    """A normalised policy.

    ``predict(obs) -> action`` receives one unbatched observation.
    ``predict_batch(obs_batch) -> actions`` receives the observations of R rows
    stacked along a leading axis (a dict of arrays for Dict spaces, a tuple for
    Tuple spaces, a ``list[str]`` for Text) and returns the R actions stacked
    the same way. Either may be ``async def``; either may be missing, not both.
    When ``predict`` is missing a single row goes through ``predict_batch`` as
    a batch of one; when ``predict_batch`` is missing R rows are predicted one
    by one. ``predict_chunk(obs) -> chunk`` (optional) returns a CHUNK of
    actions for one observation, stacked along a leading axis like a batch;
    a route resolved with ``execution_horizon`` h > 1 gets the first
    ``min(len(chunk), h)`` of them as action frames, replayed one per step.

    ``for_spaces(observation_space, action_space) -> Policy`` (optional, the
    framework policies) builds the functions for one pair of gymnasium spaces
    (e.g. argmax for a Discrete action space); the model host calls it once
    per distinct pair at ResolveAdapter. A policy may have only this.
    """

    predict: PolicyFn | None = attrs.field(converter=_to_fn, default=None)
    predict_batch: PolicyFn | None = attrs.field(converter=_to_fn, default=None)
    predict_chunk: PolicyFn | None = attrs.field(converter=_to_fn, default=None)
    for_spaces: Callable[[Any, Any], Policy] | None = attrs.field(default=None)

    def __attrs_post_init__(self) -> None:
        if self.predict is None and self.predict_batch is None and self.for_spaces is None:
            raise TypeError("a policy needs predict(obs), predict_batch(obs_batch), or both")

    @property
    def batched(self) -> bool:
        return self.predict_batch is not None

    @property
    def is_async(self) -> bool:
        return any(f is not None and f.is_async for f in (self.predict, self.predict_batch))


def policy(
    predict: Callable[[Any], Any] | None = None,
    *,
    batched: Callable[[Any], Any] | None = None,
    chunk: Callable[[Any], Any] | None = None,
) -> Policy:
    """Build a :class:`Policy` from a per-observation and/or a batched function.

    ``rlmesh_trio.policy(fn)`` is a single-observation policy;
    ``rlmesh_trio.policy(fn, batched=fn_batch)`` adds the batched form that
    model servers fuse across routes; ``rlmesh_trio.policy(batched=fn_batch)``
    is batched only. ``chunk=fn_chunk`` adds an action-chunk form (see
    :class:`Policy`).
    """
    return Policy(predict=predict, predict_batch=batched, predict_chunk=chunk)
