"""Large values print as counts, not contents: a report of many episodes is one short line."""

from __future__ import annotations

import gymnasium as gym

import rlmesh_trio as rt


def _policy(obs: object) -> int:
    return 0


def test_run_report_route_outcome_and_route_report_repr_counts() -> None:
    routes = rt.shard(
        envs=[gym.make("CartPole-v1"), gym.make("CartPole-v1")],
        model=_policy,
        seeds=range(6),
    )
    report = rt.run(routes)
    text = repr(report)
    assert text.startswith("RunReport(routes=2 (completed=2), episodes=6, steps=")
    assert "EpisodeResult" not in text and "TelemetryRow" not in text
    outcome = report.routes[0]
    assert repr(outcome).startswith(
        f"RouteOutcome(route_id={outcome.route_id!r}, status='completed', episodes=3, steps="
    )
    assert "error=None" in repr(outcome)
    assert outcome.report is not None
    route_text = repr(outcome.report)
    assert route_text.startswith(f"RouteReport(route_id={outcome.route_id!r}, env_id=")
    assert "episodes=3" in route_text and "telemetry_rows=" in route_text
    assert len(text) < 200 and len(route_text) < 200
