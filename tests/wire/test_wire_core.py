"""The I/O-free wire core at the byte level, the way h2 tests itself.

A real ``h2`` server-side connection plays the peer: its bytes are fed to the
client core and the client's bytes to it, and the tests assert the events and
frames on both sides (frames inspected with hyperframe's public API).
"""

from __future__ import annotations

import h2.config
import h2.connection
import h2.events
import h2.settings
import hyperframe.frame
import pytest

from rlmesh_trio import _wire as wire
from rlmesh_trio._protocol import env_pb
from rlmesh_trio._wire import _client_codec

PATH = "/rlmesh.env.v1.EnvService/Join"


class Peer:
    """An h2 server connection wired to a client core in memory."""

    def __init__(self) -> None:
        self.core = wire.ClientCore()
        self.core.initiate()
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        self.server = h2.connection.H2Connection(config)
        self.server.initiate_connection()
        self.events: list[h2.events.Event] = []
        self.to_server()
        self.to_client()

    def to_server(self) -> list[h2.events.Event]:
        events = self.server.receive_data(self.core.data_to_send())
        self.events += events
        return events

    def to_client(self, data: bytes | None = None) -> list[wire.Event]:
        return self.core.receive_data(self.server.data_to_send() if data is None else data)

    def open(self, metadata: dict[str, str] | None = None, timeout: float | None = None) -> int:
        headers = wire.request_headers(PATH, "127.0.0.1:1", metadata=metadata, timeout=timeout)
        stream_id = self.core.open_stream(headers)
        self.to_server()
        return stream_id


def frames(data: bytes) -> list[hyperframe.frame.Frame]:
    out = []
    while data:
        frame, length = hyperframe.frame.Frame.parse_frame_header(memoryview(data[:9]))
        frame.parse_body(memoryview(data[9 : 9 + length]))
        out.append(frame)
        data = data[9 + length :]
    return out


def test_request_headers_carry_grpc_method_path_metadata_and_deadline() -> None:
    peer = Peer()
    stream_id = peer.open(metadata={"authorization": "tok"}, timeout=2.5)
    (request,) = [e for e in peer.events if isinstance(e, h2.events.RequestReceived)]
    headers = dict(request.headers)
    assert request.stream_id == stream_id == 1
    assert headers[":method"] == "POST" and headers[":scheme"] == "http"
    assert headers[":path"] == PATH
    assert headers["content-type"] == "application/grpc"
    assert headers["te"] == "trailers"
    assert headers["grpc-timeout"] == "2500m"
    assert headers["authorization"] == "tok"


def test_a_message_goes_out_as_one_length_prefixed_data_frame() -> None:
    peer = Peer()
    stream_id = peer.open()
    peer.core.send_message(stream_id, b"hello")
    (frame,) = frames(peer.core.data_to_send())
    assert isinstance(frame, hyperframe.frame.DataFrame)
    assert frame.stream_id == stream_id
    assert frame.data == b"\x00\x00\x00\x00\x05hello"
    assert "END_STREAM" not in frame.flags


def test_responses_split_and_joined_across_frames_come_out_whole() -> None:
    peer = Peer()
    stream_id = peer.open()
    peer.server.send_headers(stream_id, [(":status", "200"), ("content-type", "application/grpc")])
    two = wire.frame(b"first") + wire.frame(b"second")
    peer.server.send_data(stream_id, two[:3])
    peer.server.send_data(stream_id, two[3:12])
    peer.server.send_data(stream_id, two[12:])
    events = peer.to_client()
    assert events[0] == wire.ResponseHeaders(
        stream_id, [(":status", "200"), ("content-type", "application/grpc")]
    )
    assert events[1:] == [
        wire.MessageReceived(stream_id, b"first"),
        wire.MessageReceived(stream_id, b"second"),
    ]


