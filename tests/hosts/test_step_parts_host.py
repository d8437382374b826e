"""A one-lane host's step asked for parts answers what its built step answers.

``call_now(..., parts=True)`` (the env server's served step) gives a
``StepParts``; ``step_response(parts)`` must be the ``StepResponse`` the same
host gives without parts (episode timestamps aside), conformance warnings,
infos, completed episodes and errors included.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from rlmesh_trio import spaces
from rlmesh_trio._envhost import EnvHost, make_host
from rlmesh_trio._protocol import env_pb, spaces_pb
from rlmesh_trio._wire._step_parts import StepParts, step_response

from .._envhost_envs import BoxActionEnv, CountingEnv, RichEnv
from .test_one_lane import DriftingEnv


def _untimed(step: env_pb.StepResponse) -> bytes:
    for episode in step.completed_episodes:
        episode.start_timestamp_ns = 0
        episode.end_timestamp_ns = 0
    return bytes(step)


def _both(host: EnvHost, twin: EnvHost, kind: str, body: Any) -> tuple[Any, Any]:
    parts = host.call_now(kind, body, parts=True)
    built = twin.call_now(kind, body)
    assert parts is not None and built is not None
    return parts, built


def _check_step(host: EnvHost, twin: EnvHost, body: env_pb.StepRequest) -> StepParts | None:
    parts, built = _both(host, twin, "step", body)
    assert (parts.error is None) == (built.error is None)
    if parts.error is not None:
        assert bytes(parts.error) == bytes(built.error)
        assert parts.end_stream == built.end_stream
        return None
    assert type(parts.answer) is StepParts
    assert _untimed(step_response(parts.answer)) == _untimed(built.answer)
    return parts.answer


def _action_of(host: EnvHost, space: gym.Space[Any], seed: int) -> spaces_pb.SpaceValue:
    assert host.contract.spec is not None and host.contract.spec.action_space is not None
    space.seed(seed)
    return spaces.encode(host.contract.spec.action_space, space.sample())


@pytest.mark.parametrize(
    "make", [DriftingEnv, CountingEnv, RichEnv, BoxActionEnv, lambda: gym.make("CartPole-v1")]
)
@pytest.mark.parametrize("indices", [[], [0]])
def test_parts_are_the_built_step_through_episode_ends(make: Any, indices: list[int]) -> None:
    host, twin = make_host(make()), make_host(make())
    space = make().action_space
    for episode in range(3):
        reset = env_pb.ResetRequest(seeds=[episode], episode_ids=[f"e{episode}"])
        _both(host, twin, "reset", reset)
        for step in range(12):
            action = _action_of(host, space, 100 * episode + step)
            answer = _check_step(host, twin, env_pb.StepRequest(action=action, env_indices=indices))
            if answer is None or answer.terminated or answer.truncated:
                break


def test_bad_actions_and_interrupted_episodes_answer_alike() -> None:
    host, twin = make_host(CountingEnv()), make_host(CountingEnv())
    for episode_id in ("a", "b"):  # "a" is interrupted by the second reset
        _both(host, twin, "reset", env_pb.ResetRequest(episode_ids=[episode_id]))
    good = spaces_pb.SpaceValue(leaves=[np.int64(1).tobytes()])
    answer = _check_step(host, twin, env_pb.StepRequest(action=good))
    assert answer is not None and [m.episode_id for m in answer.completed] == ["a"]
    for bad in (None, spaces_pb.SpaceValue(leaves=[np.int64(7).tobytes()])):
        assert _check_step(host, twin, env_pb.StepRequest(action=bad)) is None
