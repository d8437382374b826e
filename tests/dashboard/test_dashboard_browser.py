"""The live dashboard in headless Chromium, during a real run over real loopback servers.

Each test runs ``tests._dashboard_run`` in a process of its own (two CartPole
env servers, the demo policy's model server, a route to a closed port),
opens the page over the Chrome DevTools Protocol, and checks: the route
grid changes between two snapshots, the failed route's message shows, no
script error happens, and the page ends on the final report.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
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
