"""The results options shared by ``run`` and ``demo``: --bundle, --html, --record, --record-seeds.

:func:`results_options` adds the four options to a command and hands the
command one :class:`ResultsOptions` (``results=``) instead, so each command
only needs ``results.apply(routes)`` before the run and
``results.write(report)`` after it.
"""

from __future__ import annotations

import functools
import importlib
import os
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .._extras import MissingExtra, require
from ._common import count_option, stack_options
from ._targets import is_address, parse_seeds, resolve_env

if TYPE_CHECKING:
    from ..report._report import RunReport
    from ..results import Recording

__all__ = [
    "ResultsOptions",
    "check_bundle_path",
    "need_extra",
    "results_options",
    "warm_statistics",
]


def need_extra(module: str, *, extra: str, purpose: str) -> None:
    """Before any work: exit 2 with one ``error:`` line if ``module`` (from ``extra``) is missing.

    Raises:
        SystemExit: code 2, the extra is not installed.
    """
    try:
        require(module, extra=extra, purpose=purpose)
    except MissingExtra as exc:
        click.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None


def warm_statistics() -> None:
    """Import scipy.stats on a daemon thread while the routes run.

    The summary and the JSON report's statistics need it at the end of every
    run, and its import takes a second or more on a busy machine: done
    meanwhile, a run (or a Ctrl+C) ends without waiting for it. Only the CLI
    calls this; importing rlmesh_trio starts no thread.
    """
    thread = threading.Thread(target=_import_quietly, name="warm-scipy", daemon=True)
    thread.start()


def _import_quietly() -> None:
    try:
        importlib.import_module("scipy.stats")
    except Exception:  # the real import, when the statistics are needed, reports it
        pass


def check_bundle_path(path: Path) -> None:
    """Refuse, before any work, a bundle path that cannot hold a bundle.

    Raises:
        click.BadParameter: ``path`` is an existing file not named ``.zip``.
    """
    if path.suffix.lower() != ".zip" and path.exists() and not path.is_dir():
        raise click.BadParameter(
            f"{path} is a file; give a folder, or a path ending .zip", param_hint="--bundle"
        )


def quiet_headless_sdl() -> None:
    """Without a display, point SDL (pygame, which gymnasium's classic envs render with) at
    its dummy video and audio drivers before pygame loads.

    Off-screen ``rgb_array`` rendering needs neither; left alone, SDL probes
    Wayland and prints "error: XDG_RUNTIME_DIR is invalid or not set ...",
    which reads like one of our errors. Settings the user made are kept, and
    with a display (``DISPLAY`` or ``WAYLAND_DISPLAY``) nothing changes.
    """
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("SDL_AUDIODRIVER", "dummy")


class ResultsOptions:
    """What the user asked for: a bundle, an HTML report, and which episodes to film."""

    def __init__(
        self, bundle: Path | None, html: Path | None, record: int, record_seeds: str | None
    ) -> None:
        if bundle is not None:
            check_bundle_path(bundle)
        if html is not None:
            need_extra("plotly", extra="results", purpose="--html (plotly)")
            need_extra("scipy.stats", extra="results", purpose="--html (scipy)")
        seeds = parse_seeds(record_seeds) if record_seeds else None
        self.bundle = bundle
        self.html = html
        self.recording: Recording | None = None
        if record or seeds:
            from ..results import Recording

            need_extra("av", extra="video", purpose="--record (mp4 encoding with PyAV)")
            quiet_headless_sdl()
            # An env made without a render mode: our one warning after the run says so
            # (see warnings()), so gymnasium's own, once per route, would say it twice.
            warnings.filterwarnings(
                "ignore", message=".*calling render method without specifying any render mode"
            )
            self.recording = Recording(first=record, seeds=seeds)

    @property
    def media(self) -> dict[tuple[str, int], list[Any]]:
        """The videos filmed so far (none when not recording)."""
        return self.recording.media if self.recording is not None else {}

    def resolve_env(self, spec: str) -> Any:
        """As :func:`resolve_env`; when filming, a gymnasium id is made now with
        ``render_mode="rgb_array"``, so its frames can be rendered in-process."""
        if self.recording is None or is_address(spec) or ":" in spec:
            return resolve_env(spec)
        resolve_env(spec)  # the id check and its one-line error
        import gymnasium

        return gymnasium.make(spec, render_mode="rgb_array")

    def warnings(self) -> list[str]:
        """What the user asked for and did not get: routes that filmed nothing, and why."""
        if self.recording is None:
            return []
        return [f"--record {problem}" for problem in self.recording.problems()]

    def apply(self, routes: list[Any]) -> list[Any]:
        """The routes, with recording hooks on those that film."""
        return self.recording.apply(routes) if self.recording is not None else routes

    def write(self, report: RunReport, title: str = "rlmesh-trio run") -> list[str]:
        """Write the bundle and the HTML report; returns a line per file written.

        Raises:
            InvalidSpec: the bundle path cannot hold a bundle. OSError: a write failed.
        """
        from ..results import write_html

        media = self.recording.media if self.recording is not None else {}
        lines = []
        try:
            if self.bundle is not None:
                report.export_bundle(self.bundle, media)
                videos = sum(len(refs) for refs in media.values())
                noun = "video" if videos == 1 else "videos"
                lines.append(f"bundle written to {self.bundle} ({videos} {noun})")
            if self.html is not None:
                write_html(report, self.html, media, title=title)
                lines.append(f"HTML report written to {self.html}")
        finally:
            if self.recording is not None:
                self.recording.close()
        return lines


def results_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add --bundle/--html/--record/--record-seeds; the command gets ``results=``."""

    @functools.wraps(command)
    def wrapper(
        *args: Any,
        bundle: Path | None,
        html: Path | None,
        record: int,
        record_seeds: str | None,
        **kwargs: Any,
    ) -> Any:
        warm_statistics()
        try:
            results = ResultsOptions(bundle, html, record, record_seeds)
        except click.BadParameter as exc:
            click.echo(f"error: {exc.format_message()}", err=True)
            raise SystemExit(2) from None
        return command(*args, results=results, **kwargs)

    with_results = stack_options(
        click.option(
            "--bundle",
            type=click.Path(path_type=Path),
            help="Write an rlmesh.result.v1 bundle here (a folder; a zip if it ends .zip).",
        ),
        click.option(
            "--html",
            type=click.Path(dir_okay=False, path_type=Path),
            help="Write a self-contained HTML report here (plots, statistics, videos).",
        ),
        count_option(
            "--record", "Film the first N episodes of each route to mp4 (into the bundle/HTML)."
        ),
        click.option(
            "--record-seeds", help="Also film episodes with these seeds (START:STOP or a list)."
        ),
    )
    return with_results(wrapper)
