"""The hostile clients of the reliability matrix, one function per attack.

Each attack takes the attacked server's port, the gRPC path of a unary method
it serves and a :class:`Halt`, and returns an :class:`Outcome` summing up the
server's reactions on every connection it opened. Every attack is bounded in
count (its budget constant) and in time; ``halt.hard`` (set by the harness when
the server's RSS passes its cap, or at the time cap) stops any of them at once,
and attacks that would be over in a moment repeat on fresh connections until
``halt.soft`` (the legitimate client is done) so they are still under way while
the legitimate client runs. Loopback only.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import attrs
from hyperframe.frame import PingFrame, SettingsFrame, WindowUpdateFrame

from ._streams import send_messages
from ._wire import (
    INITIAL_WINDOW,
    Conn,
    await_reactions,
    continuation,
    data,
    grpc_prefix,
    grpc_request_block,
    headers,
    raw_header,
    rst,
    window_update,
)

RAPID_RESETS = 100_000
RESET_BATCH = 100
SETTINGS_FRAMES = 20_000
PING_FRAMES = 20_000
EMPTY_DATA_FRAMES = 20_000
FLOOD_BATCH = 500
PREFIX_CLAIM = 2 * 1024**3
PREFIX_SENT_BUDGET = 300 * 1024**2
BIG_STREAMS = 8
BIG_MESSAGE = 64 * 1024**2
HUGE_FRAME_CONNECTIONS = 32
HUGE_FRAME_LENGTH = (1 << 24) - 1  # the most a frame header can claim: 16 MiB - 1
RANDOM_CONNECTIONS = 45
RANDOM_BYTES = 4096
CONTINUATION_BUDGET = 64 * 1024**2
HEADER_CHUNK = 16_000  # fits the default 16 KiB SETTINGS_MAX_FRAME_SIZE
OVERSIZED_HEADER = 1024**2
BOMB_VALUE = 4000  # one dynamic-table entry (4038 bytes of the default 4096)
BOMB_REFERENCES = 16_000  # each one byte on the wire, 4 KB decoded: 64 MB per block
ONE_SHOT_ROUNDS = 200
#: What the DATA sent on a stream the server reset adds up to: our servers' whole
#: stream and connection windows (16 MiB), all a well-behaved peer may send before
#: it sees the reset; the connection window must come back for the next call.
AFTER_RESET_BYTES = 16 * 1024**2
DATA_CHUNK = 16_384  # the default SETTINGS_MAX_FRAME_SIZE
WINDOW_WAIT = 2.0
REACTION_WAIT = 1.0
#: The attacker yields the CPU to the server and the legitimate client: on one machine
#: it stands in for a peer elsewhere, whose sending costs the server nothing but the bytes.
ATTACKER_NICENESS = 10


@attrs.define
class Halt:
    """When to stop (``soft``: the legitimate client is done; ``hard``: now) and the
    attack's signal that it is under way. Events of ``threading`` or ``multiprocessing``."""

    soft: Any = attrs.Factory(threading.Event)
    hard: Any = attrs.Factory(threading.Event)
    started: Any = attrs.Factory(threading.Event)


@attrs.define
class Outcome:
    """The server's reactions over every connection of one attack."""

    connections: int = 0
    goaways: list[int] = attrs.Factory(list)
    rst_codes: list[int] = attrs.Factory(list)
    statuses: list[int] = attrs.Factory(list)
    closed: int = 0
    stalled: int = 0
    unreacted: int = 0
    sent: int = 0
    units: int = 0  # resets, frames, bytes: what the attack counts
    extra: dict[str, float] = attrs.Factory(dict)

    def absorb(self, conn: Conn) -> None:
        self.connections += 1
        if conn.goaway is not None:
            self.goaways.append(conn.goaway)
        self.rst_codes += conn.rst_codes
        self.statuses += conn.statuses
        self.closed += conn.closed
        self.stalled += conn.stalled
        self.unreacted += not conn.reacted
        self.sent += conn.sent
        conn.close()


Attack = Callable[[int, str, Halt], Outcome]


def rapid_reset(port: int, path: str, halt: Halt) -> Outcome:
    """Open and reset streams, ``RESET_BATCH`` per write, ``RAPID_RESETS`` at least (and on
    until the legitimate client is done), reconnecting whenever the server ends a connection."""
    out, block = Outcome(), grpc_request_block(path)

    def more() -> bool:
        return (out.units < RAPID_RESETS or not halt.soft.is_set()) and not halt.hard.is_set()

    while more():
        conn, stream = Conn.open(port), 1
        halt.started.set()
        while more() and not conn.ended:
            batch = b"".join(
                headers(s, block) + rst(s) for s in range(stream, stream + 2 * RESET_BATCH, 2)
            )
            if conn.send(batch):
                out.units += RESET_BATCH
                stream += 2 * RESET_BATCH
            conn.pump()
        conn.await_reaction(REACTION_WAIT)
        out.absorb(conn)
    return out


