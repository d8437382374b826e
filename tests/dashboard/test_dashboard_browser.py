"""The live dashboard in headless Chromium, during a real run over real loopback servers.

Each test runs ``tests._dashboard_run`` in a process of its own (two CartPole
env servers, the demo policy's model server, a route to a closed port),
opens the page over the Chrome DevTools Protocol, and checks: the route
grid changes between two snapshots, the failed route's message shows, no
script error happens, and the page ends on the final report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.util import find_spec
from pathlib import Path
from typing import IO

import pytest

from .._browser import CHROMIUM
from .._cdp import Browser

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium"),
    pytest.mark.skipif(
        find_spec("hypercorn") is None or find_spec("websockets") is None,
        reason="needs the dashboard extra and websockets (dev)",
    ),
    pytest.mark.slow,
    pytest.mark.timeout(300),
]

ROOT = Path(__file__).resolve().parents[2]

GRID = "Array.from(document.querySelectorAll('#routes tr')).map(r => r.innerText).join('\\n')"
ROW = "(document.querySelector('tr[data-route=\"{route}\"]') || {{}}).innerText || ''"
ON_REPORT = (
    "location.pathname.endsWith('/report') && !!document.getElementById('selftest') "
    "&& document.getElementById('selftest').textContent"
)


class Lines:
    """A child's output read on a thread; :meth:`wait_for` blocks until a line starts so."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self.lines.append("<eof>")
            self._changed.notify_all()

    def wait_for(self, prefix: str, timeout: float = 120.0) -> str:
        def found() -> str | None:
            hit = [x for x in self.lines if x.startswith(prefix) or x == "<eof>"]
            return hit[0] if hit else None

        with self._changed:
            assert self._changed.wait_for(found, timeout), f"no {prefix!r} in {self.lines}"
            line = found()
        assert line is not None and line != "<eof>", f"ended before {prefix!r}: {self.lines}"
        return line