def test_received_data_is_acknowledged_to_the_peer() -> None:
    peer = Peer()
    stream_id = peer.open()
    peer.server.send_headers(stream_id, [(":status", "200")])
    before = peer.server.local_flow_control_window(stream_id)
    peer.server.send_data(stream_id, wire.frame(b"x" * 9000))
    peer.to_client()
    assert peer.server.local_flow_control_window(stream_id) < before
    peer.to_server()  # the client's WINDOW_UPDATEs (h2 sends them once enough is consumed)
    assert peer.core.open_streams == 1


def test_trailers_give_the_status_and_a_percent_decoded_message() -> None:
    peer = Peer()
    stream_id = peer.open()
    peer.server.send_headers(stream_id, [(":status", "200")])
    peer.server.send_headers(
        stream_id,
        [("grpc-status", "9"), ("grpc-message", "in%20use%3A%20busy")],
        end_stream=True,
    )
    events = peer.to_client()
    assert events[-1] == wire.StreamEnded(
        stream_id, wire.GrpcStatus.FAILED_PRECONDITION, "in use: busy"
    )
    assert peer.core.open_streams == 0


def test_trailers_only_response_and_http_errors_map_to_statuses() -> None:
    peer = Peer()
    first = peer.open()
    peer.server.send_headers(first, [(":status", "200"), ("grpc-status", "12")], end_stream=True)
    assert peer.to_client()[-1] == wire.StreamEnded(first, wire.GrpcStatus.UNIMPLEMENTED, None)
    second = peer.open()
    peer.server.send_headers(second, [(":status", "503")], end_stream=True)
    assert peer.to_client()[-1] == wire.StreamEnded(
        second, wire.GrpcStatus.UNAVAILABLE, "HTTP status 503"
    )


def test_rst_stream_and_goaway_are_events() -> None:
    peer = Peer()
    stream_id = peer.open()
    peer.server.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
    (reset,) = peer.to_client()
    assert isinstance(reset, wire.StreamReset) and reset.stream_id == stream_id
    assert reset.error_code == h2.errors.ErrorCodes.CANCEL
    peer.server.close_connection(last_stream_id=stream_id)
    (goaway,) = peer.to_client()
    assert goaway == wire.ConnectionTerminated(0, stream_id, b"")
    with pytest.raises(wire.ProtocolFailure, match="GOAWAY"):
        peer.core.open_stream(wire.request_headers(PATH, "x"))


def test_compressed_or_oversized_messages_reset_the_stream() -> None:
    peer = Peer()
    stream_id = peer.open()
    peer.server.send_headers(stream_id, [(":status", "200")])
    peer.server.send_data(stream_id, b"\x01\x00\x00\x00\x01x")
    (_headers, reset) = peer.to_client()
    assert isinstance(reset, wire.StreamReset) and "compressed" in reset.detail
    rst = [
        f
        for f in frames(peer.core.data_to_send())
        if isinstance(f, hyperframe.frame.RstStreamFrame)
    ]
    assert [f.stream_id for f in rst] == [stream_id]
    reader = wire.MessageReader()
    with pytest.raises(wire.FramingError, match="256 MiB"):
        reader.feed(b"\x00" + (wire.MAX_MESSAGE_BYTES + 1).to_bytes(4, "big"))


def test_a_send_beyond_the_window_waits_for_window_updates() -> None:
    peer = Peer()
    stream_id = peer.open()
    payload = bytes(200_000)  # > the 65535-byte default window the server grants
    peer.core.send_message(stream_id, payload)
    sent = frames(peer.core.data_to_send())
    first = sum(len(f.data) for f in sent if isinstance(f, hyperframe.frame.DataFrame))
    assert first == 65535
    received = bytearray()
    for event in peer.server.receive_data(b"".join(f.serialize() for f in sent)):
        if isinstance(event, h2.events.DataReceived):
            received += event.data
            peer.server.acknowledge_received_data(event.flow_controlled_length, stream_id)
    while len(received) < len(payload) + 5:
        peer.to_client()  # the server's WINDOW_UPDATEs release more
        for event in peer.to_server():
            if isinstance(event, h2.events.DataReceived):
                received += event.data
                peer.server.acknowledge_received_data(event.flow_controlled_length, stream_id)
    assert bytes(received) == wire.frame(payload)