def _flood(port: int, halt: Halt, opener: bytes, frame: bytes, count: int) -> Outcome:
    """``count`` copies of ``frame`` on one connection, again on fresh ones until the
    legitimate client is done."""
    return _rounds(halt, lambda: _flood_once(port, halt, opener, frame, count))


def _flood_once(port: int, halt: Halt, opener: bytes, frame: bytes, count: int) -> Outcome:
    out = Outcome()
    conn = Conn.open(port)
    conn.send(opener)
    halt.started.set()
    batch = frame * FLOOD_BATCH
    while out.units < count and not conn.ended and not halt.hard.is_set():
        if conn.send(batch):
            out.units += FLOOD_BATCH
        conn.pump()
    conn.await_reaction(REACTION_WAIT)
    out.absorb(conn)
    return out


def settings_flood(port: int, path: str, halt: Halt) -> Outcome:
    return _flood(port, halt, b"", SettingsFrame(0).serialize(), SETTINGS_FRAMES)


def ping_flood(port: int, path: str, halt: Halt) -> Outcome:
    ping = PingFrame(0, opaque_data=b"hostile!").serialize()
    return _flood(port, halt, b"", ping, PING_FRAMES)


def empty_data_flood(port: int, path: str, halt: Halt) -> Outcome:
    opener = headers(1, grpc_request_block(path))
    return _flood(port, halt, opener, data(1), EMPTY_DATA_FRAMES)


def prefix_lie(port: int, path: str, halt: Halt) -> Outcome:
    """A message prefix claiming 2 GiB, then up to 300 MiB of it, as flow control allows."""
    prefix = grpc_prefix(PREFIX_CLAIM)
    report = send_messages(port, path, [prefix], PREFIX_SENT_BUDGET, halt)
    return report.outcome(Outcome())


def big_streams(port: int, path: str, halt: Halt) -> Outcome:
    """``BIG_STREAMS`` streams on one connection, each a whole 64 MiB message, sent fast."""
    prefix = grpc_prefix(BIG_MESSAGE)
    report = send_messages(port, path, [prefix] * BIG_STREAMS, BIG_MESSAGE, halt)
    return report.outcome(Outcome())


def huge_frame_header(port: int, path: str, halt: Halt) -> Outcome:
    """On each of 32 connections a DATA frame header claiming 16 MiB; then, unless the server
    reacted to the header alone, the payload it announced, 1 MiB at a time."""
    out, conns = Outcome(), []
    block = grpc_request_block(path)
    for _ in range(HUGE_FRAME_CONNECTIONS):
        conn = Conn.open(port)
        conn.send(headers(1, block) + raw_header(HUGE_FRAME_LENGTH, 0x0, 0, 1))
        conns.append(conn)
        halt.started.set()
    await_reactions(conns, REACTION_WAIT)
    out.extra["reacted_at_header"] = sum(conn.reacted for conn in conns)
    chunk = bytes(1024**2)
    for conn in conns:
        sent = 0
        while sent < HUGE_FRAME_LENGTH and not conn.ended and not halt.hard.is_set():
            piece = chunk[: HUGE_FRAME_LENGTH - sent]
            sent += len(piece) if conn.send(piece) else 0
            conn.pump()
    await_reactions(conns, REACTION_WAIT)
    for conn in conns:
        out.absorb(conn)
    return out


def random_bytes(port: int, path: str, halt: Halt) -> Outcome:
    """45 connections: the preface and SETTINGS, then 4 KiB of (seeded) random bytes."""
    out, conns = Outcome(), []
    for seed in range(RANDOM_CONNECTIONS):
        conn = Conn.open(port)
        conn.send(random.Random(seed).randbytes(RANDOM_BYTES))
        conns.append(conn)
        halt.started.set()
    await_reactions(conns, REACTION_WAIT)
    for conn in conns:
        out.absorb(conn)
    return out


def _header_stream(port: int, halt: Halt, first: bytes, rest: bytes, budget: int) -> Outcome:
    """HEADERS (without END_HEADERS) carrying ``first``, then CONTINUATION frames carrying
    ``rest`` until ``budget`` bytes went or the server reacted."""
    out = Outcome()
    conn = Conn.open(port)
    conn.send(headers(1, first, end_headers=False))
    halt.started.set()
    frame = continuation(1, rest)
    while out.units < budget and not conn.reacted and not halt.hard.is_set():
        if conn.send(frame):
            out.units += len(rest)
        conn.pump()
    conn.send(continuation(1, b"", end_headers=True))
    conn.await_reaction(REACTION_WAIT)
    out.absorb(conn)
    return out


