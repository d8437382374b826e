"""rlmesh 0.1.0's own clients drive our EnvServer (and agree with rlmesh's own server)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import trio
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from rlmesh_trio.transport._serve import serve_env

from ._envhost_envs import RichEnv, TextEnv

rlmesh = pytest.importorskip("rlmesh")
rlmesh_numpy = pytest.importorskip("rlmesh.numpy")

pytestmark = pytest.mark.interop

SEEDS = [1, 2, 3, 4]


def lean_policy(obs: Any) -> int:
    """Deterministic CartPole policy: push toward the pole's lean."""
    return int(np.asarray(obs).reshape(-1)[2] > 0)


def batch_lean_policy(obs: Any) -> Any:
    """The same policy over a batch of observations (a vector env predicts per batch)."""
    return (np.asarray(obs)[:, 2] > 0).astype(np.int64)


def episodes_of(result: Any) -> list[tuple[Any, int, float, bool, bool]]:
    return [(e.seed, e.steps, e.reward, e.terminated, e.truncated) for e in result.episodes]


@contextmanager
def rlmesh_server(env: Any) -> Iterator[str]:
    """rlmesh 0.1.0's own EnvServer on a background thread."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        server = rlmesh.EnvServer(env, "127.0.0.1:0")
        server.start()
    try:
        yield server.address
    finally:
        server.shutdown()
        server.wait(10)


async def in_thread(fn: Callable[[], Any]) -> Any:
    # rlmesh's clients block; our server runs in this test's Trio loop.
    return await trio.to_thread.run_sync(fn)


async def test_remote_env_drives_cartpole() -> None:
    reference = gym.make("CartPole-v1")
    expected_obs, _ = reference.reset(seed=1)
    async with serve_env(gym.make("CartPole-v1"), "127.0.0.1:0") as server:

        def client() -> tuple[Any, int, float]:
            env = rlmesh.RemoteEnv(server.address)
            assert env.metadata["render_fps"] == 50
            obs, _info = env.reset(seed=1)
            first = np.asarray(obs)
            total, steps = 0.0, 0
            while True:
                steps += 1
                _obs, reward, terminated, truncated, _ = env.step(1)
                total += reward
                if terminated or truncated:
                    break
            env.close()
            return first, steps, total

        first, steps, total = await in_thread(client)
    np.testing.assert_array_equal(first, expected_obs)
    assert (steps, total) == (9, 9.0)


async def test_remote_env_dict_and_text_spaces() -> None:
    async with serve_env(RichEnv(), "127.0.0.1:0") as server:

        def dict_client() -> tuple[Any, Any]:
            env = rlmesh.RemoteEnv(server.address)
            obs, _ = env.reset(seed=3)
            after = env.step({"move": np.array([0.1, 0.2], np.float32), "say": "yo"})
            env.close()
            return obs, after

        obs, (obs2, reward, terminated, _truncated, _info) = await in_thread(dict_client)
    assert obs["text"] == "héllo" and obs["count"] == 0
    np.testing.assert_array_equal(np.asarray(obs["zpos"]), np.array([0.5, -0.5], np.float32))
    assert obs2["text"] == "yo" and obs2["count"] == 1 and reward == 1.0 and not terminated

    async with serve_env(TextEnv(), "127.0.0.1:0") as server:

        def text_client() -> tuple[Any, Any]:
            env = rlmesh.RemoteEnv(server.address)
            obs, _ = env.reset()
            stepped = env.step("bye")
            env.close()
            return obs, stepped

        obs, (obs2, reward, terminated, _t, _i) = await in_thread(text_client)
    assert (obs, obs2, reward, terminated) == ("start", "BYE", 3.0, True)


async def test_native_run_matches_rlmesh_own_server() -> None:
    with rlmesh_server(gym.make("CartPole-v1")) as address:
        theirs = rlmesh.run(rlmesh_numpy.Model(lean_policy), address, seeds=SEEDS)
    async with serve_env(gym.make("CartPole-v1"), "127.0.0.1:0") as server:
        ours = await in_thread(
            lambda: rlmesh.run(rlmesh_numpy.Model(lean_policy), server.address, seeds=SEEDS)
        )
    assert episodes_of(ours) == episodes_of(theirs)
    assert [e.seed for e in ours.episodes] == SEEDS


async def test_native_run_max_episode_steps_interrupts_cleanly() -> None:
    # The runtime truncates itself and resets: our server sees interrupted episodes.
    async with serve_env(gym.make("CartPole-v1"), "127.0.0.1:0") as server:
        result = await in_thread(
            lambda: rlmesh.run(
                rlmesh_numpy.Model(lean_policy),
                server.address,
                seeds=SEEDS,
                max_episode_steps=10,
                close_env=True,
            )
        )
    assert [(e.steps, e.truncated) for e in result.episodes] == [
        (min(10, steps), steps > 10) for steps in (51, 35, 36, 25)
    ]


async def test_lanes_endpoint_matches_rlmesh_own_lanes() -> None:
    seeds = [5, 6, 7, 8, 9, 10]
    with rlmesh_server([gym.make("CartPole-v1") for _ in range(3)]) as address:
        theirs = rlmesh.run(rlmesh_numpy.Model(lean_policy), address, seeds=seeds)
    async with serve_env([gym.make("CartPole-v1") for _ in range(3)], "127.0.0.1:0") as server:
        ours = await in_thread(
            lambda: rlmesh.run(rlmesh_numpy.Model(lean_policy), server.address, seeds=seeds)
        )
    # Lanes finish in any order; seed for seed, the episodes agree.
    assert sorted(episodes_of(ours), key=str) == sorted(episodes_of(theirs), key=str)
    assert sorted(e.seed for e in ours.episodes) == seeds


def _seeded_vector() -> SyncVectorEnv:
    venv = SyncVectorEnv(
        [lambda: gym.make("CartPole-v1") for _ in range(2)], autoreset_mode=AutoresetMode.NEXT_STEP
    )
    venv.reset(seed=11)  # later unseeded resets continue from here, identically on both sides
    return venv


async def test_vector_next_step_matches_rlmesh_own_vector_server() -> None:
    with rlmesh_server(_seeded_vector()) as address:
        theirs = rlmesh.run(rlmesh_numpy.Model(batch_lean_policy), address, episodes=6)
    async with serve_env(_seeded_vector(), "127.0.0.1:0") as server:
        ours = await in_thread(
            lambda: rlmesh.run(rlmesh_numpy.Model(batch_lean_policy), server.address, episodes=6)
        )
    assert len(ours.episodes) == 6
    assert sorted(episodes_of(ours), key=str) == sorted(episodes_of(theirs), key=str)


SERVE_SCRIPT = textwrap.dedent(
    """
    import sys
    import gymnasium as gym
    from rlmesh_trio.transport._env_server import EnvServer
    EnvServer(gym.make("CartPole-v1"), "127.0.0.1:0").serve(ready_fd=int(sys.argv[1]))
    """
)


def test_blocking_serve_in_a_subprocess_with_ready_fd() -> None:
    read_fd, write_fd = os.pipe()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE_SCRIPT, str(write_fd)],
        pass_fds=(write_fd,),
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    os.close(write_fd)
    try:
        with os.fdopen(read_fd) as ready:
            line = ready.readline().strip()
        assert line.startswith("tcp://127.0.0.1:")
        result = rlmesh.run(rlmesh_numpy.Model(lean_policy), line, seeds=[1, 2])
        assert [e.steps for e in result.episodes] == [51, 35]
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=20)
        assert proc.returncode == 0, err.decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
