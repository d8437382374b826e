"""Issue 24 item 2: a resume is refused when the env or the model is not the ledger's."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import trio

import rlmesh_trio as rt
from rlmesh_trio.orchestrator._ledger import read_ledger

from .._durable_policy import angle_policy


def cartpole() -> gym.Env[Any, Any]:
    return gym.make("CartPole-v1")


def acrobot() -> gym.Env[Any, Any]:
    return gym.make("Acrobot-v1")


def other_policy(obs: Any) -> int:
    return 0


def half_done(tmp_path: Path, env: Any = cartpole, keep: int = 2) -> Path:
    """A ledger of a 6-episode CartPole run that stopped after ``keep`` episodes."""
    ledger = tmp_path / "run.jsonl"
    rt.run([rt.Route(env=env, model=angle_policy, seeds=range(6), route_id="r")], ledger=ledger)
    lines = ledger.read_text().splitlines(keepends=True)
    ledger.write_text("".join(lines[: 1 + keep]))
    return ledger


def test_a_resume_with_another_env_names_both(tmp_path: Path) -> None:
    ledger = half_done(tmp_path)
    route = rt.Route(env=acrobot, model=angle_policy, seeds=range(6), route_id="r")
    with pytest.raises(rt.PlanMismatch, match=r"route r: env differs \(ledger: .*cartpole; "):
        rt.run([route], ledger=ledger, resume=True)
    assert len(read_ledger(ledger).entries) == 2  # untouched


def test_a_resume_with_another_model_names_both(tmp_path: Path) -> None:
    ledger = half_done(tmp_path)
    route = rt.Route(env=cartpole, model=other_policy, seeds=range(6), route_id="r")
    with pytest.raises(rt.PlanMismatch, match="model differs") as caught:
        rt.run([route], ledger=ledger, resume=True)
    assert "angle_policy" in str(caught.value) and "other_policy" in str(caught.value)


def test_a_resume_over_an_address_serving_another_env_is_refused(tmp_path: Path) -> None:
    ledger = half_done(tmp_path)

    async def resume() -> rt.RunReport:
        async with rt.serve_env(gym.make("Acrobot-v1")) as server:
            route = rt.Route(env=server.address, model=angle_policy, seeds=range(6), route_id="r")
            return await rt.run_routes([route], ledger=ledger, resume=True, handle_sigint=False)

    with pytest.raises(rt.RunFailed) as caught:
        trio.run(resume)
    error = caught.value.primary
    assert isinstance(error, rt.PlanMismatch)
    assert "env contract differs (ledger: CartPole-v1" in str(error)
    assert "this run: Acrobot-v1" in str(error)
    assert len(read_ledger(ledger).entries) == 2  # nothing of Acrobot reached it


def test_a_resume_over_an_address_serving_the_same_env_goes_on(tmp_path: Path) -> None:
    ledger = half_done(tmp_path)

    async def resume() -> rt.RunReport:
        async with rt.serve_env(gym.make("CartPole-v1")) as server:
            route = rt.Route(env=server.address, model=angle_policy, seeds=range(6), route_id="r")
            return await rt.run_routes([route], ledger=ledger, resume=True, handle_sigint=False)

    report = trio.run(resume)
    assert report.ok and report.total_episodes == 6


def test_a_resume_says_what_it_resumed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ledger = half_done(tmp_path)
    route = rt.Route(env=cartpole, model=angle_policy, seeds=range(6), route_id="r")
    with caplog.at_level(logging.INFO, logger="rlmesh_trio.ledger"):
        report = rt.run([route], ledger=ledger, resume=True)
    note = f"resuming {ledger}: 2 of 6 episodes done, 4 to go"
    assert report.meta is not None and report.meta.resumed == note
    assert note in caplog.text
    assert report.total_episodes == 6


def test_a_ledger_from_before_the_identity_check_is_refused_clearly(tmp_path: Path) -> None:
    ledger = half_done(tmp_path)
    lines = ledger.read_text().splitlines(keepends=True)
    header = json.loads(lines[0])
    for entry in header["plan"]["routes"]:
        del entry["env"], entry["model"]
    ledger.write_text(json.dumps(header) + "\n" + "".join(lines[1:]))
    route = rt.Route(env=cartpole, model=angle_policy, seeds=range(6), route_id="r")
    with pytest.raises(rt.LedgerError, match="predates the plan identity check"):
        rt.run([route], ledger=ledger, resume=True)
    assert rt.load_ledger(ledger).total_episodes == 2  # still readable
