"""The web stack, and the only module that imports it: Starlette served by hypercorn's Trio worker.

Routes: ``/`` the live page, ``/events`` its Server-Sent Events (one JSON
snapshot per change, at most every :data:`~._hub.TICK` seconds),
``/snapshot`` the same once, ``/report`` the final report, ``/video/N`` a
filmed episode. With a token, each needs it (cookie or bearer header);
``/`` without it answers the sign-in page, and ``/?token=...`` signs in.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import quote, unquote

import trio

from .._errors import RlmeshTrioError
from ._hub import STATS_DUTY, STATS_PERIOD, TICK, Hub, warm_statistics
from ._page import SIGN_IN_PAGE, live_page

__all__ = ["COOKIE", "DashboardUnavailable", "require_extra", "serve"]

log = logging.getLogger("rlmesh_trio.dashboard")

COOKIE = "rlmesh_trio_dashboard"
INSTALL_HINT = "pip install 'rlmesh-trio[dashboard]'"
#: A comment line sent when nothing changed for this long, so a gone page is noticed.
KEEPALIVE = 5.0


class DashboardUnavailable(RlmeshTrioError):
    """The dashboard extra (hypercorn, starlette) is not installed."""


def require_extra() -> None:
    """Check the web stack imports.

    Raises:
        DashboardUnavailable: hypercorn or starlette is missing, naming the install command.
    """
    try:
        import hypercorn.trio  # noqa: F401
        import starlette.applications  # noqa: F401
    except ImportError as exc:
        raise DashboardUnavailable(
            f"the dashboard needs the 'dashboard' extra ({exc.name} is missing): {INSTALL_HINT}"
        ) from None


def _guarded(hub: Hub, handler: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
    """``handler``, answering 401 to a request without the token."""
    from starlette.responses import Response

    async def guarded(request: Any) -> Any:
        if not _allowed(hub, request):
            return Response("token required", status_code=401)
        return await handler(request)

    return guarded


def _allowed(hub: Hub, request: Any) -> bool:
    cookie = request.cookies.get(COOKIE)
    return hub.allowed(unquote(cookie) if cookie else None, request.headers.get("authorization"))


def _index(hub: Hub) -> Callable[[Any], Awaitable[Any]]:
    """The live page; ``?token=`` signs in (a cookie), a request without the token gets the form."""
    from starlette.responses import HTMLResponse, RedirectResponse

    page: list[str] = []

    async def index(request: Any) -> Any:
        given = request.query_params.get("token")
        if given is not None and hub.allowed(given, None):
            response = RedirectResponse("./", status_code=303)
            response.set_cookie(COOKIE, quote(given, safe=""), httponly=True, samesite="strict")
            return response
        if not _allowed(hub, request):
            return HTMLResponse(SIGN_IN_PAGE, status_code=401)
        if not page:
            page.append(await trio.to_thread.run_sync(live_page, hub.state.title))
        return HTMLResponse(page[0], headers={"Cache-Control": "no-store"})

    return index


def _app(hub: Hub, stopping: trio.Event) -> Any:
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse, Response, StreamingResponse
    from starlette.routing import Route

    async def snapshot(request: Any) -> Any:
        return Response(hub.snapshot_json(), media_type="application/json")

    async def events(request: Any) -> Any:
        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        stream = _stream(hub, stopping)
        return StreamingResponse(stream, media_type="text/event-stream", headers=headers)

    async def report(request: Any) -> Any:
        if hub.report_html is None:
            return Response("the run has not ended yet", status_code=404)
        hub.report_served()
        return HTMLResponse(hub.report_html)

    async def video(request: Any) -> Any:
        data = await trio.to_thread.run_sync(hub.video_bytes, int(request.path_params["n"]))
        if data is None:
            return Response("no such video", status_code=404)
        return Response(data, media_type="video/mp4")

    async def no_icon(request: Any) -> Any:
        return Response(status_code=204)  # a browser asks; a 404 would log an error

    guarded = {"/snapshot": snapshot, "/events": events, "/report": report, "/video/{n:int}": video}
    routes = [Route("/", _index(hub)), Route("/favicon.ico", no_icon)]
    routes += [Route(path, _guarded(hub, handler)) for path, handler in guarded.items()]
    return Starlette(routes=routes)


async def _stream(hub: Hub, stopping: trio.Event) -> AsyncIterator[str]:
    """The page's event stream: a snapshot per change; ends after the final one."""
    hub.stream_opened()
    try:
        sent = ""
        quiet = 0.0
        while not stopping.is_set():
            text = hub.snapshot_json()
            if text != sent:
                sent, quiet = text, 0.0
                yield f"data: {text}\n\n"
                if text.endswith('"final":true}'):  # the last key of every snapshot
                    hub.final_sent()
                    return
            elif quiet >= KEEPALIVE:
                quiet = 0.0
                yield ": keep-alive\n\n"
            await trio.sleep(TICK)
            quiet += TICK
    finally:
        hub.stream_closed()


async def _refresh(hub: Hub) -> None:
    """Statistics at a bounded rate on a worker thread; new videos each tick.

    The pause after a computation is ``STATS_DUTY`` times what the computation
    itself took, never less than ``STATS_PERIOD``; the statistics' first-use
    imports are done beforehand and not counted (counted, they made the next
    update wait most of a minute).
    """
    await trio.to_thread.run_sync(warm_statistics)
    wait = 0.0
    while True:
        if wait <= 0:
            took = await trio.to_thread.run_sync(hub.refresh_statistics)
            wait = max(STATS_PERIOD, STATS_DUTY * took)
        hub.refresh_videos()
        await trio.sleep(TICK)
        wait -= TICK


def _config(host: str, port: int) -> Any:
    from hypercorn.config import Config

    config = Config()
    config.bind = [f"[{host}]:{port}" if ":" in host else f"{host}:{port}"]
    config.accesslog = None
    config.errorlog = logging.getLogger("rlmesh_trio.dashboard.http")
    config.graceful_timeout = 3.0  # lets a report download finish
    return config


async def serve(
    hub: Hub,
    host: str,
    port: int,
    stopping: trio.Event,
    *,
    feeders: Sequence[Callable[[], Awaitable[None]]] = (),
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the page on ``host:port`` until ``stopping`` is set; ``task_status`` gets the URL.

    ``feeders`` run beside the server (e.g. a ledger follower) and are
    cancelled with it.

    Cancellation: cancelling stops the server and the feeders at once.

    Raises:
        DashboardUnavailable: the extra is not installed. OSError: the address cannot be bound.
    """
    require_extra()
    import hypercorn.trio

    helpers = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_helpers, hub, feeders, helpers)
        binds = await nursery.start(
            lambda task_status: hypercorn.trio.serve(
                _app(hub, stopping),
                _config(host, port),
                shutdown_trigger=stopping.wait,
                task_status=task_status,
            )
        )
        task_status.started(str(binds[0]).rstrip("/") + "/")
        await stopping.wait()
        helpers.cancel()
        # hypercorn shuts down gracefully (graceful_timeout); never wait on it for long.
        nursery.cancel_scope.deadline = trio.current_time() + 5.0


async def _helpers(
    hub: Hub, feeders: Sequence[Callable[[], Awaitable[None]]], scope: trio.CancelScope
) -> None:
    with scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_refresh, hub)
            for feeder in feeders:
                nursery.start_soon(feeder)
