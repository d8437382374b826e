"""Episode bookkeeping on its own: seeds and trials in start order, completion matching."""

from __future__ import annotations

from typing import Any

from rlmesh_trio import RouteSpec
from rlmesh_trio._protocol import env_pb
from rlmesh_trio.runtime._episodes import EpisodeBook


def _clock() -> float:
    return 0.0


def book_for(**fields: Any) -> EpisodeBook:
    return EpisodeBook(RouteSpec(route_id="r", session_id="s", **fields), _clock)


def test_seeds_and_trials_follow_start_order_across_lanes() -> None:
    book = book_for(seeds=(7, 8, 9), trial_index_base=10)
    lanes = book.open_lanes(2, env_owns_resets=False, trial_option=True)
    book.start(lanes[1], auto=False)
    book.start(lanes[0], auto=False)
    assert [(lane.seed, lane.trial) for lane in lanes] == [(8, 11), (7, 10)]
    assert book.reset_options(lanes[0]) is not None
    book.start(lanes[1], auto=True)
    assert (lanes[1].seed, lanes[1].trial, book.started) == (9, 12, 3)
    assert not book.may_start()


def test_an_env_that_owns_resets_gets_no_seeds_trials_or_options() -> None:
    book = book_for(max_episodes=2)
    (lane,) = book.open_lanes(1, env_owns_resets=True, trial_option=True)
    book.start(lane, auto=False)
    assert (lane.seed, lane.trial, book.reset_options(lane)) == (None, None, None)


def test_completions_match_only_the_running_episode_of_their_lane() -> None:
    book = book_for(max_episodes=1)
    (lane,) = book.open_lanes(1, env_owns_resets=False, trial_option=False)
    book.start(lane, auto=False)
    stale = env_pb.EpisodeMetadata(episode_id="not-ours", env_index=0)
    elsewhere = env_pb.EpisodeMetadata(episode_id=lane.episode_id, env_index=3)
    ours = env_pb.EpisodeMetadata(episode_id=lane.episode_id, env_index=0, step_count=4)
    assert book.claim(stale) is None and book.claim(elsewhere) is None
    assert book.claim(ours) is lane
    result = book.finish(lane, ours)
    assert (result.steps, result.trial, lane.active) == (4, 0, False)
    assert book.claim(ours) is None  # finished: a repeat is stale
    assert book.budget_spent()


def test_runtime_truncation_caps_steps_then_seconds() -> None:
    book = book_for(max_episode_steps=3, max_episode_seconds=2.0)
    (lane,) = book.open_lanes(1, env_owns_resets=False, trial_option=False)
    book.start(lane, auto=False)
    assert book.truncation_cap(lane, now=1.0) is None
    assert book.truncation_cap(lane, now=2.0) == "the time cap (2.0s)"
    lane.steps = 3
    assert book.truncation_cap(lane, now=0.0) == "the step cap (3)"
    result = book.finish(lane, None)
    assert result.truncated and not result.terminated and result.steps == 3
