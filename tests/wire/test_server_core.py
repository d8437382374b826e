"""The server side of the wire core at the byte level (issue 22).

The client is a real ``ClientCore`` for ordinary traffic and hand-built frames
(hyperframe's public API) for what a hostile client sends; the assertions are
on the server core's events and on the frames it queues.
"""

from __future__ import annotations

import hpack
import hyperframe.frame
import pytest

from rlmesh_trio import _wire as wire
from rlmesh_trio._wire._h2server import PREFACE

from .test_wire_core import frames

PATH = "/rlmesh.env.v1.EnvService/Join"
CALM, FRAME_SIZE, FLOW, PROTOCOL = 0xB, 0x6, 0x3, 0x1


class Pair:
    """A client core and a server core wired together in memory."""

    def __init__(self, limits: wire.ServerLimits | None = None, **options: object) -> None:
        self.server = wire.ServerCore(limits or wire.ServerLimits(), **options)  # type: ignore[arg-type]
        self.server.initiate()
        self.client = wire.ClientCore()
        self.client.initiate()
        self.to_server()
        self.to_client()

    def to_server(self, data: bytes | None = None) -> list[wire.Event]:
        return self.server.receive_data(self.client.data_to_send() if data is None else data)

    def to_client(self) -> list[wire.Event]:
        return self.client.receive_data(self.server.data_to_send())

    def open(self) -> tuple[int, list[wire.Event]]:
        stream_id = self.client.open_stream(wire.request_headers(PATH, "127.0.0.1:1"))
        return stream_id, self.to_server()


def raw(frame: hyperframe.frame.Frame) -> bytes:
    return bytes(frame.serialize())


def goaway_code(data: bytes) -> int | None:
    found = [f for f in frames(data) if isinstance(f, hyperframe.frame.GoAwayFrame)]
    return found[-1].error_code if found else None


def started_server(limits: wire.ServerLimits | None = None) -> wire.ServerCore:
    """A server core past the handshake with a raw client (preface and empty SETTINGS)."""
    server = wire.ServerCore(limits or wire.ServerLimits())
    server.initiate()
    server.receive_data(PREFACE + raw(hyperframe.frame.SettingsFrame(0)))
    server.data_to_send()
    return server


def test_the_server_advertises_its_limits_in_its_first_settings() -> None:
    limits = wire.ServerLimits(max_concurrent_streams=7, max_header_list_size=4096)
    server = wire.ServerCore(limits)
    server.initiate()
    settings = [
        f for f in frames(server.data_to_send()) if isinstance(f, hyperframe.frame.SettingsFrame)
    ]
    first = settings[0].settings
    assert first[hyperframe.frame.SettingsFrame.MAX_CONCURRENT_STREAMS] == 7
    assert first[hyperframe.frame.SettingsFrame.MAX_HEADER_LIST_SIZE] == 4096
    assert first[hyperframe.frame.SettingsFrame.INITIAL_WINDOW_SIZE] == 16 * 1024 * 1024


def test_a_preface_written_at_accept_is_not_queued_again() -> None:
    limits = wire.ServerLimits(max_concurrent_streams=9)
    first = wire.ServerCore(limits)
    first.initiate()
    preface = first.data_to_send()
    again = wire.ServerCore(limits)
    again.initiate(preface)
    assert again.data_to_send() == b""
    # Only what was really written is left out: the rest still goes.
    part = wire.ServerCore(limits)
    part.initiate(preface[:10])
    assert part.data_to_send() == preface[10:]
    # The state machine is the one that sent them: the client's ACKs are expected.
    again.receive_data(PREFACE + raw(hyperframe.frame.SettingsFrame(0)))
    acks = raw(hyperframe.frame.SettingsFrame(0, flags=["ACK"]))
    again.receive_data(acks + acks)
    assert again.terminated is None


def test_a_call_goes_both_ways_headers_message_trailers() -> None:
    pair = Pair()
    stream_id, events = pair.open()
    (request,) = [e for e in events if isinstance(e, wire.RequestReceived)]
    assert dict(request.headers)[":path"] == PATH
    pair.client.send_message(stream_id, b"ping", end=True)
    events = pair.to_server()
    assert wire.MessageReceived(stream_id, b"ping") in events
    assert wire.RequestEnded(stream_id) in events
    pair.server.release(4 + 5)
    pair.server.send_headers(stream_id)
    pair.server.send_message(stream_id, b"pong")
    pair.server.finish(stream_id, wire.GrpcStatus.OK)
    replies = pair.to_client()
    assert wire.MessageReceived(stream_id, b"pong") in replies
    assert replies[-1] == wire.StreamEnded(stream_id, wire.GrpcStatus.OK, None)


def test_a_refusal_without_messages_is_trailers_only_with_an_encoded_message() -> None:
    pair = Pair()
    stream_id, _ = pair.open()
    pair.server.finish(stream_id, wire.GrpcStatus.UNAUTHENTICATED, "invalid env token 100%")
    (headers,) = [f for f in frames(pair.server.data_to_send()) if f.type == 0x1]
    assert "END_STREAM" in headers.flags


