"""What one step costs inside our env hosts, with no transport in the way.

Steps a 4-lane ``LaneHost`` (four CartPole envs) and a 4-lane ``VectorHost``
(a ``SyncVectorEnv``) through ``EnvHost.handle`` in this process: decode,
env step, encode and episode bookkeeping, exactly what a served step pays on
the server thread. Use it to compare the hosts' per-step cost before and
after a change (run it from each checkout, a few times: a shared machine's
noise is larger than a method call)::

    python benchmarks/env_host_step.py

Prints the best of 5 timed loops of 2000 steps, in microseconds per step.
"""

from __future__ import annotations

import struct
import time
import warnings
from typing import Any

import gymnasium as gym

from rlmesh_trio._envhost import EnvHost, make_host
from rlmesh_trio._protocol import env_pb, spaces_pb

LANES = 4
STEPS = 2000
REPEATS = 5


def cartpole() -> gym.Env[Any, Any]:
    return gym.make("CartPole-v1")


def per_step_us(host: EnvHost) -> float:
    """Best-of-REPEATS microseconds per whole-width step (finished lanes keep stepping)."""
    host.handle(env_pb.JoinRequest(reset=env_pb.ResetRequest()))
    action = spaces_pb.SpaceValue(leaves=[struct.pack("<q", 0) * LANES])
    request = env_pb.JoinRequest(step=env_pb.StepRequest(action=action))
    best = float("inf")
    for _ in range(REPEATS):
        started = time.perf_counter()
        for _ in range(STEPS):
            host.handle(request)
        best = min(best, time.perf_counter() - started)
    return best / STEPS * 1e6


def main() -> None:
    # CartPole warns on every step past the end of an episode; the cost is what we time.
    warnings.filterwarnings("ignore")
    lanes = make_host([cartpole() for _ in range(LANES)])
    vector = make_host(gym.vector.SyncVectorEnv([cartpole] * LANES))
    print(f"lanes  ({LANES} envs):    {per_step_us(lanes):7.1f} us/step")
    print(f"vector ({LANES} lanes):   {per_step_us(vector):7.1f} us/step")


if __name__ == "__main__":
    main()
