"""RFC 9113's stream states for the frames the wire core handles itself (issue 34).

DATA (without END_STREAM) and WINDOW_UPDATE skip h2's state machine; these tests
hold the cores to §5.1's table for them, on the server core and the client core:
the GOAWAY each queues (its code and last-stream-id), or that a frame the RFC
allows is taken quietly with its flow-control credit given back. The frames are
hand-built with hyperframe; each DATA frame is fed alone (the cores' inline fast
path) and behind a PING (the frame cutter), which must agree.
"""

from __future__ import annotations

import h2.errors
import hyperframe.frame
import pytest

from rlmesh_trio import _wire as wire
from rlmesh_trio._wire import _h2base, _streams
from rlmesh_trio._wire._h2server import PREFACE

from .test_server_core import PATH, raw, request, started_server
from .test_wire_core import frames

PROTOCOL = h2.errors.ErrorCodes.PROTOCOL_ERROR
STREAM_CLOSED = h2.errors.ErrorCodes.STREAM_CLOSED
FLOW = h2.errors.ErrorCodes.FLOW_CONTROL_ERROR
PAYLOAD = b"\x00\x00\x00\x00\x01x"  # one whole gRPC message of one byte
PING = raw(hyperframe.frame.PingFrame(0, opaque_data=b"12345678"))
#: How a DATA frame reaches the core: alone in a read (the inline fast path), or
#: after another frame (the frame cutter).
PATHS = pytest.mark.parametrize("behind", [b"", PING], ids=["alone", "cut"])


def _frame(kind: int, flags: int, stream_id: int, payload: bytes) -> bytes:
    """A frame by hand (hyperframe refuses to build DATA or RST_STREAM on stream 0)."""
    head = len(payload).to_bytes(3, "big") + bytes([kind, flags])
    return head + stream_id.to_bytes(4, "big") + payload


def data(stream_id: int, payload: bytes = PAYLOAD, *, end_stream: bool = False) -> bytes:
    return _frame(0x0, 0x1 if end_stream else 0x0, stream_id, payload)


def window_update(stream_id: int, increment: int = 1000) -> bytes:
    return _frame(0x8, 0x0, stream_id, increment.to_bytes(4, "big"))


def rst(stream_id: int, code: int = h2.errors.ErrorCodes.CANCEL) -> bytes:
    return _frame(0x3, 0x0, stream_id, code.to_bytes(4, "big"))


def goaway(queued: bytes) -> tuple[int, int] | None:
    """The (error code, last-stream-id) of the last GOAWAY in ``queued``, if any."""
    found = [f for f in frames(queued) if isinstance(f, hyperframe.frame.GoAwayFrame)]
    return (found[-1].error_code, found[-1].last_stream_id) if found else None


def refused(core: wire.ServerCore | wire.ClientCore, read: bytes) -> tuple[int, int] | None:
    """Feed ``read``; the core must give up on the connection: its GOAWAY."""
    core.data_to_send()
    with pytest.raises(wire.ProtocolFailure):
        core.receive_data(read)
    return goaway(core.data_to_send())


def connection_credit(queued: bytes) -> int:
    return sum(
        f.window_increment
        for f in frames(queued)
        if isinstance(f, hyperframe.frame.WindowUpdateFrame) and f.stream_id == 0
    )


def kinds(queued: bytes) -> set[str]:
    return {type(f).__name__ for f in frames(queued)}


#: Enough 16 KiB DATA frames to pass a quarter of the 16 MiB window: the core must
#: credit the connection window back for them even though it drops them.
QUARTER = _h2base.WINDOW // 4
FULL_FRAME = bytes(16_384)


