"""The episode ledger: an append-only JSON Lines file, one line per finished episode.

Line 1 is the header (schema name and version, plan identity and digest,
package versions, argv, start time). Then one ``episode`` line per finished
episode (every ``EpisodeResult`` field, route id, ticket key, attempt,
timestamps), a ``resume`` line each time a run resumes it, and a ``route`` line
when a route stops (its status and error message: what a watcher shows). Each line is
written with one ``write`` call and flushed at once, so a SIGKILL of the
writer loses at most the episodes still in flight; the file is fsynced at
least every 100 ms by :meth:`LedgerWriter.sync_forever` (an OS crash loses
at most that window). Lines are strict JSON: a non-finite reward is written
as ``null`` with its raw text in ``reward_raw`` (``"nan"``, ``"inf"``), as
the JSON report does; ledgers written before that, with a bare ``NaN``, still
read. A torn last line (a writer killed mid-line) is
tolerated by the reader and reported; on resume it is cut off before
anything new is appended.
"""

from __future__ import annotations

import errno
import json
import logging
import math
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import trio

from .._errors import RunFileError
from ..report._finite import raw_float, strict_json_value
from ..runtime._results import EpisodeResult
from ._plan import Ticket

__all__ = [
    "LEDGER_SCHEMA",
    "LEDGER_VERSION",
    "LedgerContents",
    "LedgerEntry",
    "LedgerError",
    "LedgerExists",
    "LedgerWriter",
    "ledger_record",
    "read_ledger",
]

try:  # POSIX: one writer per ledger file, enforced by an advisory lock
    import fcntl
except ImportError:  # pragma: no cover - not on POSIX: no lock
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("rlmesh_trio.ledger")

LEDGER_SCHEMA = "rlmesh-trio.ledger"
LEDGER_VERSION = 1
#: The longest a flushed line waits for its fsync.
SYNC_INTERVAL = 0.1
_EPISODE_FIELDS = tuple(a.name for a in attrs.fields(EpisodeResult))


