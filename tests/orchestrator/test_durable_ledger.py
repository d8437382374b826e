"""Issue 15: the ticket plan, the episode ledger and resume (real gymnasium CartPole)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import attrs
import gymnasium as gym
import pytest
import trio

import rlmesh_trio as rt
from rlmesh_trio.orchestrator._ledger import LEDGER_SCHEMA, read_ledger
from rlmesh_trio.orchestrator._plan import make_plan

from .._durable_policy import angle_policy, gymnasium_episode

SEEDS = range(12)


def cartpole() -> gym.Env:
    return gym.make("CartPole-v1")


def routes(seeds: Any = SEEDS, **options: Any) -> list[rt.Route]:
    return rt.shard(envs=[cartpole, cartpole, cartpole], model=angle_policy, seeds=seeds, **options)


def key(ep: rt.EpisodeResult) -> tuple[int | None, int, float, bool, bool]:
    return ep.seed, ep.steps, ep.reward, ep.terminated, ep.truncated


def by_seed(report: rt.RunReport) -> list[tuple[int | None, int, float, bool, bool]]:
    return sorted((key(ep) for ep in report.episodes), key=lambda k: k[0] or 0)


def test_ledger_holds_a_header_and_every_episode(tmp_path: Path) -> None:
    ledger = tmp_path / "run.jsonl"
    report = rt.run(routes(), ledger=ledger)
    lines = ledger.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["schema"] == LEDGER_SCHEMA and header["version"] == 1
    assert header["plan_digest"] == report.meta.plan_digest
    assert {"versions", "argv", "started_at", "plan"} <= set(header)
    versions = header["versions"]
    assert {"rlmesh-trio", "trio", "h2", "hpack", "betterproto2"} <= set(versions)
    assert "grpclib" not in versions  # a test-only peer, never used by a run
    assert report.meta is not None and report.meta.versions == versions
    episodes = [json.loads(line) for line in lines[1:]]
    assert len(episodes) == 12
    first = episodes[0]
    assert {"ticket", "route_id", "attempt", "started_at", "finished_at", "episode"} <= set(first)
    assert set(first["episode"]) == {a.name for a in attrs.fields(rt.EpisodeResult)}
    assert sorted(e["ticket"] for e in episodes) == sorted(f"route-{i % 3}/{i // 3}" for i in SEEDS)
    assert by_seed(report) == [gymnasium_episode(s) for s in SEEDS]
    # The report rebuilt from the ledger alone says the same, episode for episode.
    rebuilt = rt.load_ledger(ledger)
    assert rebuilt.ok
    assert [key(e) for e in rebuilt.episodes] == [key(e) for e in report.episodes]
    assert rebuilt.meta is not None and rebuilt.meta.plan_digest == report.meta.plan_digest


def test_report_json_carries_schema_run_metadata_and_attempts(tmp_path: Path) -> None:
    report = rt.run(routes(), ledger=tmp_path / "l.jsonl")
    data = json.loads(report.to_json())
    assert data["schema"] == "rlmesh-trio.report" and data["schema_version"] == 2
    run = data["run"]
    assert run["plan_digest"] == report.meta.plan_digest and run["argv"]
    assert run["plan"]["routes"][0]["seeds"] == [0, 3, 6, 9]
    assert all(ep["attempts"] == 1 for r in data["routes"] for ep in r["episodes"])
    assert all(r["retries"] == 0 for r in data["routes"])


def test_non_empty_ledger_without_resume_is_refused_untouched(tmp_path: Path) -> None:
    ledger = tmp_path / "run.jsonl"
    rt.run(routes(), ledger=ledger)
    before = ledger.read_bytes()
    with pytest.raises(rt.LedgerExists, match="resume"):
        rt.run(routes(), ledger=ledger)
    assert ledger.read_bytes() == before
    assert isinstance(rt.LedgerExists("p", "d"), rt.InvalidSpec)


def test_resume_runs_only_what_is_missing_and_reports_the_whole_plan(tmp_path: Path) -> None:
    ledger = tmp_path / "run.jsonl"
    full = rt.run(routes(), ledger=ledger)
    lines = ledger.read_text().splitlines(keepends=True)
    # As if killed after 5 episodes, in the middle of writing the 6th line.
    ledger.write_text("".join(lines[:6]) + lines[6][:37])
    kept = {json.loads(line)["ticket"] for line in lines[1:6]}
    resumed = rt.run(routes(), ledger=ledger, resume=True)
    assert resumed.ok and resumed.total_episodes == 12
    assert resumed.meta is not None and resumed.meta.resumed_episodes == 5
    assert resumed.meta.ledger_torn_bytes == 37  # reported, and cut before appending
    assert by_seed(resumed) == by_seed(full)
    assert resumed.total_steps == full.total_steps
    contents = read_ledger(ledger)
    assert contents.torn == 0 and len(contents.resumes) == 1
    tickets = [e.ticket for e in contents.entries]
    assert len(tickets) == len(set(tickets)) == 12  # at most once, all there
    assert kept <= set(tickets)
    # Resume after resume: nothing left to run, the same report.
    again = rt.run(routes(), ledger=ledger, resume=True)
    assert by_seed(again) == by_seed(full) and again.meta.resumed_episodes == 12
    assert len(read_ledger(ledger).entries) == 12


def test_resume_after_cancel_is_identical_to_an_uninterrupted_run(tmp_path: Path) -> None:
    ledger = tmp_path / "run.jsonl"

    class StopAfter(rt.RuntimeHooks):
        def __init__(self, scope: trio.CancelScope, count: int) -> None:
            self.scope, self.count = scope, count

        async def episode_completed(self, event: Any) -> None:
            self.count -= 1
            if self.count == 0:
                self.scope.cancel()

    async def interrupted() -> None:
        with trio.CancelScope() as scope:
            await rt.Orchestrator(routes(), hooks=StopAfter(scope, 4), ledger=ledger).run()

    trio.run(interrupted)
    kept = {e.ticket for e in read_ledger(ledger).entries}
    assert 4 <= len(kept) < 12

    class Seen(rt.RuntimeHooks):
        def __init__(self) -> None:
            self.started: set[str] = set()
            self.completed: set[str] = set()

        async def episode_started(self, event: Any) -> None:
            self.started.add(f"{event.route_id}/{event.episode_index}")

        async def episode_completed(self, event: Any) -> None:
            assert event.result.index == event.episode_index
            self.completed.add(f"{event.route_id}/{event.episode_index}")

    seen = Seen()
    resumed = trio.run(
        lambda: rt.Orchestrator(routes(), hooks=seen, ledger=ledger, resume=True).run()
    )
    # The caller's hooks name the tickets the resumed run ran, by their planned index.
    missing = {f"route-{i % 3}/{i // 3}" for i in SEEDS} - kept
    assert seen.started == seen.completed == missing
    assert by_seed(resumed) == [gymnasium_episode(s) for s in SEEDS]
    # Episodes keep their planned index and trial on every route (trials dealt in blocks).
    for number, outcome in enumerate(resumed.routes):
        assert [ep.index for ep in outcome.episodes] == list(range(4))
        assert [ep.trial for ep in outcome.episodes] == list(range(4 * number, 4 * number + 4))


def test_resume_keeps_trials_of_a_shifted_base(tmp_path: Path) -> None:
    ledger = tmp_path / "run.jsonl"
    plan = routes(trial_index_base=100)
    rt.run(plan, ledger=ledger)
    lines = ledger.read_text().splitlines(keepends=True)
    ledger.write_text("".join(lines[:3]))
    resumed = rt.run(routes(trial_index_base=100), ledger=ledger, resume=True)
    trials = sorted(ep.trial or 0 for ep in resumed.episodes)
    assert trials == list(range(100, 112))


def test_a_different_plan_is_refused_naming_what_differs(tmp_path: Path) -> None:
    ledger = tmp_path / "run.jsonl"
    rt.run(routes(), ledger=ledger)
    before = ledger.read_bytes()
    with pytest.raises(rt.PlanMismatch, match=r"route route-2: seeds differ"):
        rt.run(routes(seeds=[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 99]), ledger=ledger, resume=True)
    with pytest.raises(rt.PlanMismatch, match="max episode steps differ"):
        rt.run(routes(max_episode_steps=5), ledger=ledger, resume=True)
    with pytest.raises(rt.PlanMismatch, match="not in the ledger: route-3"):
        rt.run(rt.shard([cartpole] * 4, angle_policy, seeds=SEEDS), ledger=ledger, resume=True)
    assert ledger.read_bytes() == before
    error = rt.PlanMismatch(["route a: seeds differ"])
    assert pickle.loads(pickle.dumps(error)).differences == error.differences


def test_plan_identity_is_the_work_not_the_addresses() -> None:
    ids = ["a", "b"]
    one = make_plan(rt.shard(["127.0.0.1:1", "127.0.0.1:2"], "127.0.0.1:3", seeds=range(4)), ids)
    two = make_plan(rt.shard(["127.0.0.1:7", "127.0.0.1:8"], "127.0.0.1:9", seeds=range(4)), ids)
    assert one.digest == two.digest and not one.differences(two.identity())
    other = make_plan(rt.shard(["x:1", "x:2"], "x:3", seeds=range(4), max_episode_steps=9), ids)
    assert other.digest != one.digest
    tickets = one.tickets()
    assert [(t.key, t.seed, t.trial) for t in tickets[:2]] == [("a/0", 0, 0), ("a/1", 2, 1)]


def test_bad_ledger_uses_are_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(rt.InvalidSpec, match="resume needs a ledger"):
        rt.Orchestrator(routes(), resume=True)
    with pytest.raises(rt.LedgerError, match="does not exist"):
        rt.Orchestrator(routes(), ledger=tmp_path / "no" / "such.jsonl")
    with pytest.raises(rt.InvalidSpec, match="seeds or an episode count"):
        rt.Orchestrator([rt.Route(env=cartpole, model=angle_policy)], ledger=tmp_path / "x")
    junk = tmp_path / "junk.jsonl"
    junk.write_text('{"not": "a ledger"}\n')
    with pytest.raises(rt.LedgerError, match="not an rlmesh-trio ledger header"):
        rt.Orchestrator(routes(), ledger=junk, resume=True)
    with pytest.raises(rt.LedgerError):
        rt.load_ledger(junk)
    middle = tmp_path / "middle.jsonl"
    rt.run(routes(), ledger=middle)
    lines = middle.read_text().splitlines(keepends=True)
    middle.write_text("".join(lines[:3]) + "{torn\n" + "".join(lines[3:]))
    with pytest.raises(rt.LedgerError, match="line 4 is not valid JSON"):
        rt.Orchestrator(routes(), ledger=middle, resume=True)
    error = rt.LedgerError("p", "detail")
    assert str(pickle.loads(pickle.dumps(error))) == str(error)


def test_resume_on_a_missing_or_torn_header_ledger_starts_afresh(tmp_path: Path) -> None:
    missing = tmp_path / "new.jsonl"
    assert rt.run(routes(), ledger=missing, resume=True).total_episodes == 12
    torn = tmp_path / "torn.jsonl"
    torn.write_text('{"schema": "rlmesh-trio.le')
    report = rt.run(routes(), ledger=torn, resume=True)
    assert report.total_episodes == 12 and len(read_ledger(torn).entries) == 12


async def test_ledger_over_real_servers(tmp_path: Path) -> None:
    """Two gRPC env servers on loopback: the ledger and resume work the same over the wire."""
    ledger = tmp_path / "served.jsonl"
    async with rt.serve_env(cartpole()) as a, rt.serve_env(cartpole()) as b:
        plan = rt.shard([a.address, b.address], angle_policy, seeds=range(8))
        report = await rt.run_routes(plan, ledger=ledger)
        lines = ledger.read_text().splitlines(keepends=True)
        ledger.write_text("".join(lines[:4]))
        resumed = await rt.run_routes(plan, ledger=ledger, resume=True)
    assert by_seed(resumed) == by_seed(report) == [gymnasium_episode(s) for s in range(8)]


def test_a_second_writer_on_the_same_ledger_is_refused(tmp_path: Path) -> None:
    from rlmesh_trio.orchestrator._ledger import LedgerWriter

    ledger = tmp_path / "l.jsonl"
    holder = LedgerWriter(ledger)
    try:
        with pytest.raises(rt.LedgerError, match="in use by another run"):
            rt.run(routes(), ledger=ledger, resume=True)
    finally:
        holder.close()
    assert rt.run(routes(), ledger=ledger, resume=True).total_episodes == 12


def test_a_route_the_ledger_finished_keeps_its_labels(tmp_path: Path) -> None:
    ledger = tmp_path / "l.jsonl"
    plan = [rt.Route(env="127.0.0.1:9", model=angle_policy, seeds=(1,), route_id="done")]
    lanes = [rt.Route(env=[cartpole(), cartpole()], model=angle_policy, seeds=(1,), route_id="x")]
    # Written by a run over lanes, resumed over an address that is never contacted.
    first = rt.run([attrs.evolve(lanes[0], route_id="done")], ledger=ledger)
    resumed = rt.run(plan, ledger=ledger, resume=True)
    assert resumed.ok and resumed.outcome("done").env == "127.0.0.1:9"
    assert [key(e) for e in resumed.episodes] == [key(e) for e in first.episodes]


def test_lanes_and_env_owned_resets_fill_every_ticket(tmp_path: Path) -> None:
    def vector() -> gym.vector.VectorEnv:
        return gym.vector.SyncVectorEnv([cartpole for _ in range(3)])

    plan = [
        rt.Route(env=vector, model=angle_policy, episodes=7, route_id="vec"),
        rt.Route(env=[cartpole(), cartpole()], model=angle_policy, seeds=range(5), route_id="ln"),
    ]
    report = rt.run(plan, ledger=tmp_path / "l.jsonl")
    assert report.ok
    assert [ep.index for ep in report.outcome("vec").episodes] == list(range(7))
    assert sorted(key(ep) for ep in report.outcome("ln").episodes) == [
        gymnasium_episode(s) for s in range(5)
    ]
    assert len(read_ledger(tmp_path / "l.jsonl").entries) == 12


def test_route_spec_trials_list_one_trial_per_episode() -> None:
    spec = rt.RouteSpec(route_id="r", session_id="s", seeds=(5, 6, 7), trials=(9, 4, 11))
    spec.validate()
    assert [spec.trial_for(i) for i in range(3)] == [9, 4, 11]
    assert rt.RouteSpec(route_id="r", session_id="s", trial_index_base=3).trial_for(2) == 5
    with pytest.raises(rt.InvalidSpec, match="one trial >= 0 per episode"):
        rt.RouteSpec(route_id="r", session_id="s", seeds=(5, 6), trials=(1,)).validate()
