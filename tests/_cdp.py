"""A small Chrome DevTools Protocol client for the dashboard's browser tests.

Starts headless Chromium with ``--remote-debugging-port=0``, attaches to one
page over the browser's websocket (``websockets``' sync client), and
collects every script error the page reports: uncaught exceptions
(``Runtime.exceptionThrown``), ``console.error`` calls and error entries of
the ``Log`` domain (failed loads included).
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import re
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from websockets.sync.client import connect  # dev extra

from ._browser import CHROMIUM, HEADLESS_FLAGS

_FLAGS = (
    *HEADLESS_FLAGS,
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)


class Browser:
    """One headless Chromium and one page in it; use as a context manager."""

    def __init__(self, width: int = 1280, height: int = 1000) -> None:
        assert CHROMIUM is not None
        self._profile = tempfile.TemporaryDirectory(prefix="rlmesh-trio-cdp-")
        self._process = subprocess.Popen(
            [CHROMIUM, *_FLAGS, f"--user-data-dir={self._profile.name}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._ids = itertools.count(1)
        self.errors: list[str] = []
        self._stack = contextlib.ExitStack()
        self._socket = self._stack.enter_context(
            connect(self._devtools_url(), max_size=None, open_timeout=60)
        )
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self._session = attached["sessionId"]
        for domain in ("Runtime.enable", "Log.enable", "Page.enable"):
            self.call(domain)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    def _devtools_url(self) -> str:
        """The browser's websocket address, read from the line Chromium prints on stderr."""
        assert self._process.stderr is not None
        found: list[str] = []
        done = threading.Event()

        def read() -> None:
            assert self._process.stderr is not None
            for line in self._process.stderr:
                match = re.search(r"DevTools listening on (ws://\S+)", line)
                if match and not found:
                    found.append(match.group(1))
                    done.set()
            done.set()

        threading.Thread(target=read, daemon=True).start()
        assert done.wait(90) and found, "chromium did not open its DevTools port"
        return found[0]

    def pids(self) -> list[int]:
        """Chromium's process and its children (from /proc), for CPU accounting."""
        found, todo = [], [self._process.pid]
        while todo:
            pid = todo.pop()
            found.append(pid)
            try:
                children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            except OSError:
                continue
            todo.extend(int(c) for c in children)
        return found

    # -- protocol ----------------------------------------------------------------
    def _call(self, method: str, params: dict[str, Any] | None = None, session: str = "") -> Any:
        message_id = next(self._ids)
        message: dict[str, Any] = {"id": message_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self._socket.send(json.dumps(message))
        while True:
            reply = json.loads(self._socket.recv(timeout=60))
            if reply.get("id") == message_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._event(reply)

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return self._call(method, params, self._session)

    def _event(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text")
            self.errors.append(f"exception: {text}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            args = [str(a.get("value", a.get("description", ""))) for a in params.get("args", [])]
            self.errors.append("console.error: " + " ".join(args))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            self.errors.append(f"log: {entry.get('text')} ({entry.get('url', '')})")

    # -- page --------------------------------------------------------------------
    def open(self, url: str) -> None:
        self.call("Page.navigate", {"url": url})

    def evaluate(self, expression: str) -> Any:
        try:
            result = self.call(
                "Runtime.evaluate", {"expression": expression, "returnByValue": True}
            )
        except RuntimeError as exc:
            if "navigated" in str(exc):  # the page moved on (to the report) meanwhile
                return None
            raise
        if "exceptionDetails" in result:
            return None  # e.g. the page is between documents
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 60.0, what: str = "") -> Any:
        """Poll ``expression`` until it is truthy and return its value; fail after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what or expression}")
            time.sleep(0.1)

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        path.write_bytes(base64.b64decode(data["data"]))
        return path

    def close(self) -> None:
        try:
            self._stack.close()
        finally:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
