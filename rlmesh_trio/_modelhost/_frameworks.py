"""What torch, jax and Stable-Baselines3 policies share: batches in, actions out.

A :class:`FrameworkPolicy` knows how to run its framework on a stacked batch
of observations (``forward``) and how to turn the result into numpy
(``to_numpy``); everything else lives here once: the batch axis a single row
gets, the default action for each action space (argmax over logits for a
Discrete space, the output itself for a Box, clipped only if asked), the cast
to the space's dtype, and the error that names the policy when the framework
raises. ``for_spaces`` builds the :class:`Policy` the model host calls: a
one-row ``predict`` and a ``predict_batch`` that the host fuses across routes,
so grouped predicts become one forward pass.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from .._errors import InvalidSpec, PolicyError, RlmeshTrioError
from ._policy import Policy

__all__ = [
    "ActionMismatch",
    "ActionRule",
    "FrameworkPolicy",
    "add_batch_axis",
    "check_action",
    "map_leaves",
]

#: ``action=``: None (the space's default), "argmax", "identity", or a callable that gets
#: the framework's raw output batch and returns the actions of that batch.
ActionRule = str | Callable[[Any], Any] | None

_RULES = ("argmax", "identity")


class ActionMismatch(PolicyError):
    """A framework policy's output does not fit the route's action space.

    The message names what came back (a tuple of two arrays, logits of the
    wrong width), what the space takes, and points at ``action=``.
    """

    def __init__(self, policy: str, detail: str) -> None:
        self.policy = policy
        self.detail = detail
        # Not PolicyError's "{policy} raised {detail}": the model raised nothing.
        RlmeshTrioError.__init__(self, f"{policy}: {detail}")


class _Mismatch(ValueError):
    """What an action rule raises for an output that does not fit; named by the policy."""


def check_action(action: ActionRule) -> ActionRule:
    """``action`` if it is a valid ``action=`` value.

    Raises:
        InvalidSpec: neither None, "argmax", "identity" nor a callable.
    """
    if action is None or callable(action) or action in _RULES:
        return action
    raise InvalidSpec(
        f"action must be None, 'argmax', 'identity' or a callable(output) -> actions, "
        f"got {action!r}"
    )


def map_leaves(tree: Any, leaf: Callable[[Any], Any]) -> Any:
    """``leaf`` applied to every array of a dict / tuple / list tree (structure kept)."""
    if isinstance(tree, dict):
        return {key: map_leaves(value, leaf) for key, value in tree.items()}
    if isinstance(tree, tuple | list):
        return type(tree)(map_leaves(value, leaf) for value in tree)
    return leaf(tree)


def _one_row(value: Any) -> Any:
    return value[np.newaxis] if isinstance(value, np.ndarray) else np.asarray(value)[np.newaxis]


def add_batch_axis(observation: Any) -> Any:
    """One observation as a batch of one (a view where it is an array: no copy)."""
    return map_leaves(observation, _one_row)


class FrameworkPolicy(ABC):
    """A model of some framework as a policy (see the module doc).

    Subclasses set ``name`` (``TorchPolicy(Sequential)``), ``action`` and
    ``clip`` and implement ``forward`` and ``to_numpy``; they are sync and hold
    no Trio or asyncio state, so the host may call them inline or in a thread.
    """

    name: str
    action: ActionRule = None
    clip: bool = False
    #: How the framework spells an argmax over the last axis of a batch (error hints).
    argmax_call: str = ".argmax(axis=1)"

    @abstractmethod
    def forward(self, obs_batch: Any) -> Any:
        """The framework's output for a stacked numpy batch of observations."""

    @abstractmethod
    def to_numpy(self, output: Any) -> Any:
        """A framework output (a tensor, or a tree of them) as numpy arrays."""

    def for_spaces(self, observation_space: gym.Space | None, action_space: gym.Space) -> Policy:
        """The policy for a route with these spaces: one-row and batched predicts.

        Raises:
            InvalidSpec: ``action="argmax"`` for an action space that is not Discrete.
        """
        if self.action == "argmax" and not isinstance(action_space, gym.spaces.Discrete):
            raise InvalidSpec(f"{self.name}: action='argmax' needs a Discrete action space")
        finish = _actions_for(action_space, self.action, self.clip, self.argmax_call)
        custom = self.action if callable(self.action) else None
        name = self.name

        def predict_batch(obs_batch: Any) -> Any:
            try:
                output = self.forward(obs_batch)
                if custom is not None:
                    output = custom(output)
                return finish(self.to_numpy(output))
            except PolicyError:
                raise
            except _Mismatch as exc:
                raise ActionMismatch(name, str(exc)) from None
            except Exception as exc:
                raise PolicyError(name, f"{type(exc).__name__}: {exc}") from exc

        def predict(obs: Any) -> Any:
            return map_leaves(predict_batch(add_batch_axis(obs)), _first_row)

        return Policy(predict=predict, predict_batch=predict_batch)


