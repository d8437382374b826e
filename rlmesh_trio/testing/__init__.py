"""Fakes for Trio test suites: drive a route with no network and no real env or model.

* :class:`ScriptedEnv` -- a ``RuntimeEnv`` that plays episodes of scripted
  lengths and rewards, single env, NEXT_STEP vector env or ``subset_step``
  lanes, with delays, failures (error or hang) at the n-th call and stale
  completions.
* :class:`ScriptedModel` -- a ``RuntimeModel`` with fixed actions, multi-frame
  chunks, delays, failures, wrong contexts, empty answers and a release that
  never returns.
* :func:`spawn_server` -- starts a server subprocess (``rlmesh-trio serve-env
  ... --ready-fd {READY_FD}``, or rlmesh's) and returns its reported address
  as a :class:`ServerProcess` (a context manager that stops it).
* :class:`RecordingHooks` -- records every hook event in order; can fail an
  event hook or a transform on request.

Example::

    from rlmesh_trio import RouteDriver, RouteSpec
    from rlmesh_trio.testing import RecordingHooks, ScriptedEnv, ScriptedModel

    async def test_three_episodes():
        hooks = RecordingHooks()
        spec = RouteSpec(route_id="r0", session_id="s", max_episodes=3)
        report = await RouteDriver(spec, ScriptedEnv(episode_lengths=4), ScriptedModel(),
                                   hooks).run()
        assert report.total_episodes == 3 and report.total_steps == 12

The fakes build valid wire messages for a ``Box((2,), float32)`` observation
space and a ``Discrete(2)`` (INT64) action space (:func:`scripted_contract`).
"""

from ._env import ScriptedEnv, scripted_contract
from ._hooks import HookFailure, RecordingHooks
from ._model import ScriptedModel
from ._procs import READY_FD, ServerProcess, spawn_server

__all__ = [
    "READY_FD",
    "HookFailure",
    "RecordingHooks",
    "ScriptedEnv",
    "ScriptedModel",
    "ServerProcess",
    "scripted_contract",
    "spawn_server",
]
