"""Helpers for running the ``rlmesh-trio`` CLI as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CLI = [sys.executable, "-m", "rlmesh_trio.cli"]


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def help_text(*command: str) -> str:
    """``rlmesh-trio COMMAND --help``, which must exit 0, run in this process through click's
    own test runner (one interpreter for many help pages); what it printed."""
    from click.testing import CliRunner

    from rlmesh_trio.cli._main import cli

    result = CliRunner().invoke(cli, [*command, "--help"])
    assert result.exit_code == 0, result.output
    return result.stdout


def run_to_json(out: Path, *args: str) -> dict[str, Any]:
    """``rlmesh-trio run ARGS --json OUT --no-progress``, which must exit 0; the report."""
    result = run_cli("run", *args, "--json", str(out), "--no-progress")
    assert result.returncode == 0, result.stderr
    report: dict[str, Any] = json.loads(out.read_text())
    return report


@contextmanager
def serving(*args: str, timeout: float = 30) -> Iterator[str]:
    """Start ``rlmesh-trio <args> --ready-fd N``; yield the address it reports; stop it."""
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        [*CLI, *args, "--ready-fd", str(write_fd)],
        pass_fds=(write_fd,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(write_fd)
    try:
        with os.fdopen(read_fd, "r") as ready:
            line = ready.readline().strip()
        if not line:
            proc.kill()
            _, err = proc.communicate(timeout=timeout)
            raise RuntimeError(f"server {args} did not report an address: {err}")
        yield line
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
