"""Issue 24 item 3: a NaN reward leaves the ledger strict JSON, and old ledgers still read."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import gymnasium as gym

import rlmesh_trio as rt

from .._cli import run_cli
from .._durable_policy import angle_policy


class NanReward(gym.Wrapper[Any, Any, Any, Any]):
    """CartPole whose every reward is NaN (what a broken reward function hands back)."""

    def step(self, action: Any) -> Any:
        obs, _reward, terminated, truncated, info = self.env.step(action)
        return obs, math.nan, terminated, truncated, info


def nan_cartpole() -> gym.Env[Any, Any]:
    return NanReward(gym.make("CartPole-v1"))


def _refuse(name: str) -> Any:
    raise ValueError(f"bare {name} in a ledger line")


def _strict(line: str) -> Any:
    return json.loads(line, parse_constant=_refuse)


def test_a_nan_reward_is_written_as_null_with_its_raw_text(tmp_path: Path) -> None:
    ledger = tmp_path / "nan.jsonl"
    report = rt.run(rt.shard([nan_cartpole], angle_policy, seeds=[1, 2]), ledger=ledger)
    assert all(math.isnan(ep.reward) for ep in report.episodes)
    records = [_strict(line) for line in ledger.read_text().splitlines()]
    episodes = [r["episode"] for r in records[1:]]
    assert [(e["reward"], e["reward_raw"]) for e in episodes] == [(None, "nan"), (None, "nan")]
    rebuilt = rt.load_ledger(ledger)
    assert all(math.isnan(ep.reward) for ep in rebuilt.episodes)
    # A resume reads the strict lines back as the same NaN episodes.
    resumed = rt.run(
        rt.shard([nan_cartpole], angle_policy, seeds=[1, 2]), ledger=ledger, resume=True
    )
    assert [ep.seed for ep in resumed.episodes] == [1, 2]
    assert all(math.isnan(ep.reward) for ep in resumed.episodes)


def test_report_reads_an_old_ledger_with_a_bare_nan(tmp_path: Path) -> None:
    ledger = tmp_path / "old.jsonl"
    rt.run(rt.shard([nan_cartpole], angle_policy, seeds=[1, 2]), ledger=ledger)
    # What a ledger looked like before: Python's json wrote the reward as a bare NaN.
    text = ledger.read_text().replace('"reward":null', '"reward":NaN')
    ledger.write_text(text.replace(',"reward_raw":"nan"', ""))
    assert "NaN" in ledger.read_text()
    rebuilt = rt.load_ledger(ledger)
    assert len(rebuilt.episodes) == 2 and all(math.isnan(ep.reward) for ep in rebuilt.episodes)
    result = run_cli("report", str(ledger))
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
