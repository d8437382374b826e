"""Child-process entry point: one of our servers for the hostile-client matrix.

Run by ``_targets.py``, not a test module::

    python tests/reliability/_server_proc.py env|model --ready-fd N \
        [--idle-timeout S] [--preface-timeout S]

``env`` serves gymnasium's CartPole-v1 with ``rt.EnvServer``; ``model`` serves
the pole-angle numpy policy of ``_legit.py`` with ``rt.ModelServer``. The
timeouts are passed as ``rt.ServerLimits`` (when that exists) to the server,
which writes its address to ``--ready-fd`` once listening and serves until
SIGTERM.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _limits(args: argparse.Namespace) -> dict[str, Any]:
    import rlmesh_trio as rt

    wanted = {"idle_timeout": args.idle_timeout, "handshake_timeout": args.preface_timeout}
    wanted = {name: value for name, value in wanted.items() if value is not None}
    if not wanted or not hasattr(rt, "ServerLimits"):
        return {}
    return {"limits": rt.ServerLimits(**wanted)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["env", "model"])
    parser.add_argument("--ready-fd", type=int, required=True)
    parser.add_argument("--idle-timeout", type=float)
    parser.add_argument("--preface-timeout", type=float)
    args = parser.parse_args()

    import gymnasium as gym

    import rlmesh_trio as rt
    from tests.reliability._legit import angle_policy

    options = _limits(args)
    if args.kind == "env":
        server: Any = rt.EnvServer(gym.make("CartPole-v1"), "127.0.0.1:0", **options)
    else:
        server = rt.ModelServer(angle_policy, "127.0.0.1:0", **options)
    server.serve(ready_fd=args.ready_fd)


if __name__ == "__main__":
    main()
