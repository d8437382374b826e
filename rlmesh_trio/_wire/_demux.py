"""Join request-id demultiplexing: many requests in flight on one stream, answered by id.

Responses echo their request's ``request_id`` and may come out of order (lane
servers answer lanes concurrently; a shared model stream serves several routes).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Generic, Protocol, TypeVar

__all__ = ["JoinDemux", "Undecodable", "Waiter"]

log = logging.getLogger(__name__)

R = TypeVar("R")
T_contra = TypeVar("T_contra", contravariant=True)


class Waiter(Protocol[T_contra]):
    """Whoever waits for one response: told once, with the value or the error."""

    def resolve(self, value: T_contra) -> None: ...

    def fail(self, error: BaseException) -> None: ...


class Undecodable(Exception):
    """A response that does not parse: the stream cannot be trusted any more."""


class JoinDemux(Generic[R]):
    """Pending requests of one Join stream, keyed by request id.

    ``parse`` turns a message's bytes into the response envelope and
    ``request_id_of`` reads its id. A waiter gets ``(response, size in bytes)``.
    """

    __slots__ = ("_parse", "_pending", "_request_id_of", "waiting")

    def __init__(self, parse: Callable[[bytes], R], request_id_of: Callable[[R], str]) -> None:
        self._parse = parse
        self._request_id_of = request_id_of
        self._pending: dict[str, Waiter[tuple[R, int]]] = {}
        #: The same dict, read-only for callers: its truth says whether anyone waits
        #: (cheaper than ``len`` on the reader's path, asked after every read).
        self.waiting: Mapping[str, Waiter[tuple[R, int]]] = self._pending

    def __len__(self) -> int:
        return len(self._pending)

    def register(self, request_id: str, waiter: Waiter[tuple[R, int]]) -> None:
        """Expect a response for ``request_id``.

        Raises:
            ValueError: that id is already in flight.
        """
        if request_id in self._pending:
            raise ValueError(f"request id {request_id!r} is already in flight")
        self._pending[request_id] = waiter

    def forget(self, request_id: str) -> None:
        """Stop waiting for ``request_id`` (a late response is then dropped)."""
        self._pending.pop(request_id, None)

    def deliver(self, data: bytes) -> bool:
        """Hand one response message to its waiter. Returns whether anyone was waiting.

        Raises:
            Undecodable: the bytes do not parse as a response.
        """
        try:
            response = self._parse(data)
        except Exception as exc:
            raise Undecodable(f"undecodable Join response ({type(exc).__name__}: {exc})") from exc
        waiter = self._pending.pop(self._request_id_of(response), None)
        if waiter is None:
            log.debug("dropping a Join response for no waiting request")
            return False
        waiter.resolve((response, len(data)))
        return True

    def fail_all(self, error: BaseException) -> None:
        """Fail every waiter (the stream is gone); the demux is empty afterwards."""
        pending = dict(self._pending)
        self._pending.clear()
        for waiter in pending.values():
            waiter.fail(error)
