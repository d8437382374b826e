"""Episode video: frames from render() or image observations, best-effort, only where asked."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import av
import gymnasium as gym
import numpy as np
import pytest

import rlmesh_trio as rt
from rlmesh_trio.orchestrator._route import route_hooks
from rlmesh_trio.results import Recording
from rlmesh_trio.results._video import VideoWriter, as_rgb_frame, decode_png

from .._results_envs import BrokenRender, PixelEnv, first_action, lean_policy


def _probe(path: Path) -> tuple[int, int, int, float]:
    """(decoded frames, width, height, duration in seconds) of an mp4."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = sum(1 for _ in container.decode(stream))
        duration = float(container.duration or 0) / av.time_base
        return frames, stream.width, stream.height, duration


def _cartpole(steps: int = 12) -> gym.Env[Any, Any]:
    return gym.make("CartPole-v1", render_mode="rgb_array", max_episode_steps=steps)


def test_writer_encodes_frames_of_any_shape(tmp_path: Path) -> None:
    writer = VideoWriter(tmp_path / "v.mp4", fps=10)
    for i in range(5):
        writer.add(np.full((15, 21, 3), i * 40, np.uint8))  # odd sizes are padded
    assert writer.finish() == 5
    assert _probe(tmp_path / "v.mp4")[:3] == (5, 22, 16)
    assert VideoWriter(tmp_path / "none.mp4").finish() == 0
    assert as_rgb_frame(np.zeros((4, 4), np.float32)).shape == (4, 4, 3)  # type: ignore[union-attr]
    assert as_rgb_frame(np.zeros((4,), np.uint8)) is None


def test_png_decode_matches_our_encoder() -> None:
    from rlmesh_trio._envhost._png import encode_png

    frame = np.random.default_rng(0).integers(0, 255, (9, 7, 3), dtype=np.uint8)
    assert np.array_equal(decode_png(encode_png(frame)), frame)
    with pytest.raises(ValueError):
        decode_png(b"not a png")


def test_render_frames_of_the_first_episodes() -> None:
    with Recording(first=2) as recording:
        routes = recording.apply([rt.Route(env=_cartpole(), model=lean_policy, seeds=[1, 2, 3])])
        report = rt.run(routes)
        assert sorted(recording.media) == [("route-0", 0), ("route-0", 1)]
        for ep in report.episodes[:2]:
            (ref,) = recording.media[("route-0", ep.index)]
            assert (ref.camera, ref.frame_count, ref.width, ref.height) == (
                "render",
                ep.steps,
                600,
                400,
            )
            frames, width, height, duration = _probe(ref.source)
            assert (frames, width, height) == (ep.steps, 600, 400) and duration > 0


def test_record_seeds_picks_episodes_and_routes() -> None:
    recording = Recording(seeds=[4])
    routes = recording.apply(
        rt.shard(envs=[_cartpole(), _cartpole()], model=lean_policy, seeds=[1, 2, 3, 4])
    )
    # Only the route that will see seed 4 records; the other runs without any added hook.
    assert routes[0].hooks is None and routes[1].hooks is not None
    assert route_hooks(None, routes[0], env=None) is None
    rt.run(routes)
    assert list(recording.media) == [("route-1", 1)]
    recording.close()
    assert not recording.directory.exists()


def test_image_observation_leaf_is_filmed() -> None:
    with Recording(first=1) as recording:
        rt.run(recording.apply([rt.Route(env=PixelEnv(length=6), model=first_action, seeds=[0])]))
        (ref,) = recording.media[("route-0", 0)]
        assert (ref.camera, ref.frame_count, ref.width, ref.height) == ("observation", 6, 24, 16)
        assert _probe(ref.source)[0] == 6


def test_failing_render_drops_that_episode_only(caplog: pytest.LogCaptureFixture) -> None:
    env = BrokenRender(_cartpole(steps=10), fail_at=5)
    with Recording(first=3) as recording, caplog.at_level(logging.WARNING):
        report = rt.run(recording.apply([rt.Route(env=env, model=lean_policy, seeds=[0, 1, 2])]))
        assert report.ok and report.total_episodes == 3
        assert sorted(recording.media) == [("route-0", 1), ("route-0", 2)]
    assert "episode 0: recording dropped: RuntimeError: render blew up" in caplog.text


def test_render_over_the_wire() -> None:
    if not callable(getattr(rt.RemoteEnv, "render", None)):
        pytest.skip("RemoteEnv has no render() on this branch")
    import trio

    async def main() -> tuple[rt.RunReport, Recording]:
        recording = Recording(first=1)
        async with rt.serve_env(_cartpole(steps=8), "127.0.0.1:0") as server:
            routes = recording.apply([rt.Route(env=server.address, model=lean_policy, seeds=[5])])
            return await rt.run_routes(routes), recording

    report, recording = trio.run(main)
    with recording:
        (ref,) = recording.media[("route-0", 0)]
        assert (ref.camera, ref.frame_count, ref.width) == ("render", report.total_steps, 600)
        assert _probe(ref.source)[0] == report.total_steps


def test_a_failing_render_over_the_wire_drops_that_episode_and_the_route_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import trio

    async def main() -> tuple[rt.RunReport, Recording]:
        recording = Recording(first=3)
        env = BrokenRender(_cartpole(steps=10), fail_at=5)
        async with rt.serve_env(env, "127.0.0.1:0") as server:
            route = rt.Route(env=server.address, model=lean_policy, seeds=[0, 1, 2])
            return await rt.run_routes(recording.apply([route])), recording

    with caplog.at_level(logging.WARNING):
        report, recording = trio.run(main)
    with recording:
        assert report.ok and report.total_episodes == 3  # the session survived the failure
        assert sorted(recording.media) == [("route-0", 1), ("route-0", 2)]
    assert "episode 0: recording dropped" in caplog.text
    assert "render blew up" in caplog.text


def test_route_hooks_run_after_the_shared_ones_on_their_route_only() -> None:
    from rlmesh_trio.testing import RecordingHooks, ScriptedEnv, ScriptedModel

    shared, own = RecordingHooks(), RecordingHooks()
    seen_env: list[Any] = []

    def factory(env: Any) -> rt.RuntimeHooks:
        seen_env.append(env)
        return own

    scripted = ScriptedEnv(episode_lengths=2)
    routes = [
        rt.Route(env=scripted, model=ScriptedModel(), episodes=1, route_id="a", hooks=factory),
        rt.Route(env=ScriptedEnv(episode_lengths=2), model=ScriptedModel(), episodes=1),
    ]
    rt.run(routes, hooks=shared)
    assert seen_env == [scripted]  # the factory got the route's resolved env
    assert {e.route_id for _, e in own.events} == {"a"}
    assert {e.route_id for _, e in shared.events} == {"a", "route-1"}