class LedgerError(RunFileError):
    """A ledger file cannot be used: unreadable, not a ledger, or corrupt before its last line."""

    def __init__(self, path: str, detail: str) -> None:
        self.path = path
        self.problem = detail
        super().__init__(f"ledger {path}: {detail}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.problem))


def write_failure(path: str, exc: OSError) -> LedgerError:
    """The error for a ledger write that failed: a full disk is named as such.

    Each record is one ``write`` call, so whatever the failure, the lines
    written before it are whole; at most a torn last line follows them, which
    the reader skips and a resume cuts off.
    """
    intact = "the ledger is intact up to its last complete line"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return LedgerError(path, f"the disk is full ({exc.strerror}); {intact}")
    return LedgerError(path, f"cannot write: {exc.strerror or exc}; {intact}")


class LedgerExists(LedgerError):
    """A run without resume was pointed at a ledger that already holds a run (left untouched)."""


@attrs.frozen
class LedgerEntry:
    """One finished episode as the ledger holds it."""

    route_id: str
    ticket: str
    attempt: int
    started_at: float
    finished_at: float
    result: EpisodeResult
    #: The env contract's identity the episode ran against (``None`` in older ledgers).
    env_contract: Mapping[str, str] | None = None


@attrs.frozen
class LedgerContents:
    """What a ledger file holds. ``torn`` is the byte count of a torn last line (0: none)."""

    header: Mapping[str, Any]
    entries: tuple[LedgerEntry, ...]
    resumes: tuple[Mapping[str, Any], ...]
    good_bytes: int
    torn: int
    #: ``route`` records: each route's end (``route_id``, ``status``, ``error``), in file order.
    route_ends: tuple[Mapping[str, Any], ...] = ()

    def by_ticket(self) -> dict[str, LedgerEntry]:
        return {entry.ticket: entry for entry in self.entries}


def _parse_entry(data: Mapping[str, Any]) -> LedgerEntry:
    episode = dict(data["episode"])
    raw = episode.get("reward_raw")
    if episode.get("reward") is None and isinstance(raw, str):
        episode["reward"] = float(raw)  # a non-finite reward, written as null + its raw text
    result = EpisodeResult(**{k: episode[k] for k in _EPISODE_FIELDS if k in episode})
    return LedgerEntry(
        route_id=str(data["route_id"]),
        ticket=str(data["ticket"]),
        attempt=int(data.get("attempt", 1)),
        started_at=float(data.get("started_at", 0.0)),
        finished_at=float(data.get("finished_at", 0.0)),
        result=result,
        env_contract=contract if isinstance(contract := data.get("env_contract"), dict) else None,
    )


def ledger_record(record: Any) -> tuple[str, Any]:
    """One record after the header as ``(kind, value)``: ``("episode", LedgerEntry)``,
    ``("resume", dict)`` or ``("route", dict)``.

    Raises:
        ValueError, KeyError, TypeError: the record is not a ledger record.
    """
    kind = record.get("type") if isinstance(record, dict) else None
    if kind == "episode":
        return kind, _parse_entry(record)
    if kind == "resume":
        return kind, record
    if kind == "route":
        return kind, {
            "route_id": str(record["route_id"]),
            "status": str(record["status"]),
            "error": str(record.get("error") or ""),
        }
    raise ValueError(f"unknown record type {kind!r}")


#: How much of a first line that is not a ledger header an error quotes.
FOUND_CHARS = 60


def _quote(data: bytes) -> str:
    """The start of ``data`` quoted: as text if it is text, else as bytes (a PNG's magic)."""
    start = data[: FOUND_CHARS * 4]  # enough bytes for FOUND_CHARS characters
    try:
        text = start.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(start) - 3:  # not just a character cut in two at the end
            return repr(data[:FOUND_CHARS]) + ("..." if len(data) > FOUND_CHARS else "")
        text = start[: exc.start].decode("utf-8")
    quoted = text[:FOUND_CHARS]
    return repr(quoted) + ("..." if len(quoted.encode("utf-8")) < len(data) else "")


def not_a_header(path: str, first: bytes) -> LedgerError:
    """The error for a file whose first line (``first``, or its start) is not a ledger
    header, quoting what it holds instead (``README.md``'s title, a PNG's magic bytes)."""
    found = f"it reads {_quote(first)}" if first.strip() else "it is blank"
    return LedgerError(path, f"the first line is not an rlmesh-trio ledger header ({found})")


def check_header(path: str, header: Any, raw: bytes | None = None) -> Mapping[str, Any]:
    """``header`` (parsed from the line ``raw``, quoted in the error) if it is a ledger
    header this version reads.

    Raises:
        LedgerError: not a ledger header, or another version.
    """
    if not isinstance(header, dict) or header.get("schema") != LEDGER_SCHEMA:
        if raw is not None:
            raise not_a_header(path, raw)
        raise LedgerError(path, "the first line is not an rlmesh-trio ledger header")
    version = header.get("version")
    if version != LEDGER_VERSION:
        raise LedgerError(path, f"ledger version {version!r} is not supported ({LEDGER_VERSION})")
    return header


def read_ledger(path: str | os.PathLike[str]) -> LedgerContents:
    """Read a ledger; a torn last line is skipped and counted in ``torn`` (and logged).

    A file holding only a torn header reads as an empty ``header`` (``{}``).

    Raises:
        LedgerError: the file cannot be read, has no header, or a line before the
            last one is not a valid record.
    """
    name = os.fspath(path)
    try:
        data = Path(name).read_bytes()
    except OSError as exc:
        raise LedgerError(name, f"cannot read: {exc.strerror or exc}") from None
    lines = data.split(b"\n")
    # A complete file ends in "\n", so the last piece is empty; anything else there is torn.
    tail = lines.pop()
    parsed: list[tuple[int, Any]] = []
    offset = 0
    for number, raw in enumerate(lines, start=1):
        end = offset + len(raw) + 1
        try:
            parsed.append((end, json.loads(raw)))
        except ValueError:
            # A first line that does not even start as JSON is another kind of file.
            first = number == 1
            if number == len(lines) and not tail and not (first and not raw.startswith(b"{")):
                tail = raw + b"\n"  # the last full line is itself torn garbage
                break
            if first:
                raise not_a_header(name, raw) from None
            raise LedgerError(name, f"line {number} is not valid JSON") from None
        offset = end
    good = parsed[-1][0] if parsed else 0
    torn = len(data) - good
    if torn:
        log.warning("ledger %s: ignoring a torn last line (%d bytes)", name, torn)
    if not parsed:
        if torn:  # the writer died inside its header: nothing was run yet
            return LedgerContents({}, (), (), 0, torn)
        raise LedgerError(name, "has no header line")
    header = check_header(name, parsed[0][1], lines[0])
    found: dict[str, list[Any]] = {"episode": [], "resume": [], "route": []}
    for number, (_end, record) in enumerate(parsed[1:], start=2):
        try:
            kind, value = ledger_record(record)
        except (KeyError, TypeError, ValueError) as exc:
            raise LedgerError(name, f"line {number} is not a ledger record ({exc})") from None
        found[kind].append(value)
    return LedgerContents(
        header,
        tuple(found["episode"]),
        tuple(found["resume"]),
        good,
        torn,
        route_ends=tuple(found["route"]),
    )


def check_ledger_place(path: str | os.PathLike[str]) -> None:
    """Refuse a path no run can put a ledger at: its folder is missing, or it is a folder.

    Raises:
        LedgerError: naming the path and the folder at fault.
    """
    name = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(name))
    if not os.path.isdir(folder):
        raise LedgerError(name, f"folder {folder} does not exist")
    if os.path.isdir(name):
        raise LedgerError(name, "is a folder, not a file")


