"""The client core's one-frame fast paths agree, byte for byte, with the general paths.

A read that is exactly one DATA frame (a Join reply) skips the frame splitter;
a message that fits the windows goes out as one DATA frame built in one go.
These tests feed the same bytes whole (fast path) and in pieces (general
path) and compare what comes out, and check the corner cases that must leave
the fast path: padding, END_STREAM, a frame over our frame size, and a read
that completes a frame buffered by an earlier one.
"""

from __future__ import annotations

import struct

import h2.config
import h2.connection
import hyperframe.frame
import pytest

from rlmesh_trio import _wire as wire
from rlmesh_trio._protocol import env_pb, model_pb, spaces_pb
from rlmesh_trio._wire import _frames
from rlmesh_trio._wire._client_codec import decode_env_response, decode_model_response

PATH = "/rlmesh.env.v1.EnvService/Join"


def _connected() -> tuple[wire.ClientCore, h2.connection.H2Connection, int]:
    core = wire.ClientCore()
    core.initiate()
    server = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
    )
    server.initiate_connection()
    server.receive_data(core.data_to_send())
    core.receive_data(server.data_to_send())
    stream_id = core.open_stream(wire.request_headers(PATH, "127.0.0.1:1"))
    server.receive_data(core.data_to_send())
    server.send_headers(stream_id, [(":status", "200"), ("content-type", "application/grpc")])
    core.receive_data(server.data_to_send())
    return core, server, stream_id


def _data(stream_id: int, payload: bytes, flags: int = 0) -> bytes:
    return (
        len(payload).to_bytes(3, "big") + bytes((0, flags)) + stream_id.to_bytes(4, "big") + payload
    )


def test_one_data_frame_read_gives_the_same_events_whole_or_in_pieces() -> None:
    message = bytes(env_pb.JoinResponse(request_id="r", step=env_pb.StepResponse(rewards=[1.0])))
    read = _data(1, wire.frame(message))
    whole_core, _, stream_id = _connected()
    whole = whole_core.receive_data(_data(stream_id, wire.frame(message)))
    assert whole == [wire.MessageReceived(stream_id, message)]
    pieces_core, _, _ = _connected()
    pieces = pieces_core.receive_data(read[:4]) + pieces_core.receive_data(read[4:])
    assert pieces == whole
    # a frame completed by the next read, with another whole frame behind it
    split_core, _, _ = _connected()
    assert split_core.receive_data(read[:11]) == []
    assert split_core.receive_data(read[11:] + read) == whole + whole


def test_padding_and_end_stream_leave_the_fast_path_and_still_decode() -> None:
    core, _, stream_id = _connected()
    body = wire.frame(b"abc")
    padded = bytes((2,)) + body + b"\x00\x00"
    assert core.receive_data(_data(stream_id, padded, _frames.PADDED)) == [
        wire.MessageReceived(stream_id, b"abc")
    ]
    with pytest.raises(wire.ProtocolFailure):
        core.receive_data(_data(stream_id, bytes(20_000)))  # over our 16 KiB frame size


def test_a_message_that_fits_goes_out_as_one_data_frame_with_its_grpc_prefix() -> None:
    core, _, stream_id = _connected()
    payload = bytes(range(200))
    core.send_message(stream_id, payload)
    sent = core.data_to_send()
    assert sent == _frames.data_frame_header(stream_id, 205) + wire.frame(payload)
    frame, length = hyperframe.frame.Frame.parse_frame_header(memoryview(sent[:9]))
    assert isinstance(frame, hyperframe.frame.DataFrame) and length == 205
    assert frame.stream_id == stream_id and not frame.flags


def test_hand_decoded_steps_match_betterproto2_on_the_shapes_the_inline_walk_handles() -> None:
    step = env_pb.StepResponse(
        observation=spaces_pb.SpaceValue(leaves=[bytes(16)]),
        rewards=[1.0, -2.5, 3.0],
        terminated_mask=b"\x00\x01\x00",
        truncated_mask=b"",
        infos=spaces_pb.MetaMap(),
        env_indices=[0, 1, 300],
    )
    data = bytes(env_pb.JoinResponse(request_id="grpc-req-7", step=step, user_ns=123_456_789))
    assert decode_env_response(data) == env_pb.JoinResponse.parse(data)
    # env indices sent unpacked (one varint each) read the same
    unpacked = bytes(env_pb.JoinResponse(request_id="x", step=env_pb.StepResponse()))
    body = b"\x38\x01\x38\xac\x02"  # env_indices (7) = 1, 300, one varint each
    data = b"\x12" + bytes((len(body),)) + body + unpacked[2:]
    assert decode_env_response(data).step.env_indices == [1, 300]
    assert decode_env_response(data) == env_pb.JoinResponse.parse(data)
    # a one-element rewards field is the common case: exactly one double
    one = env_pb.StepResponse(rewards=[0.5])
    assert struct.pack("<d", 0.5) in bytes(one)
    assert decode_env_response(bytes(env_pb.JoinResponse(step=one))).step.rewards == [0.5]


def test_hand_decoded_predicts_match_betterproto2_including_long_strings() -> None:
    context = model_pb.AdapterContext(session_id="s" * 200, env_id="e" * 36, request_id="r" * 130)
    reply = model_pb.PredictResponse(
        context=context, actions=[spaces_pb.SpaceValue(leaves=[bytes(8)])]
    )
    data = bytes(model_pb.JoinResponse(request_id="r" * 130, predict=reply, in_flight=2**40))
    assert decode_model_response(data) == model_pb.JoinResponse.parse(data)


def test_frames_with_two_messages_an_empty_one_or_a_partial_one_leave_the_fast_path() -> None:
    core, _, stream_id = _connected()
    two = wire.frame(b"one") + wire.frame(b"")
    assert core.receive_data(_data(stream_id, two)) == [
        wire.MessageReceived(stream_id, b"one"),
        wire.MessageReceived(stream_id, b""),
    ]
    # the rest of a buffered message is not taken for a whole one, even when it
    # looks like one (here the message's body is itself a framed message)
    body = wire.frame(b"wxyz")
    first = wire.frame(body)
    assert core.receive_data(_data(stream_id, first[:5])) == []
    assert core.receive_data(_data(stream_id, first[5:])) == [wire.MessageReceived(stream_id, body)]
    # a compressed flag is refused (the stream is reset), never delivered
    events = core.receive_data(_data(stream_id, b"\x01" + wire.frame(b"z")[1:]))
    assert [type(event) for event in events] == [wire.StreamReset]
