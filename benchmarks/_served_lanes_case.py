"""Shape D (issue 33): served lane endpoints stepped as one block vs gymnasium's AsyncVectorEnv.

Two ``rlmesh-trio serve-env CartPole-v1 --lanes 16`` servers (subprocesses),
one block per server in the driver process: per round, one forward pass of
the policy over that server's running lanes and ONE ``StepRequest`` naming
them all (``RemoteEnv.step_lanes``; the servers advertise multi-lane subset
steps). Against it: the hand loop over ``gym.vector.AsyncVectorEnv`` of the
same 32 envs (autoreset disabled, ended lanes reset with their next seed),
with the same policy in the driver. Both sides run one episode per seed, the
same seeds, and must agree episode for episode with each other (seed, steps,
return); rows interleave, ``pairs`` times.

Run from the repository root::

    python benchmarks/_served_lanes_case.py [--pairs 3] [--episodes 2] [--per-lane]

``--per-lane`` adds the old wire shape on the same servers (one request per
lane, every lane in flight: what a server without the capability gets).
For ``hand_loop.py``: :func:`served_block_episodes` runs the served side
over running servers, :func:`lane_servers` starts them, :func:`compare`
runs the whole case.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import trio

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("RLMESH_WORKFLOW_EDITION", "2026.06")

from _servers import STARTUP_TIMEOUT, Server

from rlmesh_trio import RemoteEnv
from rlmesh_trio._protocol import WORKFLOW_EDITION
from rlmesh_trio.testing import spawn_server
from rlmesh_trio.transport.client._remote_lanes import RemoteLaneBlock

__all__ = ["ENV_ID", "LANES", "SERVERS", "compare", "lane_servers", "served_block_episodes"]

ENV_ID = "CartPole-v1"
SERVERS = 2
LANES = 16
TARGET = 2.0  # served block >= this many times AsyncVectorEnv

Policy = Callable[[np.ndarray], np.ndarray]
Episode = tuple[int, int, float]  # (seed, steps, return)
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_policy() -> Policy:
    """The torch MLP 4-256-256-2 on one thread (``_torch_mlp.act_batch``)."""
    from _torch_mlp import act_batch

    return act_batch


@contextlib.contextmanager
def lane_servers(
    servers: int = SERVERS, lanes: int = LANES, env_id: str = ENV_ID
) -> Iterator[list[Server]]:
    """``servers`` ``serve-env <env_id> --lanes <lanes>`` subprocesses, stopped on exit."""
    env = dict(os.environ, PYTHONWARNINGS="ignore", RLMESH_WORKFLOW_EDITION="2026.06")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_REPO, env.get("PYTHONPATH")]))
    started: list[Server] = []
    try:
        for index in range(servers):
            argv = [sys.executable, "-m", "rlmesh_trio.cli", "serve-env", env_id]
            argv += ["--lanes", str(lanes), "--address", "127.0.0.1:0", "--ready-fd", "{READY_FD}"]
            proc = spawn_server(
                argv, what=f"lanes {index}", env=env, cwd=_REPO, startup_timeout=STARTUP_TIMEOUT
            )
            started.append(Server(proc.process, proc.address, f"lanes {index}"))
        yield started
    finally:
        for server in started:
            server.stop()


async def _block(
    address: str,
    seeds: list[int],
    policy: Policy,
    max_steps: int | None,
    per_lane: bool,
    out: list[Episode],
) -> None:
    """One server's lanes as one block until every seed in ``seeds`` ran its episode."""
    env = RemoteEnv(address)
    try:
        info = await env.connect()
        await env.configure(WORKFLOW_EDITION)
        block: Any = env
        if per_lane:  # the old wire shape: one request per lane, every lane in flight
            block = RemoteLaneBlock(env, info)
            block.multi_lane = False
        queue = list(seeds)
        n = min(block.num_lanes, len(queue))
        running = np.arange(n)
        lane_seed = np.array(queue[:n], dtype=np.int64)
        del queue[:n]
        reset = await block.reset_lanes(running, lane_seed.tolist(), [None] * n, 60.0)
        obs = np.array(reset.observations)
        steps = np.zeros(n, dtype=np.int64)
        returns = np.zeros(n, dtype=np.float64)
        while running.size:
            result = await block.step_lanes(running, policy(obs[running]), 60.0)
            steps[running] += 1
            returns[running] += result.rewards
            obs[running] = result.observations
            over = result.terminated | result.truncated
            if max_steps is not None:
                over |= steps[running] >= max_steps
            ended = running[over]
            if not ended.size:
                continue
            out.extend(
                (int(lane_seed[k]), int(steps[k]), float(returns[k])) for k in ended.tolist()
            )
            fresh = ended[: len(queue)]
            if fresh.size:
                lane_seed[fresh] = queue[: fresh.size]
                del queue[: fresh.size]
                steps[fresh], returns[fresh] = 0, 0.0
                again = await block.reset_lanes(
                    fresh, lane_seed[fresh].tolist(), [None] * fresh.size, 60.0
                )
                obs[fresh] = again.observations
            running = np.setdiff1d(running, ended[fresh.size :])
    finally:
        await env.aclose()


def served_block_episodes(
    addresses: Sequence[str],
    seeds: Sequence[int],
    policy: Policy,
    max_steps: int | None = None,
    *,
    per_lane: bool = False,
) -> tuple[list[Episode], float]:
    """Shape D's hand loop: one block per server (seeds dealt round-robin, as ``rt.shard``
    deals them), all in one Trio run. Returns the episodes (seed order) and the wall
    seconds from the first reset to the last step (connects included)."""
    dealt = [list(seeds[i :: len(addresses)]) for i in range(len(addresses))]
    out: list[Episode] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for address, mine in zip(addresses, dealt, strict=True):
                nursery.start_soon(_block, address, mine, policy, max_steps, per_lane, out)

    started = time.perf_counter()
    trio.run(main)
    wall = time.perf_counter() - started
    order = {seed: k for k, seed in enumerate(seeds)}
    return sorted(out, key=lambda e: order[e[0]]), wall