def ledger_is_empty(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is missing or holds no bytes (a run may start on it without resume)."""
    try:
        return os.path.getsize(path) == 0
    except FileNotFoundError:
        return True


class LedgerWriter:
    """The single writer of one ledger file (append-only).

    Each record is one ``os.write`` of one line to an ``O_APPEND`` descriptor:
    on disk (in the OS page cache) as soon as the call returns, whatever happens
    to this process next. Durability against an OS crash comes from
    :meth:`sync_forever`, which fsyncs (off the Trio thread) within
    ``SYNC_INTERVAL`` of any write.
    """

    def __init__(self, path: str | os.PathLike[str], *, truncate_to: int | None = None) -> None:
        """Open ``path`` for appending (created if missing), cutting it to ``truncate_to`` first.

        Raises:
            LedgerError: another writer holds the file's lock.
            OSError: the file cannot be opened.
        """
        self.path = os.fspath(path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            # One writer per ledger: a second run on the same file is refused, not interleaved.
            if fcntl is not None:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            raise LedgerError(self.path, "is in use by another run") from None
        if truncate_to is not None:
            # Cut a torn last line so the next record starts on a line of its own.
            os.ftruncate(self._fd, truncate_to)
        self._dirty = False
        self._wakeup = trio.Event()
        self.lines = 0

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record as one line (synchronously: it is on disk when this returns).

        Raises:
            OSError: the write failed (disk full, file gone): the caller must
                not count the episode as done.
        """
        # Strict JSON (no bare NaN/Infinity), as the JSON report writes it.
        text = json.dumps(strict_json_value(record), separators=(",", ":"), allow_nan=False)
        line = (text + "\n").encode("utf-8")
        written = os.write(self._fd, line)
        if written != len(line):
            raise OSError(f"short write to ledger {self.path} ({written} of {len(line)} bytes)")
        self.lines += 1
        if not self._dirty:
            self._dirty = True
            self._wakeup.set()

    def write_episode(
        self,
        ticket: Ticket,
        result: EpisodeResult,
        env_contract: Mapping[str, str] | None = None,
    ) -> None:
        """Append ``result`` as the finished episode of ``ticket`` (see :meth:`write`);
        ``env_contract`` names the env contract it ran against (env id, spaces digest)."""
        finished = time.time()
        episode = result.to_dict()
        if not math.isfinite(result.reward):
            episode["reward_raw"] = raw_float(result.reward)  # the reward itself becomes null
        self.write(
            {
                "type": "episode",
                "ticket": ticket.key,
                "route_id": ticket.route_id,
                "attempt": result.attempts,
                "started_at": finished - result.duration_s,
                "finished_at": finished,
                "episode": episode,
                **({"env_contract": dict(env_contract)} if env_contract else {}),
            }
        )

    def write_route_end(self, route_id: str, status: str, error: BaseException | None) -> None:
        """Append that route ``route_id`` stopped, with its status and error (see :meth:`write`)."""
        message = f"{type(error).__name__}: {error}" if error is not None else ""
        self.write({"type": "route", "route_id": route_id, "status": status, "error": message})

    def sync(self) -> None:
        """fsync now (blocking)."""
        self._dirty = False
        os.fsync(self._fd)

    async def sync_forever(self) -> None:
        """fsync within ``SYNC_INTERVAL`` of each write, until cancelled.

        Cancellation: an fsync already handed to a worker thread completes
        (Trio abandons nothing it cannot cancel); :meth:`close` syncs the rest.
        """
        while True:
            await self._wakeup.wait()
            self._wakeup = trio.Event()
            await trio.sleep(SYNC_INTERVAL)
            self._dirty = False
            await trio.to_thread.run_sync(os.fsync, self._fd)

    def close(self) -> None:
        """Final fsync and close (idempotent)."""
        if self._fd < 0:
            return
        try:
            os.fsync(self._fd)
        finally:
            os.close(self._fd)
            self._fd = -1
