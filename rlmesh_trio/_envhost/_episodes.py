"""Episode bookkeeping for one env endpoint: the ids the runtime pushes, and what ended.

The runtime is the only authority on episode ids (protocol notes §4.6): a
lane adopts the id pushed with its reset (or with its NEXT_STEP roll) and
every record of that episode echoes it. Records leave in three ways:

* a step that reports ``terminated``/``truncated`` completes the lane's episode
  (``final_info`` attached by the caller);
* a reset of a lane that is still running *interrupts* it (``truncated``, no
  ``final_info``); interrupted records wait in a small buffer (at most 100, the
  oldest dropped first) for the next step response or for Close;
* Close finalises every running episode as truncated, after the buffered ones.

Thread safety: lanes of one endpoint are stepped from several worker threads
at once, so every method takes the book's lock.
"""

from __future__ import annotations

import collections
import threading
import time

import attrs

from .._protocol import env_pb, spaces_pb

__all__ = ["INTERRUPTED_BUFFER", "EpisodeBook"]

#: How many interrupted episodes wait for the next step before the oldest is dropped.
INTERRUPTED_BUFFER = 100


@attrs.define
class _Live:
    episode_id: str
    seed: int | None
    start_ns: int
    steps: int = 0
    reward: float = 0.0

    def record(
        self,
        lane: int,
        *,
        terminated: bool,
        truncated: bool,
        end_ns: int,
        final_info: spaces_pb.MetaMap | None = None,
    ) -> env_pb.EpisodeMetadata:
        return env_pb.EpisodeMetadata(
            episode_id=self.episode_id,
            seed=self.seed,
            env_index=lane,
            step_count=self.steps,
            cumulative_reward=self.reward,
            terminated=terminated,
            truncated=truncated,
            start_timestamp_ns=self.start_ns,
            end_timestamp_ns=end_ns,
            final_info=final_info,
        )


class EpisodeBook:
    """The running episode of every lane, plus interrupted episodes not yet reported."""

    def __init__(self, num_lanes: int) -> None:
        self._lock = threading.Lock()
        self._live: list[_Live | None] = [None] * num_lanes
        self._interrupted: collections.deque[env_pb.EpisodeMetadata] = collections.deque(
            maxlen=INTERRUPTED_BUFFER
        )

    def start(
        self, lane: int, episode_id: str, seed: int | None, *, now_ns: int | None = None
    ) -> None:
        """Track ``episode_id`` on ``lane``; an episode still running there becomes interrupted."""
        now = time.time_ns() if now_ns is None else now_ns
        with self._lock:
            old = self._live[lane]
            if old is not None:
                self._interrupted.append(
                    old.record(lane, terminated=False, truncated=True, end_ns=now)
                )
            self._live[lane] = _Live(episode_id=episode_id, seed=seed, start_ns=now)

    def is_live(self, lane: int) -> bool:
        with self._lock:
            return self._live[lane] is not None

    def step(
        self,
        lane: int,
        reward: float,
        *,
        terminated: bool,
        truncated: bool,
        final_info: spaces_pb.MetaMap | None = None,
        now_ns: int | None = None,
    ) -> env_pb.EpisodeMetadata | None:
        """Count one action step on ``lane``; return the episode's record if the step ended it.

        A lane with no running episode (never reset, or already done) is not tracked.
        """
        with self._lock:
            live = self._live[lane]
            if live is None:
                return None
            live.steps += 1
            live.reward += float(reward)
            if not (terminated or truncated):
                return None
            self._live[lane] = None
        end = time.time_ns() if now_ns is None else now_ns
        return live.record(
            lane, terminated=terminated, truncated=truncated, end_ns=end, final_info=final_info
        )

    def drain_interrupted(self) -> list[env_pb.EpisodeMetadata]:
        """Hand over (and forget) the interrupted episodes waiting to be reported."""
        if not self._interrupted:
            # Nearly every step: skip the lock (a deque's truth test is atomic; an episode
            # interrupted concurrently is reported with the next step either way).
            return []
        with self._lock:
            out = list(self._interrupted)
            self._interrupted.clear()
        return out

    def close_all(self, *, now_ns: int | None = None) -> list[env_pb.EpisodeMetadata]:
        """Finalise all: the buffered interrupted episodes, then every running one (truncated)."""
        now = time.time_ns() if now_ns is None else now_ns
        with self._lock:
            out = list(self._interrupted)
            self._interrupted.clear()
            for lane, live in enumerate(self._live):
                if live is not None:
                    out.append(live.record(lane, terminated=False, truncated=True, end_ns=now))
            self._live = [None] * len(self._live)
        return out

    def clear(self) -> None:
        """Forget every episode (a session ended without Close: its leftovers are dropped)."""
        with self._lock:
            self._live = [None] * len(self._live)
            self._interrupted.clear()