def _literal(name: bytes, value_length: int, *, indexed: bool = False) -> bytes:
    """An HPACK literal header (new name, no Huffman) with a value of ``value_length``
    bytes: its representation's bytes before the value, the value."""
    kind = b"\x40" if indexed else b"\x00"
    return kind + _hpack_int(len(name), 7) + name + _hpack_int(value_length, 7)


def _hpack_int(value: int, prefix_bits: int) -> bytes:
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([value])
    out, value = bytearray([limit]), value - limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    return bytes([*out, value])


def continuation_flood(port: int, path: str, halt: Halt) -> Outcome:
    """One header block that never ends: 64 MiB of CONTINUATION frames, each a whole
    literal header of 16 KB."""
    pad = HEADER_CHUNK - 16
    header = _literal(b"x-pad", pad) + b"p" * pad
    return _header_stream(port, halt, grpc_request_block(path), header, CONTINUATION_BUDGET)


def oversized_header(port: int, path: str, halt: Halt) -> Outcome:
    """One header of 1 MiB, spread over CONTINUATION frames, on fresh connections."""
    head = grpc_request_block(path) + _literal(b"x-big", OVERSIZED_HEADER)
    return _rounds(
        halt, lambda: _header_stream(port, halt, head, b"b" * HEADER_CHUNK, OVERSIZED_HEADER)
    )


def hpack_bomb(port: int, path: str, halt: Halt) -> Outcome:
    """One 4 KB header inserted into the dynamic table, then 16000 one-byte references to
    it (64 MB decoded from 16 KB sent), on fresh connections."""
    insert = _literal(b"x-bomb", BOMB_VALUE, indexed=True) + b"B" * BOMB_VALUE
    references = b"\xbe" * BOMB_REFERENCES  # indexed field 62: the newest dynamic entry
    head = grpc_request_block(path) + insert
    return _rounds(halt, lambda: _header_stream(port, halt, head, references, BOMB_REFERENCES))


def invalid_hpack(port: int, path: str, halt: Halt) -> Outcome:
    """A header block that indexes entry 0 (never valid), on fresh connections."""
    return _rounds(halt, lambda: _one_shot(port, halt, headers(1, b"\x80\xff\xff\xff\x0f")))


def window_overflow(port: int, path: str, halt: Halt) -> Outcome:
    """Two connection-level WINDOW_UPDATEs of 2^31-1: the window passes 2^31-1."""
    update = WindowUpdateFrame(0, window_increment=2**31 - 1).serialize()
    return _rounds(halt, lambda: _one_shot(port, halt, update * 2))


def _state_attack(port: int, path: str, halt: Halt, *frames: bytes) -> Outcome:
    """``frames`` in one write after a call's HEADERS on stream 1 (a gRPC request
    for ``path``), on fresh connections: a frame its stream's state forbids (RFC 9113
    §5.1), which skips h2's state machine on our servers (DATA, WINDOW_UPDATE)."""
    opener = headers(1, grpc_request_block(path))
    return _rounds(halt, lambda: _one_shot(port, halt, opener + b"".join(frames)))


def data_on_stream_0(port: int, path: str, halt: Halt) -> Outcome:
    """DATA on stream 0 (§6.1: PROTOCOL_ERROR)."""
    message = grpc_prefix(0)
    return _state_attack(port, path, halt, raw_header(len(message), 0x0, 0, 0) + message)


def data_on_idle_stream(port: int, path: str, halt: Halt) -> Outcome:
    """DATA on stream 3, never opened (§5.1 idle: PROTOCOL_ERROR)."""
    return _state_attack(port, path, halt, data(3, grpc_prefix(0)))


def data_after_end_stream(port: int, path: str, halt: Halt) -> Outcome:
    """A request ended (END_STREAM), then more DATA on its stream (§5.1: STREAM_CLOSED)."""
    message = grpc_prefix(0)
    ended = data(1, message, end_stream=True)
    return _state_attack(port, path, halt, ended, data(1, message))


def data_after_rst_stream(port: int, path: str, halt: Halt) -> Outcome:
    """A stream reset by the client (RST_STREAM), then DATA on it (§5.1: STREAM_CLOSED)."""
    return _state_attack(port, path, halt, rst(1), data(1, grpc_prefix(0)))


def window_update_idle(port: int, path: str, halt: Halt) -> Outcome:
    """WINDOW_UPDATE on stream 3, never opened (§5.1 idle: PROTOCOL_ERROR)."""
    return _state_attack(port, path, halt, window_update(3, 1000))


def rst_stream_idle(port: int, path: str, halt: Halt) -> Outcome:
    """RST_STREAM on stream 3, never opened (§6.4: PROTOCOL_ERROR). After a stream is
    open: h2 refuses a RST_STREAM before any HEADERS itself, but lets this one pass."""
    return _state_attack(port, path, halt, rst(3))