def async_vector_episodes(
    seeds: Sequence[int],
    policy: Policy,
    max_steps: int | None = None,
    *,
    lanes: int = SERVERS * LANES,
    env_id: str = ENV_ID,
) -> tuple[list[Episode], float]:
    """The hand loop over ``AsyncVectorEnv`` (autoreset disabled; ended lanes reset
    with their next seed, idle lanes stepped and ignored). Env start-up not timed."""
    vec = gym.vector.AsyncVectorEnv(
        [lambda: gym.make(env_id)] * lanes, autoreset_mode=gym.vector.AutoresetMode.DISABLED
    )
    try:
        queue = list(seeds)
        lane_seed = np.array(queue[:lanes] + [-1] * max(0, lanes - len(queue)), dtype=np.int64)
        del queue[:lanes]
        active = lane_seed >= 0
        started = time.perf_counter()
        obs, _ = vec.reset(seed=[int(s) if s >= 0 else None for s in lane_seed])
        steps = np.zeros(lanes, dtype=np.int64)
        returns = np.zeros(lanes, dtype=np.float64)
        out: list[Episode] = []
        while active.any():
            obs, rewards, terminated, truncated, _ = vec.step(policy(obs))
            steps[active] += 1
            returns[active] += rewards[active]
            over = (terminated | truncated) & active
            if max_steps is not None:
                over |= active & (steps >= max_steps)
            if not over.any():
                continue
            ended = np.flatnonzero(over)
            out.extend((int(lane_seed[k]), int(steps[k]), float(returns[k])) for k in ended)
            fresh = ended[: len(queue)]
            active[ended[fresh.size :]] = False
            if fresh.size:
                lane_seed[fresh] = queue[: fresh.size]
                del queue[: fresh.size]
                steps[fresh], returns[fresh] = 0, 0.0
                mask = np.zeros(lanes, dtype=bool)
                mask[fresh] = True
                fresh_seeds = [int(lane_seed[k]) if mask[k] else None for k in range(lanes)]
                again, _ = vec.reset(seed=fresh_seeds, options={"reset_mask": mask})
                obs[fresh] = again[fresh]
        wall = time.perf_counter() - started
    finally:
        vec.close()
    order = {seed: k for k, seed in enumerate(seeds)}
    return sorted(out, key=lambda e: order[e[0]]), wall


def compare(
    pairs: int = 3,
    episodes: int = 2,
    *,
    per_lane: bool = False,
    max_steps: int | None = None,
    policy: Policy | None = None,
    report: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """The whole case: servers up, then ``pairs`` interleaved rounds (served block, async
    and, with ``per_lane``, the one-request-per-lane shape). One row per round:
    steps/s and CPU per step (every process of the side) per side, and served/async.
    Raises AssertionError when the sides disagree."""
    policy = policy or default_policy()
    seeds = list(range(SERVERS * LANES * episodes))
    rows: list[dict[str, Any]] = []
    with lane_servers() as servers:
        addresses = [s.address for s in servers]
        for round_no in range(pairs):
            row: dict[str, Any] = {"round": round_no + 1}
            cpu = _cpu(servers)
            served, wall = served_block_episodes(addresses, seeds, policy, max_steps)
            steps = sum(e[1] for e in served)
            row["served"], row["served_cpu_us"] = steps / wall, (_cpu(servers) - cpu) / steps * 1e6
            cpu = _cpu(servers)
            theirs, wall = async_vector_episodes(seeds, policy, max_steps)
            row["async"], row["async_cpu_us"] = steps / wall, (_cpu(servers) - cpu) / steps * 1e6
            if served != theirs:
                raise AssertionError(f"served and async episodes disagree: {served} vs {theirs}")
            if per_lane:
                old, wall = served_block_episodes(
                    addresses, seeds, policy, max_steps, per_lane=True
                )
                row["per_lane"] = sum(e[1] for e in old) / wall
                if old != served:
                    raise AssertionError("one-request-per-lane episodes disagree with the block's")
            row["ratio"] = row["served"] / row["async"]
            rows.append(row)
            report(_format(row))
    best = max(r["ratio"] for r in rows)
    median = sorted(r["ratio"] for r in rows)[len(rows) // 2]
    cpu = sorted(r["async_cpu_us"] / r["served_cpu_us"] for r in rows)[len(rows) // 2]
    report(f"served/async: median {median:.2f}x, best {best:.2f}x (target >= {TARGET}x)")
    report(f"CPU per step, async/served (all processes; load-robust): median {cpu:.2f}x")
    return rows


def _cpu(servers: Sequence[Server]) -> float:
    """CPU seconds so far of this process, the servers, and reaped children (the
    AsyncVectorEnv workers, once closed)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (
        time.process_time()
        + children.ru_utime
        + children.ru_stime
        + sum(s.cpu_seconds() for s in servers)
    )


def _format(row: dict[str, Any]) -> str:
    extra = f"  per-lane {row['per_lane']:8.0f}" if "per_lane" in row else ""
    return (
        f"round {row['round']}: served block {row['served']:8.0f} steps/s "
        f"({row['served_cpu_us']:.0f} us CPU/step)  async {row['async']:8.0f} steps/s "
        f"({row['async_cpu_us']:.0f} us CPU/step)  ratio {row['ratio']:.2f}x{extra}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=2, help="episodes per lane")
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--per-lane", action="store_true")
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    compare(args.pairs, args.episodes, per_lane=args.per_lane, max_steps=args.max_steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