def _first_row(value: Any) -> Any:
    return value[0]


def _described(value: Any) -> str:
    """What a policy gave, in a few words: ``float32 of shape (1, 2)``, ``a tuple of 2: ...``."""
    if isinstance(value, np.ndarray):
        return f"{value.dtype} of shape {value.shape}"
    if isinstance(value, tuple | list):
        inner = ", ".join(_described(item) for item in value[:4])
        more = ", ..." if len(value) > 4 else ""
        return f"a {type(value).__name__} of {len(value)} ({inner}{more})"
    if isinstance(value, dict):
        inner = ", ".join(f"{key!r}: {_described(item)}" for key, item in list(value.items())[:4])
        more = ", ..." if len(value) > 4 else ""
        return f"a dict {{{inner}{more}}}"
    return type(value).__name__


def _is_tree(value: Any) -> bool:
    """A structure of arrays (``(logits, value)``, a dict of heads), not a batch of actions."""
    if isinstance(value, dict):
        return True
    return isinstance(value, tuple | list) and any(
        isinstance(item, tuple | list | dict) or (isinstance(item, np.ndarray) and item.ndim > 0)
        for item in value
    )


def _array(out: Any, wants: str, action: ActionRule, example: str) -> np.ndarray:
    """``out`` as one array, or :class:`_Mismatch` saying what came back, what ``wants``
    (the space's words) and how ``action=`` picks the actions out of it."""
    if not _is_tree(out):
        try:
            array = np.asarray(out)
        except ValueError:  # ragged: numpy's "inhomogeneous shape"
            array = None
        if array is not None and array.dtype.kind != "O":
            return array
    raise _Mismatch(_mismatch(out, wants, action, example))


def _mismatch(out: Any, wants: str, action: ActionRule, example: str) -> str:
    gave = f"{wants}; the model gave {_described(out)}"
    if callable(action):
        return f"{gave} from its action= callable, which must return the actions"
    if isinstance(out, tuple | list | dict) and out:
        pick = f"out[{next(iter(out))!r}]" if isinstance(out, dict) else "out[0]"
        return (
            f"{gave}; pass action=... to pick the actions from it, "
            f"e.g. action=lambda out: {pick}{example}"
        )
    return f"{gave} (pass action=... to say how)"


def _actions_for(
    space: gym.Space, action: ActionRule, clip: bool, argmax_call: str = ".argmax(axis=1)"
) -> Callable[[Any], Any]:
    """numpy output batch -> action batch, for ``space`` (see the module doc).

    Raises (from the function returned):
        _Mismatch: the output does not fit the space, e.g. a ``(logits, value)`` tuple.
    """
    if isinstance(space, gym.spaces.Discrete):
        start = int(space.start)
        n = int(space.n)
        argmax = action is None or action == "argmax"
        wants = f"Discrete({n}) actions take logits of shape (rows, {n}) or integer actions"

        def discrete(out: Any) -> Any:
            out = _array(out, wants, action, argmax_call)
            # dtype.kind, not np.issubdtype: this runs once per batched predict.
            if out.dtype.kind in "iu" or action == "identity" or not argmax:
                return out.astype(np.int64, copy=False).reshape(-1)
            if out.ndim != 2 or out.shape[1] != n:
                raise _Mismatch(_mismatch(out, wants, action, argmax_call))
            picked = out.argmax(axis=1)
            return picked + start if start else picked

        return discrete
    if isinstance(space, gym.spaces.Box):
        low, high, shape, dtype = space.low, space.high, space.shape, space.dtype
        wants = f"{space} actions take an array of shape {('rows', *shape)}".replace("'", "")

        def box(out: Any) -> Any:
            out = _array(out, wants, action, "")
            if out.shape[1:] != shape:
                try:
                    out = out.reshape((out.shape[0] if out.ndim else 1, *shape))
                except ValueError:
                    raise _Mismatch(_mismatch(out, wants, action, "")) from None
            if clip:
                out = np.clip(out, low, high)
            return out.astype(dtype, copy=False)

        return box
    if isinstance(space, gym.spaces.MultiDiscrete | gym.spaces.MultiBinary):
        dtype = space.dtype
        wants = f"{type(space).__name__} actions take an array of {dtype}"
        return lambda out: _array(out, wants, action, "").astype(dtype, copy=False)
    return lambda out: out
