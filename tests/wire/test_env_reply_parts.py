"""``wire.encode_env_reply``: an env JoinResponse from its parts, the bytes betterproto2 writes.

The env server's inline path encodes a reply from the host's answer without
building the ``JoinResponse``; every arm (hand-written or not) must come out
exactly as ``bytes(JoinResponse(...))`` would.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rlmesh_trio import _wire as wire
from rlmesh_trio._protocol import env_pb, spaces_pb

texts = st.text(max_size=24)
u64 = st.integers(0, 2**64 - 1)
space_values = st.builds(spaces_pb.SpaceValue, leaves=st.lists(st.binary(max_size=40), max_size=3))
arms: dict[str, Any] = {
    "step": st.builds(
        env_pb.StepResponse,
        observation=st.none() | space_values,
        rewards=st.lists(st.floats(allow_nan=False), max_size=3),
        terminated_mask=st.binary(max_size=3),
        truncated_mask=st.binary(max_size=3),
        env_indices=st.lists(st.integers(0, 2**32 - 1), max_size=3),
    ),
    "reset": st.builds(env_pb.ResetResponse, observation=st.none() | space_values),
    "configure": st.just(env_pb.ConfigureEnvResponse()),
    "close": st.just(env_pb.CloseEnvsResponse()),
    "error": st.builds(
        env_pb.EnvError,
        code=st.sampled_from(list(env_pb.EnvErrorCode)),
        message=texts,
        is_recoverable=st.booleans(),
    ),
}
COUNTERS = ("decode_ns", "user_ns", "encode_ns", "lane_skew_ns", "queue_ns")


@settings(max_examples=300, deadline=None)
@given(
    arm=st.sampled_from(sorted(arms)),
    data=st.data(),
    request_id=texts,
    total=st.none() | u64,
    counters=st.tuples(*(u64 for _ in COUNTERS)),
)
def test_a_reply_from_its_parts_is_the_bytes_of_the_built_response(
    arm: str, data: st.DataObject, request_id: str, total: int | None, counters: tuple[int, ...]
) -> None:
    body = data.draw(arms[arm])
    built = env_pb.JoinResponse(
        request_id=request_id,
        endpoint_total_ns=total,
        **{arm: body},
        **dict(zip(COUNTERS, counters, strict=True)),
    )
    assert wire.encode_env_reply(arm, body, request_id, total, counters) == bytes(built)


one_env_steps = st.builds(
    env_pb.StepResponse,
    observation=st.none()
    | space_values
    | st.builds(
        spaces_pb.SpaceValue, leaves=st.lists(st.binary(min_size=90, max_size=130), max_size=1)
    ),
    rewards=st.lists(st.floats(allow_nan=False), min_size=1, max_size=2),
    terminated_mask=st.binary(min_size=1, max_size=2),
    truncated_mask=st.binary(min_size=1, max_size=2),
    infos=st.none() | st.just(spaces_pb.MetaMap()),
)


@settings(max_examples=300, deadline=None)
@given(
    step=one_env_steps,
    request_id=texts,
    total=u64,
    counters=st.tuples(*(st.sampled_from([0, 1, 2**40, 2**64 - 1]) for _ in COUNTERS)),
)
def test_a_one_env_step_reply_is_the_bytes_of_the_built_response(
    step: Any, request_id: str, total: int, counters: tuple[int, ...]
) -> None:
    from rlmesh_trio._wire._env_codec import encode_step_reply

    built = env_pb.JoinResponse(
        request_id=request_id,
        endpoint_total_ns=total,
        step=step,
        **dict(zip(COUNTERS, counters, strict=True)),
    )
    assert encode_step_reply(step, request_id, total, counters) == bytes(built)
