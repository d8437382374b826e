"""Issue 34 (3): a resumed run's steps/s counts only the steps this process made.

A route the ledger had already finished read ``steps/s 1,138,423.3``: its
ledger steps over a wall time near zero. A real ledgered run (three routes
over in-process CartPole), its ledger cut back as if the run had stopped
(route-0 done, route-1 one episode in, route-2 nothing), then resumed.
"""

from __future__ import annotations

import json
from pathlib import Path

from .._cli import run_cli

POLICY = "tests._durable_policy:angle_policy"
ARGS = ["run", "--env", "CartPole-v1", "--env", "CartPole-v1", "--env", "CartPole-v1"]
ARGS += ["--model", POLICY, "--seeds", "0:9", "--no-progress"]


def _rate(value: float | None) -> str:
    """As the summary prints a rate (``_fmt``)."""
    return "-" if value is None else f"{value:,.1f}"


def _rows(stdout: str) -> dict[str, list[str]]:
    """The summary table's rows by their first cell (routes, and ``total``)."""
    rows = {}
    for line in stdout.splitlines():
        cells = line.split()
        if cells and (cells[0].startswith("route-") or cells[0] == "total"):
            rows.setdefault(cells[0], cells)  # the first table; the returns table follows
    return rows


def _cut(ledger: Path) -> None:
    """Keep the header, route-0's three episodes and route-1's first: as if stopped there."""
    header, *records = ledger.read_text().splitlines(keepends=True)
    kept, route1 = [], 0
    for line in records:
        record = json.loads(line)
        if record.get("type") != "episode":
            continue
        if record["route_id"] == "route-0" or (record["route_id"] == "route-1" and route1 < 1):
            route1 += record["route_id"] == "route-1"
            kept.append(line)
    assert len(kept) == 4
    ledger.write_text(header + "".join(kept))


def test_a_resumed_route_rates_only_the_steps_this_process_made(tmp_path: Path) -> None:
    ledger, out = tmp_path / "run.jsonl", tmp_path / "out.json"
    first = run_cli(*ARGS, "--ledger", str(ledger))
    assert first.returncode == 0, first.stderr
    _cut(ledger)
    resumed = run_cli(*ARGS, "--ledger", str(ledger), "--resume", "--json", str(out))
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming {ledger}: 4 of 9 episodes done, 5 to go" in resumed.stderr
    report = json.loads(out.read_text())
    routes = {r["route_id"]: r for r in report["routes"]}
    ledger_steps = {
        rid: sum(ep["steps"] for ep in routes[rid]["episodes"][:n])
        for rid, n in (("route-0", 3), ("route-1", 1), ("route-2", 0))
    }
    for rid, steps in ledger_steps.items():
        assert routes[rid]["resumed_steps"] == steps
    rows = _rows(resumed.stdout)
    # route-0 ran nothing here: no rate, whatever its steps and its (tiny) wall time.
    assert rows["route-0"][-1] == "-", resumed.stdout
    assert rows["route-0"][-3] == f"{routes['route-0']['total_steps']:,}"  # steps: all of them
    for rid in ("route-1", "route-2"):
        route = routes[rid]
        made = route["total_steps"] - route["resumed_steps"]
        assert made > 0 and route["wall_s"] > 0
        assert rows[rid][-1] == _rate(made / route["wall_s"]), (rid, resumed.stdout)
    made = report["total_steps"] - sum(ledger_steps.values())
    assert report["steps_per_s"] == made / report["wall_s"]
    assert rows["total"][-1] == _rate(made / report["wall_s"])
    # Well below what the ledger's steps over these wall times would read.
    assert report["steps_per_s"] < report["total_steps"] / report["wall_s"]


def test_a_run_the_ledger_had_finished_shows_no_rate_at_all(tmp_path: Path) -> None:
    ledger, out = tmp_path / "run.jsonl", tmp_path / "out.json"
    assert run_cli(*ARGS, "--ledger", str(ledger)).returncode == 0
    again = run_cli(*ARGS, "--ledger", str(ledger), "--resume", "--json", str(out))
    assert again.returncode == 0, again.stderr
    rows = _rows(again.stdout)
    assert [rows[rid][-1] for rid in ("route-0", "route-1", "route-2", "total")] == ["-"] * 4
    report = json.loads(out.read_text())
    assert report["total_episodes"] == 9 and report["steps_per_s"] == 0.0