def test_an_http1_answer_is_not_http2() -> None:
    core = wire.ClientCore()
    core.initiate()
    with pytest.raises(wire.NotHttp2):
        core.receive_data(b"HTTP/1.0 400 Bad request version\r\n\r\n")


def test_join_demux_matches_responses_by_request_id_out_of_order() -> None:
    got: dict[str, object] = {}

    class Waiter:
        def __init__(self, name: str) -> None:
            self.name = name

        def resolve(self, value: object) -> None:
            got[self.name] = value

        def fail(self, error: BaseException) -> None:
            got[self.name] = error

    demux = wire.JoinDemux(env_pb.JoinResponse.parse, lambda r: r.request_id)
    demux.register("a", Waiter("a"))
    demux.register("b", Waiter("b"))
    with pytest.raises(ValueError, match="already in flight"):
        demux.register("a", Waiter("dup"))
    b = bytes(env_pb.JoinResponse(request_id="b", step=env_pb.StepResponse(rewards=[1.0])))
    assert demux.deliver(b) and "b" in got and "a" not in got
    assert not demux.deliver(bytes(env_pb.JoinResponse(request_id="zzz")))  # nobody waits
    with pytest.raises(wire.Undecodable):
        demux.deliver(b"\x2a\x02\xff\xfe")  # a request id that is not UTF-8
    error = RuntimeError("gone")
    demux.fail_all(error)
    assert got["a"] is error and len(demux) == 0


def test_the_hot_paths_take_the_hand_codec() -> None:
    counts = _client_codec.fast_path_counts
    before = dict(counts)
    data = bytes(env_pb.JoinResponse(request_id="r", step=env_pb.StepResponse(rewards=[1.0])))
    _client_codec.decode_env_response(data)
    _client_codec.encode_env_step("r", env_pb.StepRequest(timeout_ms=1))
    assert counts["decode"] == before["decode"] + 1
    assert counts["encode"] == before["encode"] + 1
    assert counts["fallback"] == before["fallback"]
    _client_codec.decode_env_response(bytes(env_pb.JoinResponse(request_id="r")))
    assert counts["fallback"] == before["fallback"] + 1


def test_a_settings_ack_goes_out_before_data_the_new_window_admits() -> None:
    peer = Peer()
    stream_id = peer.open()
    peer.core.send_message(stream_id, bytes(100_000))  # beyond the 65535 default window
    peer.to_server()
    peer.server.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20})
    peer.server.increment_flow_control_window(1 << 20)
    peer.to_client()
    sent = frames(peer.core.data_to_send())
    kinds = [type(f).__name__ for f in sent]
    assert "SettingsFrame" in kinds and "DataFrame" in kinds
    assert kinds.index("SettingsFrame") < kinds.index("DataFrame")
    assert "ACK" in sent[kinds.index("SettingsFrame")].flags


def test_window_updates_and_data_are_framed_by_the_core_not_h2() -> None:
    peer = Peer()
    stream_id = peer.open()
    peer.server.send_headers(stream_id, [(":status", "200")])
    peer.events.clear()
    received = 0
    while received < 5 * 1024 * 1024:  # over a quarter of the 16 MiB window: credit returns
        peer.server.send_data(stream_id, wire.frame(bytes(16_000)))
        received += 16_005 * len(peer.to_client())
        peer.to_server()
    updates = [e for e in peer.events if isinstance(e, h2.events.WindowUpdated)]
    assert {e.stream_id for e in updates} == {0, stream_id}
    assert all(e.delta >= 4 * 1024 * 1024 for e in updates)