def test_an_oversized_frame_header_is_refused_before_its_payload() -> None:
    server = started_server()
    header = (2**24 - 1).to_bytes(3, "big") + b"\x00\x00" + (1).to_bytes(4, "big")
    with pytest.raises(wire.ProtocolFailure, match="over our"):
        server.receive_data(header)  # the header alone: nothing of the payload arrived
    assert goaway_code(server.data_to_send()) == FRAME_SIZE


def test_the_client_core_refuses_an_oversized_frame_header_too() -> None:
    pair = Pair()
    header = (1 << 23).to_bytes(3, "big") + b"\x00\x00" + (1).to_bytes(4, "big")
    with pytest.raises(wire.ProtocolFailure):
        pair.client.receive_data(header)
    assert goaway_code(pair.client.data_to_send()) == FRAME_SIZE


def test_an_oversized_message_prefix_is_refused_before_its_body() -> None:
    pair = Pair(max_message_bytes=4096)
    stream_id, _ = pair.open()
    data = hyperframe.frame.DataFrame(stream_id)
    data.data = b"\x00" + (2**31).to_bytes(4, "big") + b"x" * 100
    events = pair.to_server(raw(data))
    (refused,) = [e for e in events if isinstance(e, wire.MessageRefused)]
    assert refused.status is wire.GrpcStatus.RESOURCE_EXHAUSTED
    assert pair.server.held_bytes == 0  # nothing kept
    more = hyperframe.frame.DataFrame(stream_id)
    more.data = b"y" * 1000
    assert pair.to_server(raw(more)) == []  # the rest is dropped, not buffered


def test_messages_over_the_connection_budget_are_refused_and_release_gives_back() -> None:
    pair = Pair(wire.ServerLimits(connection_message_bytes=1000))
    stream_id, _ = pair.open()
    pair.client.send_message(stream_id, b"a" * 600)
    assert wire.MessageReceived(stream_id, b"a" * 600) in pair.to_server()
    pair.client.send_message(stream_id, b"b" * 600)
    (refused,) = [e for e in pair.to_server() if isinstance(e, wire.MessageRefused)]
    assert refused.status is wire.GrpcStatus.RESOURCE_EXHAUSTED
    other, _ = pair.open()
    pair.server.release(605)
    pair.client.send_message(other, b"c" * 600)
    assert wire.MessageReceived(other, b"c" * 600) in pair.to_server()


def test_the_server_budget_is_shared_by_connections() -> None:
    shared = wire.ServerLimits(server_message_bytes=1000)
    from rlmesh_trio._wire._limits import ByteBudget

    budget = ByteBudget(1000)
    one, two = Pair(shared, budget=budget), Pair(shared, budget=budget)
    a, _ = one.open()
    b, _ = two.open()
    one.client.send_message(a, b"a" * 600)
    assert any(isinstance(e, wire.MessageReceived) for e in one.to_server())
    two.client.send_message(b, b"b" * 600)
    assert any(isinstance(e, wire.MessageRefused) for e in two.to_server())
    one.server.dispose()
    assert budget.held == 0


def request(stream_id: int, *, end_stream: bool = False) -> bytes:
    """A client's HEADERS frame opening ``stream_id`` with a gRPC request."""
    block = hpack.Encoder().encode(wire.request_headers(PATH, "127.0.0.1:1"))
    flags = ["END_HEADERS", "END_STREAM"] if end_stream else ["END_HEADERS"]
    return raw(hyperframe.frame.HeadersFrame(stream_id, data=block, flags=flags))


def _flood(frame: hyperframe.frame.Frame, count: int, limits: wire.ServerLimits) -> int | None:
    server = started_server(limits)
    # Stream 1 opened first: a RST_STREAM on an idle stream is a PROTOCOL_ERROR of its own.
    data = request(1) + raw(frame) * count
    with pytest.raises(wire.ProtocolFailure):
        server.receive_data(data)
    return goaway_code(server.data_to_send())


@pytest.mark.parametrize(
    ("make", "limits"),
    [
        (lambda: hyperframe.frame.RstStreamFrame(1), wire.ServerLimits(reset_budget=20)),
        (lambda: hyperframe.frame.SettingsFrame(0), wire.ServerLimits(settings_budget=20)),
        (lambda: hyperframe.frame.PingFrame(0), wire.ServerLimits(ping_budget=20)),
        (lambda: _window_update(0, 1), wire.ServerLimits(window_update_budget=20)),
    ],
    ids=["rst", "settings", "ping", "window-update"],
)
def test_control_frame_floods_end_in_enhance_your_calm(make, limits) -> None:
    assert _flood(make(), 200, limits) == CALM


