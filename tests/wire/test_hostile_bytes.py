"""Hostile bytes at the core level (issue 22): a server's floods as seen by the client core,
undecodable HPACK, protobuf that would cost betterproto2 unbounded work, big messages.

Frames are hand-built with hyperframe's public API; assertions are on the cores' events
and on the frames they queue.
"""

from __future__ import annotations

import random

import hyperframe.frame
import pytest

from rlmesh_trio import _wire as wire
from rlmesh_trio._protocol import core_pb, env_pb
from rlmesh_trio._wire import _frames, _skim
from rlmesh_trio._wire._grpc import MAPPED_MESSAGE_BYTES, MessageReader, frame
from rlmesh_trio._wire._limits import RateBudget

from .test_server_core import CALM, PATH, Pair, goaway_code, raw, started_server

COMPRESSION = 0x9


def _client_after_settings(limits: wire.ServerLimits | None = None) -> wire.ClientCore:
    client = wire.ClientCore(limits)
    client.initiate()
    client.receive_data(raw(hyperframe.frame.SettingsFrame(0)))
    client.data_to_send()
    return client


def _window_update(stream_id: int, increment: int) -> hyperframe.frame.WindowUpdateFrame:
    update = hyperframe.frame.WindowUpdateFrame(stream_id)
    update.window_increment = increment
    return update


@pytest.mark.parametrize(
    ("make", "limits"),
    [
        (lambda: hyperframe.frame.SettingsFrame(0), wire.ServerLimits(settings_budget=20)),
        (lambda: hyperframe.frame.PingFrame(0), wire.ServerLimits(ping_budget=20)),
        (lambda: hyperframe.frame.RstStreamFrame(1), wire.ServerLimits(reset_budget=20)),
        (lambda: _window_update(0, 1), wire.ServerLimits(window_update_budget=20)),
        (lambda: hyperframe.frame.DataFrame(1), wire.ServerLimits(empty_data_budget=20)),
    ],
    ids=["settings", "ping", "rst", "window-update", "empty-data"],
)
def test_the_client_core_rations_a_servers_frame_floods(make, limits) -> None:
    client = _client_after_settings(limits)
    stream_id = client.open_stream(wire.request_headers(PATH, "127.0.0.1:1"))
    client.data_to_send()
    # The response's headers first: DATA before them is a malformed response of its own.
    response = hyperframe.frame.HeadersFrame(stream_id, data=b"\x88", flags=["END_HEADERS"])
    assert client.receive_data(raw(response))
    with pytest.raises(wire.ProtocolFailure):
        client.receive_data(raw(make()) * 200)
    assert goaway_code(client.data_to_send()) == CALM


def test_the_client_core_takes_the_default_budgets_of_a_busy_but_fair_server() -> None:
    client = _client_after_settings()
    # Far under every default budget: a server's SETTINGS change and its keepalive pings.
    client.receive_data(raw(hyperframe.frame.SettingsFrame(0)) + raw(hyperframe.frame.PingFrame(0)))
    assert goaway_code(client.data_to_send()) is None


def test_the_client_core_bounds_a_servers_continuation_flood() -> None:
    client = _client_after_settings(wire.ServerLimits(max_header_list_size=1024))
    stream_id = client.open_stream(wire.request_headers(PATH, "127.0.0.1:1"))
    client.data_to_send()
    headers = hyperframe.frame.HeadersFrame(stream_id)
    headers.data = b"\x88"  # :status 200, indexed; no END_HEADERS
    continuation = hyperframe.frame.ContinuationFrame(stream_id)
    continuation.data = b"\x00" * 1000
    with pytest.raises(wire.ProtocolFailure):
        client.receive_data(raw(headers) + raw(continuation) * 50)
    assert goaway_code(client.data_to_send()) == CALM


def test_undecodable_hpack_is_answered_compression_error() -> None:
    server = started_server()
    headers = hyperframe.frame.HeadersFrame(1)
    headers.data = b"\x80\xff\xff\xff\x0f"  # indexed field 0: never valid
    headers.flags.add("END_HEADERS")
    with pytest.raises(wire.ProtocolFailure):
        server.receive_data(raw(headers))
    assert goaway_code(server.data_to_send()) == COMPRESSION


def test_an_oversized_header_list_stays_enhance_your_calm_not_compression() -> None:
    server = started_server(wire.ServerLimits(max_header_list_size=1024))
    server.receive_data(raw(hyperframe.frame.SettingsFrame(0, flags=["ACK"])))
    headers = hyperframe.frame.HeadersFrame(1)
    # One literal of 2000 bytes (no indexing, new name): within the block bound, over the list.
    headers.data = b"\x00\x01x\x7f\xd1\x0e" + b"v" * 2000
    headers.flags.add("END_HEADERS")
    with pytest.raises(wire.ProtocolFailure):
        server.receive_data(raw(headers))
    assert goaway_code(server.data_to_send()) not in (None, COMPRESSION)


