"""Headless Chromium for the HTML report tests: dump the DOM after scripts ran, or screenshot."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

#: How every test starts Chromium here: headless, as root, with nothing reaching outside.
HEADLESS_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
_FLAGS = (
    *HEADLESS_FLAGS,
    # Scripts (plots, video metadata) run on virtual time before the dump/screenshot.
    "--virtual-time-budget=15000",
)


def _chromium(page: Path, *extra: str) -> str:
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory(prefix="rlmesh-trio-chromium-") as profile:
        result = subprocess.run(
            [CHROMIUM, *_FLAGS, f"--user-data-dir={profile}", *extra, page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def selftest(page: Path) -> dict[str, Any]:
    """What the page's own self-test wrote into ``<pre id="selftest">`` once loaded."""
    dom = _chromium(page, "--dump-dom")
    found = re.search(r'<pre id="selftest">([^<]*)</pre>', dom)
    assert found is not None and found.group(1), "the page's self-test did not run"
    return dict(json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&")))


def screenshot(page: Path, out: Path, size: str = "1280,2200") -> Path:
    _chromium(page, f"--screenshot={out.resolve()}", f"--window-size={size}")
    return out
