"""``RunOptions``: the run-wide settings of one run, written (defaults, checks, docs) once.

:func:`~rlmesh_trio.run`, :func:`~rlmesh_trio.run_routes` and
:class:`~rlmesh_trio.Orchestrator` take ``options=RunOptions(...)`` and the
same fields as keywords (:class:`RunSettings`), a keyword overriding the field
of ``options``; a distributed run sends one to every shard. Every check of a
setting happens here, when the value is built, before any route starts.
"""

from __future__ import annotations

import enum
import math
import os
from collections.abc import Iterator, Mapping
from typing import Any, Final, Literal, TypedDict, Unpack

import attrs

from .._errors import InvalidSpec
from ._retry import DEFAULT_BACKOFF, RetryPolicy

__all__ = [
    "ON_FAILURE",
    "UNSET",
    "ClientOptions",
    "KeywordSettings",
    "OnFailure",
    "RunOptions",
    "RunSettings",
    "Unset",
    "settle_options",
]

OnFailure = Literal["cancel_siblings", "isolate"]
ON_FAILURE: Final[tuple[OnFailure, ...]] = ("cancel_siblings", "isolate")
#: What a gRPC client made from an address accepts (``RemoteEnv`` / ``RemoteModel``).
CLIENT_KEYS: Final = ("connect_timeout", "ssl", "token")


class Unset(enum.Enum):
    """The type of :data:`UNSET`."""

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


#: An argument not given: its value comes from ``options`` (or ``RunOptions()``'s default).
UNSET: Final = Unset.UNSET


class ClientOptions(Mapping[str, Any]):
    """A read-only copy of ``client_options``: it pickles (to a shard), hashes, and its
    repr names the keys only (a token or an SSL context is never printed)."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        self._items: dict[str, Any] = dict(items or {})

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(frozenset(self._items.items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mapping) and dict(other.items()) == self._items

    def __repr__(self) -> str:
        return f"ClientOptions(keys={sorted(self._items)!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (ClientOptions, (self._items,))


def _client_options(value: Mapping[str, Any] | None) -> ClientOptions:
    if value is None or isinstance(value, ClientOptions):
        return value or ClientOptions()
    if not isinstance(value, Mapping):
        raise InvalidSpec(
            f"client_options must be a mapping (token=, ssl=, connect_timeout=), "
            f"got {type(value).__name__}"
        )
    unknown = sorted(str(key) for key in value if key not in CLIENT_KEYS)
    if unknown:
        raise InvalidSpec(
            f"client_options: unknown key {unknown[0]!r} (known: {', '.join(CLIENT_KEYS)})"
        )
    return ClientOptions(value)


def _on_failure(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if value not in ON_FAILURE:
        raise InvalidSpec(f"on_failure must be one of {ON_FAILURE}, got {value!r}")


def _max_concurrency(instance: object, attribute: attrs.Attribute[int | None], value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSpec(f"max_concurrency must be an integer >= 1 or None, got {value!r}")
    if value < 1:
        raise InvalidSpec(f"max_concurrency must be >= 1, got {value}")


def _flag(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, bool) and not (value is None and attribute.name == "batch_predicts"):
        allowed = "True, False or None" if attribute.name == "batch_predicts" else "True or False"
        raise InvalidSpec(f"{attribute.name} must be {allowed}, got {value!r}")


def _ledger(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, str | os.PathLike):
        raise InvalidSpec(f"ledger must be a path or None, got {type(value).__name__}")


def _resume(instance: RunOptions, attribute: attrs.Attribute[bool], value: bool) -> None:
    _flag(instance, attribute, value)
    # attrs runs validators once every field is set, so ledger is readable here.
    if value and instance.ledger is None:
        raise InvalidSpec("resume needs a ledger (ledger=PATH, --ledger FILE)")


def _non_negative_int(instance: object, attribute: attrs.Attribute[int], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidSpec(f"{attribute.name} must be an integer >= 0, got {value!r}")


def _seconds(instance: object, attribute: attrs.Attribute[float], value: Any) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not (0 <= value < math.inf):
        raise InvalidSpec(f"{attribute.name} must be a number of seconds >= 0, got {value!r}")


@attrs.frozen(kw_only=True)
class RunOptions:
    """How a run runs its routes (not which routes, nor its hooks); every field is checked here.

    * ``on_failure``: ``"cancel_siblings"`` (default): the first route error
      cancels every other route and the run raises :class:`~rlmesh_trio.RunFailed`;
      ``"isolate"``: failed routes are recorded and the rest carry on.
    * ``max_concurrency``: routes running at once (``None``: all of them).
    * ``handle_sigint``: Ctrl+C (main thread only) cancels every route and raises
      :class:`~rlmesh_trio.RunInterrupted` with the partial report (default ``True``).
    * ``batch_predicts``: ``None`` (default) runs routes sharing one in-process
      policy object as one fused block; ``True`` also groups a model address's
      predicts; ``False`` opts out of both (docs/guide/batching.md).
    * ``client_options``: ``token=``, ``ssl=``, ``connect_timeout=`` for every gRPC
      client made from an address in a route; kept read-only, and the repr shows
      its keys only.
    * ``ledger``: a JSON Lines file every finished episode is appended to before it
      counts as done.
    * ``resume``: run only the episodes ``ledger`` lacks and report the whole plan
      (needs ``ledger``).
    * ``retries``: reruns of a route's interrupted episode on a new session after a
      broken connection (default 0).
    * ``retry_backoff``: seconds before the first rerun, doubling (jittered,
      capped) for each further one.

    Raises:
        InvalidSpec: a field out of range or of the wrong type (one line naming
            it), an unknown ``client_options`` key, or ``resume`` without ``ledger``.
    """

    on_failure: OnFailure = attrs.field(default="cancel_siblings", validator=_on_failure)
    max_concurrency: int | None = attrs.field(default=None, validator=_max_concurrency)
    handle_sigint: bool = attrs.field(default=True, validator=_flag)
    batch_predicts: bool | None = attrs.field(default=None, validator=_flag)
    client_options: Mapping[str, Any] = attrs.field(
        factory=ClientOptions, converter=_client_options
    )
    ledger: str | os.PathLike[str] | None = attrs.field(default=None, validator=_ledger)
    resume: bool = attrs.field(default=False, validator=_resume)
    retries: int = attrs.field(default=0, validator=_non_negative_int)
    retry_backoff: float = attrs.field(default=DEFAULT_BACKOFF, validator=_seconds)
    # Not here, but Orchestrator's own arguments: argv, trial_bases and
    # ledger_route_ends say where one run sits (the command that started it, the
    # trials a coordinator dealt this shard, a watcher reading its ledger), not how
    # routes run; a distributed run sends these options to every shard unchanged,
    # while each shard gets its own trial bases.

    @property
    def retry_policy(self) -> RetryPolicy:
        """``retries`` and ``retry_backoff`` as the policy a route's reruns follow."""
        return RetryPolicy(retries=self.retries, backoff=self.retry_backoff)