def data_after_server_reset(port: int, path: str, halt: Halt) -> Outcome:
    """Not an attack: a stream the server resets (a WINDOW_UPDATE pushes its window past
    2^31-1) and a call opened beside it on stream 3; DATA on the reset stream as the
    server's windows allow (16 MiB, as if sent before the reset arrived), then the
    call's request. §5.1: the server drops that DATA but counts it toward the
    connection window and gives it back, so the request can go and is answered.
    ``extra["window_stalls"]``: connections where the window never came back."""
    return _rounds(halt, lambda: _after_reset_once(port, path, halt))


def _after_reset_once(port: int, path: str, halt: Halt) -> Outcome:
    out, conn = Outcome(), Conn.open(port)
    block = grpc_request_block(path)
    # The call on stream 3 is opened first: the connection has a call the whole time
    # (never idle, however slow the 16 MiB are on a loaded machine).
    conn.send(headers(1, block) + window_update(1, 2**31 - 1) + headers(3, block))
    halt.started.set()
    chunk, sent = data(1, bytes(DATA_CHUNK)), 0

    def room(size: int) -> bool:
        """Wait (up to WINDOW_WAIT) until the connection window takes ``size`` bytes."""
        deadline = time.monotonic() + WINDOW_WAIT
        while INITIAL_WINDOW + conn.credit - sent < size:
            if conn.ended or halt.hard.is_set() or time.monotonic() > deadline:
                return False
            conn.pump(0.05)
        return True

    while sent < AFTER_RESET_BYTES and room(DATA_CHUNK) and conn.send(chunk):
        sent += DATA_CHUNK
        conn.pump()
    call = data(3, grpc_prefix(0), end_stream=True)
    if sent >= AFTER_RESET_BYTES and room(len(grpc_prefix(0))) and conn.send(call):
        deadline = time.monotonic() + REACTION_WAIT
        while not conn.statuses and not conn.ended and time.monotonic() < deadline:
            conn.pump(deadline - time.monotonic())
    else:
        out.extra["window_stalls"] = 1
    out.units = sent
    out.absorb(conn)
    return out


def _one_shot(port: int, halt: Halt, payload: bytes) -> Outcome:
    out, conn = Outcome(), Conn.open(port)
    conn.send(payload)
    halt.started.set()
    conn.await_reaction(REACTION_WAIT)
    out.absorb(conn)
    return out


def _rounds(halt: Halt, one: Callable[[], Outcome]) -> Outcome:
    """Repeat a short attack on fresh connections until the legitimate client is done."""
    total = Outcome()
    for _ in range(ONE_SHOT_ROUNDS):
        part = one()
        for field in attrs.fields(Outcome):
            if field.name != "extra":
                setattr(total, field.name, getattr(total, field.name) + getattr(part, field.name))
        for key, value in part.extra.items():  # counts: summed over the rounds
            total.extra[key] = total.extra.get(key, 0) + value
        if halt.soft.is_set() or halt.hard.is_set():
            break
        time.sleep(0.01)  # a steady stream of bad connections, not a connect storm
    return total


IDLE_CONNECTIONS = 900


def idle_connections(port: int, close_within: float, halt: Halt) -> Outcome:
    """900 connections, half of them silent (no preface), half idle after the preface;
    ``extra``: how long the connects took (all, and the slowest: a SYN dropped for a full
    listen backlog costs a 1 s retransmission) and how many the server closed in time."""
    started, conns, slowest = time.monotonic(), [], 0.0
    for i in range(IDLE_CONNECTIONS):
        before = time.monotonic()
        conns.append(Conn.open(port, preface=bool(i % 2)))
        slowest = max(slowest, time.monotonic() - before)
    out = Outcome(extra={"connect_s": time.monotonic() - started, "slowest_connect_s": slowest})
    halt.started.set()
    deadline = started + close_within
    while time.monotonic() < deadline and not halt.hard.is_set():
        for conn in conns:
            if not conn.closed:
                conn.pump()
        if all(conn.closed for conn in conns):
            break
        time.sleep(0.05)
    out.extra["closed_in_time"] = sum(conn.closed for conn in conns)
    for conn in conns:
        out.absorb(conn)
    return out


def run_in_child(attack: Callable[[Halt], Outcome], halt: Halt, results: Any) -> None:
    """Entry point of the attacker process: run ``attack``, send back its outcome (or the
    error it raised) on the ``results`` pipe end. The attacker is a process of its own so
    that it does not share an interpreter lock with the legitimate client."""
    os.nice(ATTACKER_NICENESS)
    try:
        results.send(("outcome", attack(halt)))
    except Exception as exc:
        results.send(("error", f"attack raised {type(exc).__name__}: {exc}"))
    finally:
        halt.started.set()
        results.close()
