"""A one-row predict read and answered from its parts: the same reply as the host's, and
every other request left to the general path."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlmesh_trio import spaces
from rlmesh_trio._protocol import core_pb, model_pb, spaces_pb
from rlmesh_trio._wire._model_codec import decode_join_request, encode_join_response
from rlmesh_trio._wire._model_parts import encode_predict_reply, read_predict
from rlmesh_trio.transport.server._model_server import ModelServer, _completed

texts = st.text(max_size=12)
contexts = st.none() | st.builds(
    model_pb.AdapterContext, session_id=texts, env_id=texts, request_id=texts
)
infos = st.lists(
    st.builds(model_pb.EpisodeInfo, episode_id=texts, seed=st.none() | st.integers(-5, 5)),
    max_size=3,
)
observations = st.none() | st.builds(
    spaces_pb.SpaceValue, leaves=st.lists(st.binary(max_size=20), max_size=2)
)
requests = st.builds(
    model_pb.PredictRequest, context=contexts, observation=observations, episode_info=infos
)
frames = st.builds(spaces_pb.SpaceValue, leaves=st.lists(st.binary(max_size=140), max_size=3))
nanos = st.integers(0, 2**40)


@settings(max_examples=300, deadline=None)
@given(
    request_id=texts,
    predict=requests,
    frame=frames,
    total=nanos,
    phases=st.tuples(nanos, nanos, nanos),
)
def test_read_parts_are_the_decoded_request_and_the_reply_is_the_codecs(
    request_id: str, predict: Any, frame: Any, total: int, phases: tuple[int, int, int]
) -> None:
    data = bytes(model_pb.JoinRequest(request_id=request_id, predict=predict))
    parts = read_predict(data)
    decoded = decode_join_request(data)
    body = decoded.predict
    one_row = (
        body.context is not None
        and body.context.env_id != ""
        and body.context.request_id != ""
        and body.observation is not None
        and len(body.episode_info) == 1
        and body.episode_info[0].episode_id != ""
    )
    # Everything canonical (betterproto2's own bytes) that the host would take is read.
    assert (parts is not None) == one_row
    if parts is None:
        return
    assert parts.request_id == decoded.request_id
    assert parts.env_id == body.context.env_id
    assert parts.observation == body.observation
    response = model_pb.JoinResponse(
        request_id=decoded.request_id,
        predict=model_pb.PredictResponse(context=body.context, actions=[frame]),
        endpoint_total_ns=total,
        decode_ns=phases[0],
        user_ns=phases[1],
        encode_ns=phases[2],
    )
    assert encode_predict_reply(parts, frame, total, phases) == encode_join_response(response)
    assert encode_predict_reply(parts, frame, total, phases) == bytes(response)


def _request(context: bytes, tail: bytes = b"") -> bytes:
    episode = bytes(model_pb.EpisodeInfo(episode_id="a"))
    observation = bytes(spaces_pb.SpaceValue(leaves=[b"x"]))
    body = b"\x0a" + bytes([len(context)]) + context
    body += b"\x12" + bytes([len(observation)]) + observation
    body += b"\x1a" + bytes([len(episode)]) + episode + tail
    return b"\x12" + bytes([len(body)]) + body


@pytest.mark.parametrize(
    "context",
    [
        b"\x12\x01e\x1a\x01r\x0a\x01s",  # out of field order
        b"\x12\x01e\x12\x01e\x1a\x01r",  # a field twice
        b"\x0a\x00\x12\x01e\x1a\x01r",  # an empty field written out
        b"\x12\x01e\x1a\x01r\x22\x01u",  # an unknown field
        b"\x12\x01e",  # no request id: the host refuses it
        b"\x12\x02\xff\xfe\x1a\x01r",  # not UTF-8
    ],
)
def test_a_context_not_in_canonical_form_is_left_to_the_general_path(context: bytes) -> None:
    assert read_predict(_request(b"\x12\x01e\x1a\x01r")) is not None
    assert read_predict(_request(context)) is None


def test_a_second_episode_is_a_batch_for_the_general_path() -> None:
    second = bytes(model_pb.EpisodeInfo(episode_id="b"))
    tail = b"\x1a" + bytes([len(second)]) + second
    assert read_predict(_request(b"\x12\x01e\x1a\x01r", tail)) is None


CARTPOLE = gym.make("CartPole-v1")
SPEC = core_pb.EnvSpec(
    id="CartPole-v1",
    observation_space=spaces.from_gymnasium(CARTPOLE.observation_space),
    action_space=spaces.from_gymnasium(CARTPOLE.action_space),
)
TIMES = ("endpoint_total_ns", "decode_ns", "user_ns", "encode_ns")


def _server(policy: Any) -> ModelServer:
    server = ModelServer(policy)
    resolve = model_pb.JoinRequest(
        request_id="q",
        resolve_adapter=model_pb.ResolveAdapterRequest(
            context=model_pb.AdapterContext(session_id="s", env_id="e", request_id="q"),
            env_spec=SPEC,
            execution_horizon=1,
        ),
    )
    response = _completed(server._host.handle(resolve, server._invoke_policy))
    assert response.resolve_adapter is not None
    return server


def _predict(observation: Any) -> bytes:
    return bytes(
        model_pb.JoinRequest(
            request_id="p",
            predict=model_pb.PredictRequest(
                context=model_pb.AdapterContext(session_id="s", env_id="e", request_id="p"),
                observation=observation,
                episode_info=[model_pb.EpisodeInfo(episode_id="a", seed=3)],
            ),
        )
    )


def _untimed(data: bytes) -> Any:
    response = model_pb.JoinResponse.parse(data)
    for name in TIMES:
        setattr(response, name, 0)
    return response


def _general(server: ModelServer, data: bytes) -> Any:
    request = model_pb.JoinRequest.parse(data)
    response = _completed(server._host.handle(request, server._invoke_policy))
    for name in TIMES:
        setattr(response, name, 0)
    return response


def _raises(observation: Any) -> int:
    raise RuntimeError("no action today")


def _unfit(observation: Any) -> Any:
    return 7.5


OBSERVATION = spaces.encode_batch(
    SPEC.observation_space, [np.array([0.0, 0.1, 0.2, 0.3], np.float32)]
)


@pytest.mark.parametrize("policy", [lambda obs: int(obs[2] > 0), _raises, _unfit])
def test_the_server_answers_a_step_from_its_parts_as_the_host_does(policy: Any) -> None:
    server = _server(policy)
    data = _predict(OBSERVATION)
    reply = server._answer_row(data)
    assert reply is not None
    assert _untimed(reply) == _general(server, data)
    assert model_pb.JoinResponse.parse(reply).endpoint_total_ns > 0


@pytest.mark.parametrize(
    "observation", [spaces_pb.SpaceValue(leaves=[b"\x00" * 3]), spaces_pb.SpaceValue()]
)
def test_an_observation_that_does_not_fit_is_left_to_the_host(observation: Any) -> None:
    server = _server(lambda obs: 0)
    assert server._answer_row(_predict(observation)) is None
    assert _general(server, _predict(observation)).error is not None


def test_an_unresolved_env_is_left_to_the_host() -> None:
    server = ModelServer(lambda obs: 0)
    assert server._answer_row(_predict(OBSERVATION)) is None


@pytest.mark.parametrize(
    ("episode", "read"),
    [
        (b"\x0a\x01a\x10\x03", True),
        (b"\x10\x03\x0a\x01a", True),  # the seed first: any field order is read
        (b"\x0a\x00", False),  # an empty episode_id: the host refuses it
        (b"\x0a\x01a\x10\x03\x10\x04", False),  # a seed twice
        (b"\x0a\x01a\x18\x01", False),  # an unknown field
        (b"\x0a\x01a\x10\xff", False),  # a truncated seed
    ],
)
def test_an_episode_is_read_only_as_the_hand_decoder_reads_it(episode: bytes, read: bool) -> None:
    context = b"\x12\x01e\x1a\x01r"
    observation = bytes(spaces_pb.SpaceValue(leaves=[b"x"]))
    body = b"\x0a" + bytes([len(context)]) + context
    body += b"\x12" + bytes([len(observation)]) + observation
    body += b"\x1a" + bytes([len(episode)]) + episode
    assert (read_predict(b"\x12" + bytes([len(body)]) + body) is not None) == read


@pytest.mark.parametrize("value", [0, 1, 0x7F, 0x80, 0x3FFF, 0x4000, 0x1FFFFF, 0x200000, 2**64 - 1])
def test_the_reply_varints_are_protobufs(value: int) -> None:
    from rlmesh_trio._wire._model_parts import _varint
    from rlmesh_trio._wire._pb import put_varint

    expected = bytearray()
    put_varint(expected, value)
    assert _varint(value) == bytes(expected)