def test_with_goaway_code_rewrites_only_goaway_frames() -> None:
    ping = raw(hyperframe.frame.PingFrame(0, opaque_data=b"12345678"))
    goaway = raw(hyperframe.frame.GoAwayFrame(0, last_stream_id=3, error_code=1))
    out = _frames.with_goaway_code(ping + goaway + b"\x00\x00", COMPRESSION)
    assert out[: len(ping)] == ping
    assert out[len(ping) + 9 : len(ping) + 13] == (3).to_bytes(4, "big")
    assert out[len(ping) + 13 : len(ping) + 17] == COMPRESSION.to_bytes(4, "big")
    assert out[-2:] == b"\x00\x00"


# ---- protobuf that would cost betterproto2 unbounded work -------------------------------


def _handshake() -> env_pb.HandshakeRequest:
    base = core_pb.HandshakeRequest(
        protocol_generation="g",
        peer_info=core_pb.PeerInfo(component="c", extra={"k": "v"}),
        capabilities={"a": "b"},
        supported_workflow_editions=["1", "2"],
    )
    return env_pb.HandshakeRequest(base=base)


def test_a_well_formed_message_parses_exactly_as_betterproto2() -> None:
    data = bytes(_handshake())
    assert wire.parse_message(env_pb.HandshakeRequest, data) == env_pb.HandshakeRequest.parse(data)


def test_a_few_unknown_fields_pass_as_protobuf_asks() -> None:
    data = bytes(_handshake()) + b"\xa8\x01\x07" + b"\xb2\x01\x02hi"  # fields 21, 22
    assert wire.parse_message(env_pb.HandshakeRequest, data).base == _handshake().base


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (bytes(64 * 1024 * 1024), "field number 0"),
        (b"\xa8\x01\x00" * (_skim.MAX_UNKNOWN_FIELDS + 1), "unknown fields"),
        ((b"\xb2\x01\x80\x80\x08" + bytes(131072)) * 2, "bytes of unknown"),
        # nested: the zeros inside the known `base` message are walked too
        (b"\x0a\x80\x80\x04" + bytes(65536), "field number 0"),
        (b"\x0b", "wire type 3"),
        (b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "varint"),
    ],
    ids=["zeros", "unknown-count", "unknown-bytes", "nested-zeros", "group", "long-varint"],
)
def test_costly_or_malformed_protobuf_is_refused_before_betterproto2(data, says) -> None:
    with pytest.raises(wire.FramingError, match=says):
        wire.parse_message(env_pb.HandshakeRequest, data)


def test_known_repeated_fields_are_bounded_in_number() -> None:
    editions = b"\x22\x00" * (_skim.MAX_FIELDS + 1)
    base = b"\x0a" + _varint(len(editions)) + editions
    with pytest.raises(wire.FramingError, match="fields"):
        wire.parse_message(env_pb.HandshakeRequest, base)


def test_a_truncated_length_is_read_as_betterproto2_reads_it() -> None:
    data = b"\x12\x05\x0a\x09"  # a LEN field longer than its message
    assert wire.parse_message(env_pb.JoinRequest, data) == env_pb.JoinRequest.parse(data)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    return bytes([*out, value])


# ---- big messages ----------------------------------------------------------------------------


def test_big_messages_assemble_in_a_map_however_they_are_split() -> None:
    sizes = [0, 3, MAPPED_MESSAGE_BYTES - 5, MAPPED_MESSAGE_BYTES, 3 * MAPPED_MESSAGE_BYTES, 10]
    messages = [bytes([i + 1]) * size for i, size in enumerate(sizes)]
    stream = b"".join(frame(m) for m in messages)
    for seed in range(6):
        chooser, reader, out, pos = random.Random(seed), MessageReader(), [], 0
        while pos < len(stream):
            step = chooser.choice([1, 4, 5, 16384, 1 << 20])
            before = reader.buffered
            got = reader.feed(stream[pos : pos + step])
            assert reader.buffered == before + min(step, len(stream) - pos) - sum(
                len(m) + 5 for m in got
            )
            out += got
            pos += step
        assert out == messages
        assert not reader.partial


def test_a_big_message_prefix_is_still_checked_before_its_body() -> None:
    reader = MessageReader(limit=2 * MAPPED_MESSAGE_BYTES)
    with pytest.raises(wire.FramingError):
        reader.feed(b"\x00" + (3 * MAPPED_MESSAGE_BYTES).to_bytes(4, "big"))
    assert reader.buffered == 0


def test_a_shared_reset_budget_outlasts_reconnecting() -> None:
    shared = RateBudget(30, 0.0, 0.0)
    ended = 0
    for _ in range(5):  # five connections of 20 resets each: the shared 30 run out on the 2nd
        pair = Pair(wire.ServerLimits(reset_budget=20))
        pair.server.shared_resets = shared
        try:
            for _ in range(20):
                stream_id = pair.client.open_stream(wire.request_headers(PATH, "127.0.0.1:1"))
                pair.client.reset_stream(stream_id)
                pair.to_server()
        except wire.ProtocolFailure:
            assert goaway_code(pair.server.data_to_send()) == CALM
            ended += 1
    assert ended == 4
