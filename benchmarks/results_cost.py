"""What results cost: recording per frame, and building a 10,000-episode report.

    python benchmarks/results_cost.py [--steps 600] [--episodes 10000]

Recording: one in-process CartPole route (render_mode="rgb_array", 600x400
frames) run with and without ``Recording(first=...)`` filming every episode;
the difference per filmed frame, in wall and process CPU time, next to the
parts alone (render, AV1 encode, PNG round trip as a remote env's frame takes).

Report: a synthetic run of 10,000 episodes over 8 routes (returns drawn from
a seeded normal); the time of the statistics block, the JSON report, the
bundle (zip) and the HTML report.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import rlmesh_trio as rt
from rlmesh_trio.results import Recording, statistics_block, write_bundle, write_html
from rlmesh_trio.results._video import VideoWriter, decode_png


def lean_policy(obs: Any) -> int:
    return int(np.asarray(obs).reshape(-1)[2] > 0)


def _timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    value = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, value


def _route_run(steps: int, record: bool) -> tuple[float, float, int]:
    env = gym.make("CartPole-v1", render_mode="rgb_array", max_episode_steps=100)
    routes = [rt.Route(env=env, model=lean_policy, seeds=range(max(1, steps // 100)))]
    with Recording(first=10_000 if record else 0) as recording:
        if record:
            routes = recording.apply(routes)
        wall, cpu, report = _timed(lambda: rt.run(routes))
        frames = sum(ref.frame_count for refs in recording.media.values() for ref in refs)
    return wall, cpu, frames if record else report.total_steps


def recording_cost(steps: int) -> None:
    _route_run(100, record=True)  # warm up imports and the encoder
    base_wall, base_cpu, base_steps = _route_run(steps, record=False)
    rec_wall, rec_cpu, frames = _route_run(steps, record=True)
    print(f"route of {base_steps} steps: {base_wall:.2f}s wall, {base_cpu:.2f}s CPU unrecorded")
    print(f"  recorded ({frames} frames): {rec_wall:.2f}s wall, {rec_cpu:.2f}s CPU")
    per_wall = (rec_wall - base_wall) / frames * 1000
    per_cpu = (rec_cpu - base_cpu) / frames * 1000
    print(f"  recording cost per frame: {per_wall:.2f} ms wall, {per_cpu:.2f} ms CPU")
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    n = 200
    render_s, _, _ = _timed(lambda: [env.render() for _ in range(n)])
    with tempfile.TemporaryDirectory() as tmp:
        writer = VideoWriter(Path(tmp) / "v.mp4")
        frames_list = [np.roll(frame, i, axis=1) for i in range(n)]
        encode_s, _, _ = _timed(lambda: ([writer.add(f) for f in frames_list], writer.finish()))
    from rlmesh_trio._envhost._png import encode_png

    png_s, _, _ = _timed(lambda: [decode_png(encode_png(frame)) for _ in range(50)])
    print(
        f"  parts per frame: render {render_s / n * 1000:.2f} ms, AV1 encode "
        f"{encode_s / n * 1000:.2f} ms, PNG encode+decode {png_s / 50 * 1000:.2f} ms"
    )


def synthetic_report(episodes: int, routes: int = 8) -> rt.RunReport:
    rng = np.random.default_rng(0)
    outcomes = []
    per_route = episodes // routes
    for r in range(routes):
        eps = tuple(
            rt.EpisodeResult(
                index=i,
                episode_id=f"r{r}-e{i}",
                env_index=0,
                seed=r * per_route + i,
                steps=int(steps),
                reward=float(steps),
                terminated=True,
                truncated=False,
                success=None,
                duration_s=float(steps) / 2000.0,
            )
            for i, steps in enumerate(rng.normal(200 + 20 * r, 60, per_route).clip(1, 500))
        )
        route_report = rt.RouteReport(
            route_id=f"route-{r}",
            session_id=f"route-{r}",
            env_id="CartPole-v1",
            total_steps=sum(e.steps for e in eps),
            total_episodes=len(eps),
            episodes=eps,
        )
        outcomes.append(
            rt.RouteOutcome(f"route-{r}", "CartPole-v1", "policy", "completed", None, route_report)
        )
    return rt.RunReport(routes=tuple(outcomes), wall_s=60.0)


def report_cost(episodes: int) -> None:
    report = synthetic_report(episodes)
    stats_s, _, _ = _timed(lambda: statistics_block(report))
    json_s, _, _ = _timed(report.to_json)
    with tempfile.TemporaryDirectory() as tmp:
        bundle_s, _, _ = _timed(lambda: write_bundle(report, Path(tmp) / "b.zip"))
        html_s, _, page = _timed(lambda: write_html(report, Path(tmp) / "r.html"))
        size = page.stat().st_size / 1e6
    print(
        f"report of {report.total_episodes:,} episodes over {len(report.routes)} routes: "
        f"statistics {stats_s:.2f}s, JSON {json_s:.2f}s, bundle {bundle_s:.2f}s, "
        f"HTML {html_s:.2f}s ({size:.1f} MB)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--episodes", type=int, default=10_000)
    args = parser.parse_args()
    recording_cost(args.steps)
    report_cost(args.episodes)


if __name__ == "__main__":
    main()