def _window_update(stream_id: int, increment: int) -> hyperframe.frame.WindowUpdateFrame:
    frame = hyperframe.frame.WindowUpdateFrame(stream_id)
    frame.window_increment = increment
    return frame


def test_an_empty_data_flood_ends_in_enhance_your_calm() -> None:
    pair = Pair(wire.ServerLimits(empty_data_budget=20))
    stream_id, _ = pair.open()
    with pytest.raises(wire.ProtocolFailure):
        pair.to_server(raw(hyperframe.frame.DataFrame(stream_id)) * 100)
    assert goaway_code(pair.server.data_to_send()) == CALM


def test_rapid_reset_ends_in_enhance_your_calm_after_the_budget() -> None:
    pair = Pair(wire.ServerLimits(reset_budget=50))
    with pytest.raises(wire.ProtocolFailure):
        for _ in range(200):
            stream_id = pair.client.open_stream(wire.request_headers(PATH, "127.0.0.1:1"))
            pair.client.reset_stream(stream_id)
            pair.to_server()
    assert goaway_code(pair.server.data_to_send()) == CALM
    assert pair.server.open_streams == 0


def test_a_continuation_flood_ends_before_the_header_block_grows() -> None:
    server = started_server(wire.ServerLimits(max_header_list_size=1024))
    headers = hyperframe.frame.HeadersFrame(1)
    headers.data = b"\x82"  # :method GET, indexed; no END_HEADERS
    continuation = hyperframe.frame.ContinuationFrame(1)
    continuation.data = b"\x00" * 1000
    with pytest.raises(wire.ProtocolFailure):
        server.receive_data(raw(headers) + raw(continuation) * 50)
    assert goaway_code(server.data_to_send()) == CALM


def test_a_connection_window_overflow_is_a_flow_control_error() -> None:
    server = started_server()
    with pytest.raises(wire.ProtocolFailure):
        server.receive_data(raw(_window_update(0, 2**31 - 1)))
    assert goaway_code(server.data_to_send()) == FLOW


def test_bytes_that_are_not_a_preface_end_in_a_protocol_error() -> None:
    server = wire.ServerCore()
    server.initiate()
    server.data_to_send()
    with pytest.raises(wire.ProtocolFailure):
        server.receive_data(b"GET / HTTP/1.1\r\n\r\n")
    assert goaway_code(server.data_to_send()) == PROTOCOL


def test_random_bytes_after_the_preface_end_in_a_goaway() -> None:
    server = started_server()
    with pytest.raises(wire.ProtocolFailure):
        server.receive_data(bytes(range(7, 250)) * 4)
    assert goaway_code(server.data_to_send()) is not None


def test_a_graceful_goaway_lets_the_calls_in_flight_finish() -> None:
    # RFC 9113 §6.8: after our GOAWAY the client's frames on the calls it let in are
    # still taken (h2's own GOAWAY would refuse them all as protocol errors).
    pair = Pair()
    stream_id, events = pair.open()
    assert [type(e) for e in events] == [wire.RequestReceived]
    pair.server.close()
    goaways = [
        f for f in frames(pair.server.data_to_send()) if isinstance(f, hyperframe.frame.GoAwayFrame)
    ]
    assert [(g.last_stream_id, g.error_code) for g in goaways] == [(stream_id, 0)]
    # The client still sends on its open call: a message, its END_STREAM, a PING.
    pair.client.send_message(stream_id, b"request", end=True)
    pair.client.ping(b"12345678")
    events = pair.to_server()
    assert [type(e) for e in events] == [wire.MessageReceived, wire.RequestEnded]
    # The call is answered as usual, after the GOAWAY.
    pair.server.finish(stream_id, wire.GrpcStatus.OK)
    answered = [e for e in pair.to_client() if not isinstance(e, wire.PingAcknowledged)]
    assert [type(e) for e in answered] == [wire.ResponseHeaders, wire.StreamEnded]
    assert answered[1].status is wire.GrpcStatus.OK  # type: ignore[attr-defined]


def test_a_stream_opened_after_a_graceful_goaway_is_refused() -> None:
    pair = Pair()
    first, _ = pair.open()
    pair.server.close()
    pair.server.data_to_send()
    later = raw(
        hyperframe.frame.HeadersFrame(
            first + 2,
            hpack.Encoder().encode(wire.request_headers(PATH, "127.0.0.1:1")),
            flags=["END_HEADERS"],
        )
    )
    assert pair.to_server(later) == []
    resets = [
        f
        for f in frames(pair.server.data_to_send())
        if isinstance(f, hyperframe.frame.RstStreamFrame)
    ]
    assert [(r.stream_id, r.error_code) for r in resets] == [(first + 2, 0x7)]  # REFUSED_STREAM
    # Its DATA is dropped quietly (the connection window credited), not a protocol error.
    data = raw(hyperframe.frame.DataFrame(first + 2, b"\x00\x00\x00\x00\x01x"))
    assert pair.to_server(data) == []