class KeywordSettings(TypedDict, total=False):
    """:class:`RunOptions`' fields that ``run`` and ``run_routes`` take as keywords only."""

    handle_sigint: bool
    batch_predicts: bool | None
    client_options: Mapping[str, Any] | None
    ledger: str | os.PathLike[str] | None
    resume: bool
    retries: int
    retry_backoff: float


class RunSettings(KeywordSettings, total=False):
    """Every :class:`RunOptions` field as a keyword (``Orchestrator``'s ``**settings``);
    ``run``/``run_routes`` also take these two positionally, after ``hooks``."""

    on_failure: OnFailure
    max_concurrency: int | None


def settle_options(
    options: RunOptions | None,
    on_failure: OnFailure | Unset = UNSET,
    max_concurrency: int | Unset | None = UNSET,
    **settings: Unpack[KeywordSettings],
) -> RunOptions:
    """``options`` (default ``RunOptions()``) with every given setting put over its field.

    Raises:
        InvalidSpec: ``options`` is not a ``RunOptions``, or a setting is refused
            (as :class:`RunOptions`).
        TypeError: a keyword that is no ``RunOptions`` field (as for any unknown
            keyword argument).
    """
    if options is None:
        options = RunOptions()
    elif not isinstance(options, RunOptions):
        raise InvalidSpec(f"options must be a RunOptions, got {type(options).__name__}")
    changes: dict[str, Any] = dict(settings)
    unknown = sorted(changes.keys() - attrs.fields_dict(RunOptions).keys())
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r} (not a RunOptions field)")
    if on_failure is not UNSET:
        changes["on_failure"] = on_failure
    if max_concurrency is not UNSET:
        changes["max_concurrency"] = max_concurrency
    return attrs.evolve(options, **changes) if changes else options
