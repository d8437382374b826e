"""Child-process entry point: serve an env or a model with the real rlmesh 0.1.0 package.

Run by ``tests/_rlmesh_procs.py``; not a test module. Writes the bound
address (one line) to ``--ready-fd`` once the server accepts connections.

Kinds:
  env     a gymnasium env (``--env-id``; or ``failing``: raises on step 4, ``framed``:
          renders a 4x6 RGB frame) served by ``rlmesh.EnvServer``; ``--lanes N``
          serves N copies as lanes; ``--vector N`` serves a SyncVectorEnv (NEXT_STEP)
  model   ``rlmesh.numpy.Model(policy).serve(...)``; ``--policy`` picks a policy below
"""

from __future__ import annotations

import argparse
import os
import threading
import time
import warnings
from typing import Any

warnings.filterwarnings("ignore")  # the unpinned-edition warning of rlmesh


def cartpole_policy(obs: Any) -> Any:
    """Deterministic CartPole policy: push toward the pole's lean (works on one row or a batch)."""
    import numpy as np

    arr = np.asarray(obs, dtype=np.float64)
    if arr.ndim == 1:
        return int(arr[2] + 0.5 * arr[3] > 0)
    return [int(row[2] + 0.5 * row[3] > 0) for row in arr]


def angle_policy(obs: Any) -> Any:
    """A weaker deterministic CartPole policy (pole angle only): episode lengths vary by seed."""
    import numpy as np

    arr = np.asarray(obs, dtype=np.float64)
    if arr.ndim == 1:
        return int(arr[2] > 0)
    return [int(row[2] > 0) for row in arr]


def failing_policy(obs: Any) -> Any:
    raise RuntimeError("policy exploded on purpose")


POLICIES = {"angle": angle_policy, "cartpole": cartpole_policy, "failing": failing_policy}


class FailingEnv:
    """CartPole whose step raises after a few steps (an env exception -> INTERNAL)."""

    def __init__(self, fail_after: int = 3) -> None:
        import gymnasium as gym

        self._env = gym.make("CartPole-v1")
        self.observation_space = self._env.observation_space
        self.action_space = self._env.action_space
        self.metadata = dict(self._env.metadata)
        self.render_mode = None
        self.spec = None
        self._steps = 0
        self._fail_after = fail_after

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        self._steps = 0
        return self._env.reset(seed=seed, options=options)

    def step(self, action: Any) -> Any:
        self._steps += 1
        if self._steps > self._fail_after:
            raise RuntimeError("injected failure")
        return self._env.step(action)

    def close(self) -> None:
        self._env.close()


class FramedEnv(FailingEnv):
    """CartPole with an ``rgb_array`` render that needs no pygame: a small gradient image."""

    def __init__(self) -> None:
        super().__init__(fail_after=10**9)
        self.render_mode = "rgb_array"

    def render(self) -> Any:
        import numpy as np

        return np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)


def _make_env(env_id: str) -> Any:
    import gymnasium as gym

    if env_id == "failing":
        return FailingEnv()
    if env_id == "framed":
        return FramedEnv()
    return gym.make(env_id)


def _listening_tcp_ports() -> list[int]:
    """TCP ports this process listens on (Linux /proc: the model server does not report one)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[len("socket:[") : -1])
    ports = []
    with open("/proc/self/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A = LISTEN
                ports.append(int(fields[1].split(":")[1], 16))
    return ports


def _announce(fd: int, address: str) -> None:
    with os.fdopen(fd, "w") as ready:
        ready.write(address + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["env", "model"])
    parser.add_argument("--ready-fd", type=int, required=True)
    parser.add_argument("--env-id", default="CartPole-v1")
    parser.add_argument("--lanes", type=int, default=0)
    parser.add_argument("--vector", type=int, default=0)
    parser.add_argument("--policy", default="cartpole", choices=sorted(POLICIES))
    parser.add_argument("--allow-shutdown", action="store_true")
    args = parser.parse_args()

    import rlmesh

    options = rlmesh.ServeOptions(allow_remote_shutdown=args.allow_shutdown)
    if args.kind == "env":
        if args.vector:
            import gymnasium as gym

            env: Any = gym.vector.SyncVectorEnv(
                [lambda: gym.make(args.env_id) for _ in range(args.vector)],
                autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP,
            )
        elif args.lanes:
            env = [_make_env(args.env_id) for _ in range(args.lanes)]
        else:
            env = _make_env(args.env_id)
        server = rlmesh.EnvServer(env, "127.0.0.1:0", options=options)
        server.start()
        _announce(args.ready_fd, server.address)
        server.wait()
        return

    import rlmesh.numpy as rnp

    model = rnp.Model(POLICIES[args.policy])

    def watch() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ports = _listening_tcp_ports()
            if ports:
                _announce(args.ready_fd, f"tcp://127.0.0.1:{ports[0]}")
                return
            time.sleep(0.02)  # rlmesh's Model.serve announces nothing: poll /proc
        os._exit(3)

    threading.Thread(target=watch, daemon=True).start()
    model.serve("127.0.0.1:0", options=options)


if __name__ == "__main__":
    main()