def _flow(core: wire.ServerCore | wire.ClientCore, stream_id: int) -> bytes:
    """Send a quarter window of DATA on ``stream_id``; everything the core queued."""
    core.data_to_send()
    for _ in range(QUARTER // len(FULL_FRAME) + 1):
        assert core.receive_data(data(stream_id, FULL_FRAME)) == []
    return core.data_to_send()


# ---- the server core ------------------------------------------------------------


def server_with(*reads: bytes) -> wire.ServerCore:
    server = started_server()
    for read in reads:
        server.receive_data(read)
    server.data_to_send()
    return server


@PATHS
def test_server_data_on_stream_0_is_a_protocol_error(behind: bytes) -> None:
    assert refused(server_with(request(1)), behind + data(0)) == (PROTOCOL, 1)


@PATHS
@pytest.mark.parametrize("stream_id", [3, 2, 4], ids=["odd-above", "even", "even-above"])
def test_server_data_on_an_idle_stream_is_a_protocol_error(behind: bytes, stream_id: int) -> None:
    assert refused(server_with(request(1)), behind + data(stream_id)) == (PROTOCOL, 1)


def test_server_data_on_a_stream_never_opened_by_anyone_is_a_protocol_error() -> None:
    assert refused(server_with(), data(1)) == (PROTOCOL, 0)


def test_server_data_ending_an_idle_stream_is_h2s_protocol_error_too() -> None:
    assert refused(server_with(request(1)), data(3, end_stream=True)) == (PROTOCOL, 1)


@PATHS
def test_server_data_after_the_clients_end_stream_is_stream_closed(behind: bytes) -> None:
    # half-closed (remote): the client itself ended the stream before this frame
    server = server_with(request(1, end_stream=True))
    assert server.open_streams == 1
    assert refused(server, behind + data(1)) == (STREAM_CLOSED, 1)


def test_server_data_ending_a_half_closed_remote_stream_is_h2s_stream_error() -> None:
    # The END_STREAM-carrying DATA goes through h2: a stream error there (RST_STREAM), also
    # what §5.1 asks; the call learns of it.
    server = server_with(request(1, end_stream=True))
    events = server.receive_data(data(1, end_stream=True))
    assert [type(e) for e in events] == [wire.StreamReset] and server.open_streams == 0
    queued = frames(server.data_to_send())
    assert [(f.stream_id, f.error_code) for f in queued] == [(1, STREAM_CLOSED)]


@PATHS
def test_server_data_on_a_stream_closed_by_both_ends_is_stream_closed(behind: bytes) -> None:
    server = server_with(request(1, end_stream=True))
    server.finish(1, wire.GrpcStatus.OK)
    assert server.open_streams == 0
    assert refused(server, behind + data(1)) == (STREAM_CLOSED, 1)


@PATHS
def test_server_data_after_the_clients_reset_is_stream_closed(behind: bytes) -> None:
    server = server_with(request(1), rst(1))
    assert server.open_streams == 0
    assert refused(server, behind + data(1)) == (STREAM_CLOSED, 1)


@PATHS
def test_server_data_on_a_stream_skipped_by_a_higher_one_is_stream_closed(behind: bytes) -> None:
    # §5.1.1: opening stream 3 closes the idle stream 1 implicitly
    assert refused(server_with(request(3)), behind + data(1)) == (STREAM_CLOSED, 3)


@PATHS
def test_server_data_after_its_own_reset_is_dropped_and_credited(behind: bytes) -> None:
    server = server_with(request(1), data(1, b"\x00\x00\x00\x00\x09"))  # a message begun
    server.reset_stream(1)
    assert server.open_streams == 0
    server.data_to_send()
    assert server.receive_data(behind + data(1)) == []
    queued = server.data_to_send()
    assert goaway(queued) is None and "RstStreamFrame" not in kinds(queued)
    queued = _flow(server, 1)
    assert goaway(queued) is None
    assert connection_credit(queued) >= QUARTER  # counted toward the window, given back


def test_server_data_after_its_trailers_to_a_client_still_sending_is_dropped() -> None:
    # half-closed (local): the client may go on sending until it sees the trailers
    server = server_with(request(1))
    server.finish(1, wire.GrpcStatus.UNIMPLEMENTED, "no such method")
    assert goaway(_flow(server, 1)) is None
    events = server.receive_data(data(1, end_stream=True))  # the client ends its side
    assert not any(isinstance(e, wire.MessageReceived) for e in events)
    assert goaway(server.data_to_send()) is None
    assert refused(server, data(1)) == (STREAM_CLOSED, 1)  # and now it is closed


def test_server_data_after_its_trailers_and_the_clients_reset_is_stream_closed() -> None:
    server = server_with(request(1))
    server.finish(1, wire.GrpcStatus.OK)
    server.receive_data(rst(1))
    assert refused(server, data(1)) == (STREAM_CLOSED, 1)


def test_server_forgets_its_reset_streams_past_the_bound(monkeypatch) -> None:
    monkeypatch.setattr(_streams, "QUIET_STREAMS", 2)
    server = server_with(request(1), request(3), request(5))
    for stream_id in (1, 3, 5):
        server.reset_stream(stream_id)
    assert server.receive_data(data(5) + data(3)) == []
    assert goaway(server.data_to_send()) is None
    assert refused(server, data(1)) == (STREAM_CLOSED, 5)  # §5.1: the period may be limited


def test_server_data_inside_a_header_block_is_a_protocol_error() -> None:
    server = server_with(request(1))
    opening = hyperframe.frame.HeadersFrame(3, data=b"\x83")  # no END_HEADERS
    assert refused(server, raw(opening) + data(1)) == (PROTOCOL, 1)
    server = server_with(request(1))
    assert refused(server, raw(opening) + window_update(1)) == (PROTOCOL, 1)


def test_server_data_still_flows_on_an_open_stream_and_a_half_closed_local_one() -> None:
    server = server_with(request(1), request(3))
    events = server.receive_data(data(1)) + server.receive_data(PING + data(3))
    assert [e.stream_id for e in events if isinstance(e, wire.MessageReceived)] == [1, 3]
    assert goaway(server.data_to_send()) is None


@pytest.mark.parametrize("stream_id", [3, 2], ids=["odd-above", "even"])
def test_server_window_update_on_an_idle_stream_is_a_protocol_error(stream_id: int) -> None:
    assert refused(server_with(request(1)), window_update(stream_id)) == (PROTOCOL, 1)


def test_server_window_update_on_a_closed_or_half_closed_stream_is_taken() -> None:
    server = server_with(request(1, end_stream=True), request(3))
    server.finish(1, wire.GrpcStatus.OK)
    server.receive_data(rst(3))
    server.data_to_send()
    assert server.receive_data(window_update(1) + window_update(3)) == []
    assert server.data_to_send() == b""
    server = server_with(request(1, end_stream=True))  # half-closed (remote)
    assert server.receive_data(window_update(1)) == []
    assert server.data_to_send() == b""


def test_server_a_zero_stream_increment_resets_the_stream_protocol_error() -> None:
    server = server_with(request(1), request(3))
    (reset,) = server.receive_data(window_update(1, 0))  # told to the call's handler
    assert isinstance(reset, wire.StreamReset) and reset.error_code == PROTOCOL
    queued = frames(server.data_to_send())
    assert [(f.stream_id, f.error_code) for f in queued] == [(1, PROTOCOL)]
    assert server.open_streams == 1  # a stream error: the connection goes on
    assert server.receive_data(data(3))  # and the stream's DATA in flight is dropped
    assert server.receive_data(data(1)) == []


def test_server_a_stream_window_overflow_resets_the_stream_flow_control_error() -> None:
    server = server_with(request(1))
    (reset,) = server.receive_data(window_update(1, 2**31 - 1))
    assert isinstance(reset, wire.StreamReset) and reset.error_code == FLOW
    queued = frames(server.data_to_send())
    assert [(f.stream_id, f.error_code) for f in queued] == [(1, FLOW)]


@pytest.mark.parametrize("stream_id", [3, 2, 0], ids=["odd-above", "even", "zero"])
def test_server_rst_stream_on_an_idle_stream_is_a_protocol_error(stream_id: int) -> None:
    # RFC 9113 §6.4; h2 itself lets it pass
    assert refused(server_with(request(1)), rst(stream_id)) == (PROTOCOL, 1)


def test_server_a_stream_opened_and_reset_in_one_read_is_no_idle_reset() -> None:
    server = server_with()
    events = server.receive_data(request(1) + rst(1) + request(3) + rst(3))
    assert sum(isinstance(e, wire.StreamReset) for e in events) == 2
    assert goaway(server.data_to_send()) is None


# ---- the client core ------------------------------------------------------------

RESPONSE = raw(hyperframe.frame.HeadersFrame(1, data=b"\x88", flags=["END_HEADERS"]))
#: grpc-status 0, as a literal header without indexing (the trailers, ending the stream)
TRAILERS = raw(
    hyperframe.frame.HeadersFrame(
        1, data=b"\x00\x0bgrpc-status\x010", flags=["END_HEADERS", "END_STREAM"]
    )
)


def client_with(*reads: bytes, streams: int = 1) -> wire.ClientCore:
    """A client core past the server's SETTINGS with ``streams`` calls open (1, 3, ...)."""
    client = wire.ClientCore()
    client.initiate()
    client.receive_data(raw(hyperframe.frame.SettingsFrame(0)))
    for _ in range(streams):
        client.open_stream(wire.request_headers(PATH, "127.0.0.1:1"))
    for read in reads:
        client.receive_data(read)
    client.data_to_send()
    return client


def test_the_client_asks_for_no_server_push() -> None:
    client = wire.ClientCore()
    client.initiate()
    sent = client.data_to_send()
    assert sent.startswith(PREFACE)
    settings = [
        f for f in frames(sent[len(PREFACE) :]) if isinstance(f, hyperframe.frame.SettingsFrame)
    ]
    assert settings[-1].settings[hyperframe.frame.SettingsFrame.ENABLE_PUSH] == 0


@PATHS
def test_client_data_on_stream_0_is_a_protocol_error(behind: bytes) -> None:
    assert refused(client_with(RESPONSE), behind + data(0)) == (PROTOCOL, 0)


@PATHS
@pytest.mark.parametrize("stream_id", [3, 2], ids=["odd-above", "even"])
def test_client_data_on_an_idle_stream_is_a_protocol_error(behind: bytes, stream_id: int) -> None:
    # an even id: the server would open it, and it opens none (no push)
    assert refused(client_with(RESPONSE), behind + data(stream_id)) == (PROTOCOL, 0)


@PATHS
def test_client_data_before_the_response_headers_is_a_protocol_error(behind: bytes) -> None:
    assert refused(client_with(), behind + data(1)) == (PROTOCOL, 0)


@PATHS
def test_client_data_after_the_servers_trailers_is_stream_closed(behind: bytes) -> None:
    client = client_with(RESPONSE, TRAILERS)
    assert client.open_streams == 0
    assert refused(client, behind + data(1)) == (STREAM_CLOSED, 0)


@PATHS
def test_client_data_after_the_servers_reset_is_stream_closed(behind: bytes) -> None:
    client = client_with(RESPONSE, rst(1))
    assert refused(client, behind + data(1)) == (STREAM_CLOSED, 0)


@PATHS
def test_client_data_after_its_own_reset_is_dropped_and_credited(behind: bytes) -> None:
    client = client_with(RESPONSE)
    client.reset_stream(1)
    client.data_to_send()
    assert client.receive_data(behind + data(1)) == []
    queued = client.data_to_send()
    assert goaway(queued) is None and "RstStreamFrame" not in kinds(queued)
    queued = _flow(client, 1)
    assert goaway(queued) is None and connection_credit(queued) >= QUARTER


def test_client_data_inside_a_header_block_is_a_protocol_error() -> None:
    opening = hyperframe.frame.HeadersFrame(1, data=b"\x88")  # no END_HEADERS
    client = client_with()
    client.receive_data(raw(opening))
    assert refused(client, data(1)) == (PROTOCOL, 0)  # alone: the inline path
    client = client_with()
    assert refused(client, raw(opening) + window_update(1)) == (PROTOCOL, 0)


@pytest.mark.parametrize("stream_id", [3, 2], ids=["odd-above", "even"])
def test_client_window_update_on_an_idle_stream_is_a_protocol_error(stream_id: int) -> None:
    assert refused(client_with(RESPONSE), window_update(stream_id)) == (PROTOCOL, 0)


def test_client_window_update_on_a_closed_stream_is_taken() -> None:
    client = client_with(RESPONSE, TRAILERS)
    assert client.receive_data(window_update(1)) == []
    assert client.data_to_send() == b""


@pytest.mark.parametrize("stream_id", [3, 2], ids=["odd-above", "even"])
def test_client_rst_stream_on_an_idle_stream_is_a_protocol_error(stream_id: int) -> None:
    assert refused(client_with(RESPONSE), rst(stream_id)) == (PROTOCOL, 0)


def test_client_a_stream_window_overflow_resets_the_stream_and_tells_the_caller() -> None:
    client = client_with(RESPONSE)
    (reset,) = client.receive_data(window_update(1, 2**31 - 1))
    assert isinstance(reset, wire.StreamReset) and reset.error_code == FLOW
    queued = frames(client.data_to_send())
    assert [(f.stream_id, f.error_code) for f in queued] == [(1, FLOW)]
