"""``rlmesh-trio watch`` on what is not a ledger: one ``error:`` line and exit 2, never a
URL serving an empty page forever (issue 34, item 4). A missing or empty file in an
existing folder is still waited for, as docs/guide/dashboard.md says."""

from __future__ import annotations

import subprocess
from importlib.util import find_spec
from pathlib import Path

import gymnasium
import pytest
import trio

import rlmesh_trio as rt
from rlmesh_trio.dashboard import DashboardState, LedgerFollower, watch_ledger

from .._cli import CLI, run_cli

pytestmark = pytest.mark.skipif(
    find_spec("hypercorn") is None or find_spec("starlette") is None,
    reason="needs the dashboard extra",
)

NOT_A_HEADER = "the first line is not an rlmesh-trio ledger header"


def _refused(path: Path, found: str) -> str:
    return f"error: ledger {path}: {NOT_A_HEADER} (it reads {found})\n"


@pytest.mark.parametrize(
    ("content", "found"),
    [
        (b"# rlmesh-trio\n\nEvaluate reinforcement-learning models\n", "'# rlmesh-trio'"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "b'\\x89PNG\\r'"),
        (
            b'{"schema":"rlmesh-trio.report","schema_version":1,"routes":[{"route_id":"r0"}]}\n',
            '\'{"schema":"rlmesh-trio.report","schema_version":1,"routes":[\'...',
        ),
        (b"one line and no newline", "'one line and no newline'"),
        (b'{"a": 1}', "'{\"a\": 1}'"),  # whole JSON without its newline: judged as it is
    ],
    ids=["markdown", "png", "json-report", "text-no-newline", "json-no-newline"],
)
def test_watch_refuses_a_file_that_is_not_a_ledger(
    tmp_path: Path, content: bytes, found: str
) -> None:
    path = tmp_path / "README.md"
    path.write_bytes(content)
    result = run_cli("watch", str(path), timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr == _refused(path, found)
    assert "http://" not in result.stderr  # refused before any page was served


def test_watch_refuses_a_ledger_in_a_missing_folder_as_run_does(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "run.jsonl"
    expected = f"error: ledger {path}: folder {tmp_path / 'nowhere'} does not exist\n"
    watched = run_cli("watch", str(path), timeout=60)
    assert (watched.returncode, watched.stderr) == (2, expected)
    ran = run_cli(
        "run", "--env", "CartPole-v1", "--model", "random", "--episodes", "1",
        "--ledger", str(path), "--no-progress",
    )  # fmt: skip
    assert (ran.returncode, ran.stderr) == (2, expected)


def test_watch_waits_on_an_empty_file_and_refuses_it_once_it_is_text(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.touch()  # about to be written by a run: waited for, as a missing file is
    proc = subprocess.Popen(
        [*CLI, "watch", str(path)], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert first.startswith(f"watching {path}: http://127.0.0.1:")
        assert proc.stderr.readline() == f"waiting for a run to write {path}\n"
        assert proc.poll() is None
        path.write_text("hello\nworld\n")  # not a run's ledger after all
        rest = proc.stderr.read()
        assert proc.wait(timeout=30) == 2
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert rest == _refused(path, "'hello'")


def _header_line(tmp_path: Path) -> bytes:
    ledger = tmp_path / "whole.jsonl"
    route = rt.Route(env=gymnasium.make("CartPole-v1"), model=rt.RANDOM, seeds=[0])
    rt.run([route], ledger=ledger)
    return ledger.read_bytes().split(b"\n", 1)[0] + b"\n"


def test_follower_waits_out_a_header_being_written_and_a_resume_that_rewrites_it(
    tmp_path: Path,
) -> None:
    header = _header_line(tmp_path)
    path = tmp_path / "run.jsonl"
    follower = LedgerFollower(path, DashboardState())
    path.write_bytes(b"")
    assert follower.poll() == 0 and not follower.has_header  # empty: a run is about to start
    path.write_bytes(header[:25])  # a torn header: a run killed as it began
    assert follower.poll() == 0 and not follower.has_header
    path.write_bytes(header)  # a resume cut it and wrote its own (longer) header
    assert follower.poll() == 1 and follower.has_header


async def test_watch_ledger_raises_before_serving_a_file_that_is_not_a_ledger(
    tmp_path: Path,
) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("notes\n")
    async with trio.open_nursery() as nursery:
        with pytest.raises(rt.LedgerError, match=r"\(it reads 'notes'\)$"):
            await nursery.start(lambda task_status: watch_ledger(path, task_status=task_status))
    with pytest.raises(rt.LedgerError, match=r"does not exist$"):
        await watch_ledger(tmp_path / "nowhere" / "run.jsonl")
