"""The client holds a hostile server (issue 22): a server that floods frames on the
connection ends it, with the route's usual connection loss, before the flood is over.

The server is raw bytes on loopback (a Trio listener on port 0): it reads the client's
preface, sends its SETTINGS, then one flood of frames our budgets ration, and counts
how much of it went out before the client closed the connection.
"""

from __future__ import annotations

import hyperframe.frame
import pytest
import trio

from .._faults_raw import ENV_JOIN, RawStream, StreamEnd

FLOOD_FRAMES = 20_000
BATCH = 500
CLIENT_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def _window_update() -> hyperframe.frame.Frame:
    update = hyperframe.frame.WindowUpdateFrame(0)
    update.window_increment = 1
    return update


FLOODS = {
    "settings": lambda: hyperframe.frame.SettingsFrame(0),
    "ping": lambda: hyperframe.frame.PingFrame(0, opaque_data=b"hostile!"),
    "empty_data": lambda: hyperframe.frame.DataFrame(1),
    "rst": lambda: hyperframe.frame.RstStreamFrame(1, error_code=0x8),
    "window_update": _window_update,
}


async def _flood(stream: trio.SocketStream, payload: bytes, sent: list[int]) -> None:
    received = b""
    while len(received) < len(CLIENT_PREFACE):
        chunk = await stream.receive_some(65536)
        if not chunk:
            return
        received += chunk
    settings = hyperframe.frame.SettingsFrame(0).serialize()
    ack = hyperframe.frame.SettingsFrame(0, flags=["ACK"]).serialize()
    try:
        await stream.send_all(settings + ack)
        async with trio.open_nursery() as nursery:

            async def drain() -> None:
                while await stream.receive_some(65536):
                    pass
                nursery.cancel_scope.cancel()

            nursery.start_soon(drain)
            for _ in range(FLOOD_FRAMES // BATCH):
                await stream.send_all(payload * BATCH)
                sent[0] += BATCH
            nursery.cancel_scope.cancel()
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


@pytest.mark.parametrize("kind", sorted(FLOODS))
def test_a_servers_frame_flood_ends_the_connection_as_a_loss(kind: str) -> None:
    payload = FLOODS[kind]().serialize()
    sent = [0]

    async def main() -> StreamEnd:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:

            async def serve_one() -> None:
                stream = await listeners[0].accept()
                async with stream:
                    await _flood(stream, payload, sent)

            nursery.start_soon(serve_one)
            raw = RawStream(f"127.0.0.1:{port}", ENV_JOIN)
            try:
                with trio.fail_after(10):
                    await raw.open()
                    with pytest.raises(StreamEnd) as ended:
                        await raw.headers()
            finally:
                await raw.close()
                nursery.cancel_scope.cancel()
        return ended.value

    ended = trio.run(main)
    assert ended.status.name == "UNAVAILABLE"
    # The client closed the connection well before the flood was over (each budget is
    # 100 to 10k frames; the flood 20k).
    assert sent[0] < FLOOD_FRAMES
