"""``encode_step_parts``: a one-lane step reply from its parts, the bytes betterproto2 writes.

The env server answers the served one-env step from the host's :class:`StepParts`
without building the ``StepResponse``; the bytes must be exactly those of the
``JoinResponse`` built around ``step_response(parts)``.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rlmesh_trio._protocol import env_pb, spaces_pb
from rlmesh_trio._wire._step_parts import StepParts, encode_step_parts, step_response

COUNTERS = ("decode_ns", "user_ns", "encode_ns", "lane_skew_ns", "queue_ns")
u64 = st.integers(0, 2**64 - 1)
leaf_lists = st.lists(st.binary(max_size=40), max_size=3) | st.lists(
    st.binary(min_size=100, max_size=200), min_size=1, max_size=1
)
info_maps = (
    st.none()
    | st.just(spaces_pb.MetaMap())
    | st.builds(
        lambda text: spaces_pb.MetaMap(entries={"note": spaces_pb.MetaValue(text=text)}),
        st.text(max_size=150),
    )
)
episodes = st.builds(
    env_pb.EpisodeMetadata,
    episode_id=st.text(max_size=12),
    seed=st.none() | st.integers(-(2**63), 2**63 - 1),
    step_count=st.integers(0, 2**32),
    cumulative_reward=st.floats(allow_nan=False),
    terminated=st.booleans(),
    truncated=st.booleans(),
    final_info=st.none() | st.just(spaces_pb.MetaMap()),
)
step_parts = st.builds(
    StepParts,
    leaves=leaf_lists,
    reward=st.floats(allow_nan=False) | st.sampled_from([0.0, -0.0, 1.0]),
    terminated=st.booleans(),
    truncated=st.booleans(),
    infos=info_maps,
    completed=st.lists(episodes, max_size=2),
    subset=st.booleans(),
)


@settings(max_examples=400, deadline=None)
@given(
    parts=step_parts,
    request_id=st.text(max_size=140),
    total=u64,
    counters=st.tuples(*(st.sampled_from([0, 1, 300, 2**40, 2**64 - 1]) for _ in COUNTERS)),
)
def test_a_step_reply_from_its_parts_is_the_bytes_of_the_built_response(
    parts: StepParts, request_id: str, total: int, counters: tuple[int, ...]
) -> None:
    built = env_pb.JoinResponse(
        request_id=request_id,
        endpoint_total_ns=total,
        step=step_response(parts),
        **dict(zip(COUNTERS, counters, strict=True)),
    )
    assert encode_step_parts(parts, request_id, total, counters) == bytes(built)
