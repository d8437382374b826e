"""Shape D of ``hand_loop.py``: lane servers in subprocesses, the module in this process.

:func:`lane_servers` starts ``SERVERS`` ``rlmesh-trio serve-env CartPole-v1
--lanes 16`` processes once for the whole benchmark; :func:`served_lanes`
runs one route per server (``rt.shard`` over their addresses) with the
module in the driver. Written on the public API only, so the lead can swap
:func:`served_lanes` for ``_served_lanes_case.py``'s when that lands.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence

import _hand_policy as hp
import _servers
from _hand_measure import Meter, Sample
from _hand_ours import run_routes

import rlmesh_trio as rt

__all__ = ["SERVERS", "lane_servers", "served_lanes"]

SERVERS = 2
LANES_PER_SERVER = hp.LANES // SERVERS


@contextlib.contextmanager
def lane_servers() -> Iterator[list[_servers.Server]]:
    """``SERVERS`` lane servers of ``LANES_PER_SERVER`` CartPole lanes each, stopped on exit."""
    with contextlib.ExitStack() as stack:
        servers = []
        for index in range(SERVERS):
            argv = [sys.executable, "-m", "rlmesh_trio.cli", "serve-env", hp.ENV_ID]
            argv += ["--lanes", str(LANES_PER_SERVER), "--address", "127.0.0.1:0"]
            argv += ["--ready-fd", "{READY_FD}"]
            servers.append(stack.enter_context(_servers._serving(argv, f"lanes {index}")))
        yield servers


def served_lanes(
    servers: Sequence[_servers.Server], episodes: int, max_steps: int | None
) -> Sample:
    """D: one route per lane server, seeds dealt across them, the module here.

    ``max_steps`` (smoke runs) caps episodes on the runtime side: the servers
    keep CartPole's own 500-step cap.
    """
    meter = Meter(server_pids=[server.process.pid for server in servers])
    routes = rt.shard(
        envs=[server.address for server in servers],
        model=hp.MODULE,
        seeds=hp.seeds_for(episodes),
        max_episode_steps=max_steps,
    )
    return run_routes(meter, routes)