@contextmanager
def child(*args: str, stream: str = "stdout") -> Iterator[tuple[subprocess.Popen[str], Lines]]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    process = subprocess.Popen(
        args,
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE if stream == "stdout" else subprocess.DEVNULL,
        stderr=subprocess.PIPE if stream == "stderr" else None,
        text=True,
    )
    out = process.stdout if stream == "stdout" else process.stderr
    assert out is not None
    try:
        yield process, Lines(out)
    finally:
        if process.poll() is None:
            process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def go(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.write("go\n")
    process.stdin.flush()


def watch_the_run(
    page: Browser, url: str, run: subprocess.Popen[str], gate: Lines, videos: bool = False
) -> None:
    """What both tests check, from opening the page to the final report (and, for a run
    that films, a video on the live page that the browser can play)."""
    page.open(url)
    page.wait_for("document.querySelectorAll('#routes tr').length === 3", what="three rows")
    gate.wait_for("GATE 1")
    # good-0 is held after its first episode: the run cannot end while the page is checked.
    good0 = ROW.format(route="good-0")
    page.wait_for(f"({good0}).includes('1 / 4')", what="good-0 at 1 / 4")
    broken = ROW.format(route="broken")
    failed = page.wait_for(f"({broken}).includes('failed') && {broken}", what="the failed row")
    assert "ConnectError" in failed or "connect" in failed.lower(), failed
    if videos:  # good-1 runs on meanwhile: its first episode is filmed
        page.wait_for(
            "Array.from(document.querySelectorAll('#videos video'))"
            ".some(v => v.readyState >= 1 && v.duration > 0)",
            what="a filmed episode's video, loaded",
        )
    first = page.evaluate(GRID)
    go(run)
    gate.wait_for("GATE 2")  # held again, after its second episode
    page.wait_for(
        f"({GRID}) !== {first!r} && ({good0}).includes('2 / 4')", what="the grid, changed"
    )
    go(run)
    page.wait_for(ON_REPORT, timeout=120, what="the final report")
    report = page.evaluate("document.body.innerText")
    assert "Episode returns" in report and "broken" in report
    assert page.evaluate("document.querySelectorAll('.js-plotly-plot').length") > 0


def test_dashboard_follows_a_live_run_to_its_final_report() -> None:
    with child(sys.executable, "-m", "tests._dashboard_run", "hook") as (run, out):
        url = out.wait_for("URL ").split(" ", 1)[1]
        with Browser() as page:
            watch_the_run(page, url, run, out, videos=True)
            out.wait_for("DONE")
            assert page.errors == []
    assert run.returncode == 0


def test_watch_serves_the_same_page_from_a_ledger_another_process_writes(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "run.jsonl"
    watch = (sys.executable, "-m", "rlmesh_trio.cli", "watch", str(ledger))
    with child(*watch, "--address", "127.0.0.1:0", stream="stderr") as (_watcher, said):
        url = said.wait_for("watching ").rsplit(" ", 1)[1]
        with (
            child(sys.executable, "-m", "tests._dashboard_run", "ledger", str(ledger)) as (
                run,
                out,
            ),
            Browser() as page,
        ):
            watch_the_run(page, url, run, out)
            out.wait_for("DONE")
            assert page.errors == []
        assert run.returncode == 0


#: Run in every document the browser opens: on the live page, each change of the returns
#: panel (and the progress line) is saved to sessionStorage, which outlives the page's own
#: move to the report, so the test reads the figures the live page showed last.
RECORD_FIGURES = """
document.addEventListener('DOMContentLoaded', function () {
  if (!document.getElementById('mean')) return;
  var ids = ['n', 'mean', 'mean-ci', 'iqm', 'iqm-ci', 'progress-text'];
  new MutationObserver(function () {
    var figures = {};
    ids.forEach(function (id) { figures[id] = document.getElementById(id).textContent; });
    sessionStorage.setItem('liveFigures', JSON.stringify(figures));
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
});
"""


def _page_figures(page: Browser, stats: dict[str, object]) -> dict[str, str]:
    """``stats`` (n, mean, meanCi, iqm, iqmCi) as the page writes them, in the page's locale."""
    script = (
        "(function(s){function fmt(x){return x===null||x===undefined?'–':Number(x)"
        ".toLocaleString(undefined,{minimumFractionDigits:2,maximumFractionDigits:2})}"
        "function ci(p){return p?'['+fmt(p[0])+', '+fmt(p[1])+']':'–'}"
        "return {n:Number(s.n).toLocaleString(),mean:fmt(s.mean),'mean-ci':ci(s.meanCi),"
        f"iqm:fmt(s.iqm),'iqm-ci':ci(s.iqmCi)}}}})({json.dumps(stats)})"
    )
    figures = page.evaluate(script)
    assert isinstance(figures, dict), script
    return figures


SHOWN = (
    "(function(){var f={};['n','mean','mean-ci','iqm','iqm-ci'].forEach(function(id){"
    "f[id]=document.getElementById(id).textContent});return f})()"
)


def _ledger_rewards(ledger: Path) -> list[float]:
    """The returns of the ledger's episodes, in the order they were written."""
    from rlmesh_trio.orchestrator._ledger import ledger_record

    rewards = []
    for line in ledger.read_text().splitlines()[1:]:
        kind, value = ledger_record(json.loads(line))
        if kind == "episode":
            rewards.append(value.result.reward)
    return rewards


def test_watch_ends_on_the_figures_of_the_json_report(tmp_path: Path) -> None:
    """Issue 34 (1): the returns panel of ``watch`` kept its first figures (n=4 of 12) to
    the end. Now it follows the run (two held points mid-run) and its last figures are the
    JSON report's: n, mean, IQM and both CIs, on the page and in ``/snapshot``."""
    from rlmesh_trio.results import summarize

    ledger, out = tmp_path / "run.jsonl", tmp_path / "report.json"
    watch = (sys.executable, "-m", "rlmesh_trio.cli", "watch", str(ledger))
    with child(*watch, "--address", "127.0.0.1:0", stream="stderr") as (_watcher, said):
        url = said.wait_for("watching ").rsplit(" ", 1)[1]
        with Browser() as page:
            page.call("Page.addScriptToEvaluateOnNewDocument", {"source": RECORD_FIGURES})
            page.open(url)
            page.wait_for("document.getElementById('state').textContent === 'live'")
            with child(sys.executable, "-m", "tests._watch_figures_run", str(ledger), str(out)) as (
                run,
                lines,
            ):
                for stage in (0, 1):
                    for route in range(3):
                        lines.wait_for(f"HELD {stage} route-{route}")
                    # Every route is held: the ledger stands still. The panel must catch up
                    # with all of it (the live figures bootstrap the returns in ledger order).
                    rewards = _ledger_rewards(ledger)
                    assert len(rewards) == 3 * (1 + 2 * stage)
                    expected = _page_figures(
                        page, {**summarize(rewards).to_dict(), "n": len(rewards)}
                    )
                    page.wait_for(
                        f"(function(e){{var f={SHOWN};"
                        f"return Object.keys(e).every(function(k){{return f[k]===e[k]}})}})"
                        f"({json.dumps(expected)})",
                        timeout=30,
                        what=f"the returns panel at {len(rewards)} episodes ({expected})",
                    )
                    go(run)
                lines.wait_for("DONE")
                page.wait_for(ON_REPORT, timeout=120, what="the final report")
            assert run.returncode == 0
            report = json.loads(out.read_text())
            final = report["statistics"]["run"]
            assert final["n"] == report["total_episodes"] == 12
            last = json.loads(page.evaluate("sessionStorage.getItem('liveFigures')") or "{}")
            shown = {key: last.get(key) for key in ("n", "mean", "mean-ci", "iqm", "iqm-ci")}
            assert shown == _page_figures(page, final), (shown, final)
            assert last["progress-text"].startswith("12 of 12 episodes"), last
            assert page.errors == []
        with urllib.request.urlopen(url + "snapshot", timeout=30) as reply:
            snapshot = json.loads(reply.read())
    assert snapshot["final"] and snapshot["progress"]["done"] == 12
    stats = snapshot["stats"]
    assert stats["seen"] == 12
    assert {key: stats[key] for key in final} == final
