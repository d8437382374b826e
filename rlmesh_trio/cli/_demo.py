"""The embedded demo: CartPole env servers and a built-in policy server, all on loopback."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import Any

import attrs
import gymnasium

from ..hooks import RichProgress
from ..inprocess._demo_policy import CARTPOLE_POLICY
from ..orchestrator._route import Route
from ..orchestrator._run import run_routes
from ..report._report import RunReport
from ..runtime._hooks import HookChain
from ..transport.server._env_server import serve_env
from ..transport.server._model_server import serve_model

__all__ = ["DEMO_ENV", "DEMO_POLICY", "run_demo"]

#: What the demo's routes are labelled with (not their loopback address:port, which
#: changes every run): two demo runs then share (model, env, task) keys in a bundle.
DEMO_ENV = "CartPole-v1"
DEMO_POLICY = "cartpole_policy"


async def run_demo(
    n_routes: int, episodes: int, progress: bool, results: Any = None, dashboard: Any = None
) -> RunReport:
    """Start ``n_routes`` env servers and one model server in this Trio run; evaluate; stop them.

    ``results`` (the CLI's results options) films episodes: the env servers
    then render ``rgb_array`` frames, fetched by the Render request.
    ``dashboard``: a started ``Dashboard`` that watches the run too.
    """
    filming = results is not None and results.recording is not None
    async with AsyncExitStack() as stack:
        model = await stack.enter_async_context(serve_model(CARTPOLE_POLICY, "127.0.0.1:0"))
        env_addresses = []
        for _ in range(n_routes):
            server = await stack.enter_async_context(
                serve_env(
                    gymnasium.make(DEMO_ENV, render_mode="rgb_array" if filming else None),
                    "127.0.0.1:0",
                )
            )
            env_addresses.append(server.address)
        routes = [
            Route(
                env=address,
                model=model.address,
                seeds=range(i * episodes, (i + 1) * episodes),
                route_id=f"cartpole-{i}",
            )
            for i, address in enumerate(env_addresses)
        ]
        if filming:
            routes = results.apply(routes)
        watchers: list[Any] = []
        if dashboard is not None:
            dashboard.plan(routes)
            watchers.append(dashboard)
        if not progress:
            return _labelled(
                await run_routes(routes, hooks=HookChain(watchers) if watchers else None)
            )
        with RichProgress(routes, transient=True) as bars:
            return _labelled(await run_routes(routes, hooks=HookChain([bars, *watchers])))
    raise AssertionError("unreachable")


def _labelled(report: RunReport) -> RunReport:
    """The report with each route's env and model named by env id and policy name."""
    routes = tuple(attrs.evolve(o, env=DEMO_ENV, model=DEMO_POLICY) for o in report.routes)
    return attrs.evolve(report, routes=routes)
