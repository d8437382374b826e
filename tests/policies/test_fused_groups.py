"""Fused grouped predicts decode and encode every group's rows as one slab (issue 23).

Whatever the path (one slab for all groups, or group by group when the slab
form does not apply), the actions are those of calling the policy on each
observation directly, served and in process, and each bad group gets its
own error, the one a plain predict of it gets.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import rlmesh_trio as rt
from rlmesh_trio import ModelRpcError, ProtocolError, spaces
from rlmesh_trio._modelhost._fused import decode_joined, encode_joined
from rlmesh_trio._protocol import core_pb, model_pb, spaces_pb

from ._calls import endpoint, observations_of, resolve

WHERE = ["local", "served"]


def _spec(obs: gym.Space, act: gym.Space) -> core_pb.EnvSpec:
    return core_pb.EnvSpec(
        id="fused",
        observation_space=spaces.from_gymnasium(obs),
        action_space=spaces.from_gymnasium(act),
    )


class Rows:
    """A policy whose action depends on each row alone; counts its batched calls."""

    def __init__(self, act: gym.Space) -> None:
        self.act = act
        self.batches: list[int] = []

    def one(self, obs: Any) -> Any:
        leaves = [np.asarray(v, dtype=np.float64).ravel() for v in _leaves(obs)]
        score = float(np.concatenate(leaves).sum()) if leaves else 0.0
        act = self.act
        if isinstance(act, gym.spaces.Discrete):
            return int(act.start + int(abs(score) * 7) % int(act.n))
        if isinstance(act, gym.spaces.MultiDiscrete):
            return (
                np.arange(act.nvec.size).reshape(act.nvec.shape) + int(abs(score) * 5)
            ) % act.nvec
        assert isinstance(act, gym.spaces.Box)
        return np.full(act.shape, np.tanh(score), dtype=act.dtype)

    def predict(self, obs: Any) -> Any:
        return self.one(obs)

    def predict_batch(self, batch: Any) -> Any:
        rows = _unstack(batch)
        self.batches.append(len(rows))
        return np.stack([np.asarray(self.one(row)) for row in rows])


def _leaves(obs: Any) -> list[Any]:
    if isinstance(obs, str):
        return [len(obs)]
    if isinstance(obs, dict):
        return [leaf for key in obs for leaf in _leaves(obs[key])]
    if isinstance(obs, tuple):
        return [leaf for item in obs for leaf in _leaves(item)]
    return [obs]


def _unstack(batch: Any) -> list[Any]:
    if isinstance(batch, dict):
        per_key = {key: _unstack(value) for key, value in batch.items()}
        n = len(next(iter(per_key.values())))
        return [{key: rows[i] for key, rows in per_key.items()} for i in range(n)]
    if isinstance(batch, tuple):
        per_item = [_unstack(item) for item in batch]
        return [tuple(rows[i] for rows in per_item) for i in range(len(per_item[0]))]
    return list(batch)


def _samples(space: gym.Space, n: int, seed: int) -> list[Any]:
    space.seed(seed)
    return [space.sample() for _ in range(n)]


SPACES = {
    "cartpole": (gym.make("CartPole-v1").observation_space, gym.spaces.Discrete(2)),
    "box_actions": (
        gym.spaces.Box(-1, 1, (3,), np.float32),
        gym.spaces.Box(-1, 1, (2,), np.float32),
    ),
    "float64_grid": (gym.spaces.Box(-2, 2, (2, 3), np.float64), gym.spaces.Discrete(3, start=-1)),
    "int_box": (gym.spaces.Box(0, 255, (5,), np.uint8), gym.spaces.MultiDiscrete([3, 4])),
    "dict": (
        gym.spaces.Dict(
            {
                "pos": gym.spaces.Box(-1, 1, (2,), np.float32),
                "mode": gym.spaces.Discrete(4),
                "flags": gym.spaces.MultiBinary(3),
            }
        ),
        gym.spaces.Discrete(5),
    ),
    "tuple_with_text": (
        gym.spaces.Tuple((gym.spaces.Text(6), gym.spaces.Box(-1, 1, (2,), np.float32))),
        gym.spaces.Discrete(2),
    ),
}


def _request(spec: core_pb.EnvSpec, env_id: str, rows: Sequence[Any]) -> model_pb.PredictRequest:
    assert spec.observation_space is not None
    return model_pb.PredictRequest(
        context=model_pb.AdapterContext(session_id="s", env_id=env_id, request_id=f"{env_id}:p"),
        observation=spaces.encode_batch(spec.observation_space, list(rows)),
        episode_info=[model_pb.EpisodeInfo(episode_id=f"ep-{i}") for i in range(len(rows))],
    )


async def _grouped(model: Any, spec: core_pb.EnvSpec, groups: list[list[Any]]) -> list[Any]:
    env_ids = [f"e{i}" for i in range(len(groups))]
    await resolve(model, spec, env_ids)
    requests = [_request(spec, e, rows) for e, rows in zip(env_ids, groups, strict=True)]
    return list(await model.grouped_predict(requests))


def _actions(spec: core_pb.EnvSpec, result: Any, rows: int) -> list[Any]:
    if isinstance(result, BaseException):
        raise result
    assert result.response.context.env_id  # the context comes back with the answer
    return list(spaces.decode_batch(spec.action_space, result.response.actions[0], rows))


def _same(mine: Any, direct: Any, act: gym.Space) -> bool:
    mine, direct = np.asarray(mine), np.asarray(direct)
    return mine.shape == direct.shape and np.array_equal(mine.astype(direct.dtype), direct)


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("sizes", [[1] * 6, [2, 1, 3], [1]], ids=["one_row_each", "mixed", "alone"])
@pytest.mark.parametrize("name", sorted(SPACES))
async def test_fused_actions_are_the_policys_on_each_row(
    name: str, sizes: list[int], where: str
) -> None:
    obs_space, act_space = SPACES[name]
    spec = _spec(obs_space, act_space)
    rows = _samples(obs_space, sum(sizes), seed=len(sizes))
    groups, start = [], 0
    for size in sizes:
        groups.append(rows[start : start + size])
        start += size
    policy = Rows(act_space)
    async with endpoint(rt.policy(policy.predict, batched=policy.predict_batch), where) as model:
        results = await _grouped(model, spec, groups)
    got = [
        a
        for result, group in zip(results, groups, strict=True)
        for a in _actions(spec, result, len(group))
    ]
    direct = [policy.one(row) for row in rows]
    assert all(_same(g, d, act_space) for g, d in zip(got, direct, strict=True))
    if where == "local" and len(sizes) > 1:
        assert policy.batches == [sum(sizes)]  # the groups were one call


@pytest.mark.parametrize("where", WHERE)
async def test_a_bad_group_gets_the_plain_predicts_error_and_the_others_their_actions(
    where: str,
) -> None:
    obs_space, act_space = SPACES["cartpole"]
    spec = _spec(obs_space, act_space)
    rows = observations_of(gym.make("CartPole-v1"), 4)
    policy = Rows(act_space)
    async with endpoint(rt.policy(policy.predict, batched=policy.predict_batch), where) as model:
        await resolve(model, spec, ["e0", "e1", "e2", "e3"])
        requests = [_request(spec, f"e{i}", [row]) for i, row in enumerate(rows)]
        short = spaces_pb.SpaceValue(leaves=[requests[2].observation.leaves[0][:-4]])
        requests[2].observation = short
        results = list(await model.grouped_predict(requests))
        with pytest.raises(ModelRpcError) as plain:
            await model.predict(requests[2])
    assert isinstance(results[2], ModelRpcError)
    assert str(results[2]) == str(plain.value)
    assert "length mismatch" in str(results[2])
    for i in (0, 1, 3):
        assert _same(_actions(spec, results[i], 1)[0], policy.one(rows[i]), act_space)


@pytest.mark.parametrize("where", WHERE)
async def test_an_action_that_does_not_fit_fails_its_group_alone(where: str) -> None:
    obs_space, _ = SPACES["box_actions"]
    spec = _spec(obs_space, gym.spaces.Discrete(3))
    rows = [np.full(3, v, np.float32) for v in (0.1, 0.2, 0.9, 0.3)]

    def batch(obs: Any) -> Any:
        return np.where(np.asarray(obs)[:, 0] > 0.5, 1.5, 1.0)  # 1.5: not a Discrete action

    async with endpoint(rt.policy(batched=batch), where) as model:
        results = await _grouped(model, spec, [[row] for row in rows])
        with pytest.raises(ModelRpcError) as plain:
            await model.predict(_request(spec, "e2", rows[2:3]))
    assert isinstance(results[2], ModelRpcError)
    assert str(results[2]) == str(plain.value)  # "lane 0" of its own group, not lane 2
    assert "does not fit the action space" in str(results[2])
    assert [_actions(spec, results[i], 1)[0] for i in (0, 1, 3)] == [1, 1, 1]


async def test_groups_with_other_action_specs_are_each_encoded_with_their_own() -> None:
    obs = gym.spaces.Box(-1, 1, (2,), np.float32)
    spec32 = _spec(obs, gym.spaces.Box(-10, 10, (1,), np.float32))
    spec64 = _spec(obs, gym.spaces.Box(-10, 10, (1,), np.float64))
    rows = [np.array([0.1, 0.2], np.float32), np.array([0.3, 0.4], np.float32)]
    async with endpoint(
        rt.policy(batched=lambda b: np.asarray(b, np.float64)[:, :1] * 3), "served"
    ) as model:
        await resolve(model, spec32, ["a"])
        await resolve(model, spec64, ["b"])
        results = list(
            await model.grouped_predict(
                [_request(spec32, "a", rows[:1]), _request(spec64, "b", rows[1:])]
            )
        )
    (a,) = _actions(spec32, results[0], 1)
    (b,) = _actions(spec64, results[1], 1)
    assert a.dtype == np.float32 and a[0] == np.float32(0.1 * 3)
    assert b.dtype == np.float64 and b[0] == np.float64(np.float32(0.3)) * 3


@pytest.mark.parametrize("name", sorted(SPACES))
def test_joined_decode_and_encode_equal_the_per_group_codec(name: str) -> None:
    obs_space, act_space = SPACES[name]
    spec = _spec(obs_space, act_space)
    assert spec.observation_space is not None
    sizes = [1, 3, 1, 2]
    values = [
        spaces.encode_batch(spec.observation_space, _samples(obs_space, n, seed=n)) for n in sizes
    ]
    joined = decode_joined(spec.observation_space, values, sizes)
    per_group = [
        spaces.decode_stacked(spec.observation_space, v, n)
        for v, n in zip(values, sizes, strict=True)
    ]
    if name == "tuple_with_text":
        assert joined is None  # a Text leaf has no fixed stride: group by group
    else:
        assert _tree_equal(joined, _concat(per_group))
    actions = np.stack([np.asarray(a) for a in _samples(act_space, sum(sizes), seed=1)])
    frames = encode_joined(spec.action_space, actions, sizes)
    assert frames is not None
    start = 0
    for frame, n in zip(frames, sizes, strict=True):
        piece = actions[start : start + n]
        start += n
        assert list(frame.leaves) == list(spaces.encode_stacked(spec.action_space, piece, n).leaves)


def test_the_joined_forms_step_aside_for_what_they_do_not_take() -> None:
    obs_space, act_space = SPACES["dict"]
    spec = _spec(obs_space, act_space)
    assert spec.observation_space is not None
    good = spaces.encode_batch(spec.observation_space, _samples(obs_space, 1, seed=0))
    bad = spaces_pb.SpaceValue(leaves=list(good.leaves)[:-1])
    assert decode_joined(spec.observation_space, [good, bad], [1, 1]) is None
    assert decode_joined(spec.observation_space, [good, good], [1, 2]) is None  # short slab
    out_of_range = spaces_pb.SpaceValue(leaves=list(good.leaves))
    mode = next(i for i, leaf in enumerate(good.leaves) if len(leaf) == 8)
    out_of_range.leaves[mode] = np.int64(9).tobytes()  # Discrete(4)
    with pytest.raises(ProtocolError):
        spaces.decode_stacked(spec.observation_space, out_of_range, 1)
    assert decode_joined(spec.observation_space, [good, out_of_range], [1, 1]) is None
    assert encode_joined(spec.action_space, [1, 2], [1, 1]) is None  # a list: per group
    assert encode_joined(spec.action_space, np.array([1, 2, 3]), [1, 1]) is None  # 3 for 2 rows
    assert encode_joined(spec.action_space, np.array([1, 1.5]), [1, 1]) is None  # not an int


def _concat(parts: list[Any]) -> Any:
    first = parts[0]
    if isinstance(first, dict):
        return {key: _concat([p[key] for p in parts]) for key in first}
    if isinstance(first, tuple):
        return tuple(_concat([p[i] for p in parts]) for i in range(len(first)))
    return np.concatenate(parts)


def _tree_equal(a: Any, b: Any) -> bool:
    if isinstance(b, dict):
        return (
            isinstance(a, dict) and list(a) == list(b) and all(_tree_equal(a[k], b[k]) for k in b)
        )
    if isinstance(b, tuple):
        return isinstance(a, tuple) and all(_tree_equal(x, y) for x, y in zip(a, b, strict=True))
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b) and a.flags.writeable
