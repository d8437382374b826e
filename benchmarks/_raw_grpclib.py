"""Child process for ``hot_path_layers.py`` layer L0: plain asyncio + grpclib, nothing else.

Run as its own process on purpose: once ``trio_asyncio`` is imported (and
``rlmesh_trio`` imports it), ``asyncio.run`` runs on trio-asyncio's loop, so
a plain-asyncio measurement must never import either. Prints
``<wall us> <cpu us>`` per round trip::

    python benchmarks/_raw_grpclib.py tcp://127.0.0.1:PORT N RESOLVE_HEX PREDICT_HEX
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import grpclib.client
import grpclib.const
from grpclib.encoding.base import CodecBase

_JOIN = "/rlmesh.model.v1.ModelService/Join"


class _Raw(CodecBase):
    """Bytes in, bytes out: the caller encodes its own messages."""

    __content_subtype__ = "proto"

    def encode(self, message: Any, message_type: Any) -> bytes:
        return bytes(message)

    def decode(self, data: bytes, message_type: Any) -> Any:
        return data


async def measure(address: str, n: int, resolve: bytes, predict: bytes) -> tuple[float, float]:
    host, port = address.removeprefix("tcp://").rsplit(":", 1)
    channel = grpclib.client.Channel(host, int(port), codec=_Raw())
    try:
        stream = channel.request(_JOIN, grpclib.const.Cardinality.STREAM_STREAM, bytes, bytes)
        async with stream:
            await stream.send_request()
            await stream.send_message(resolve)
            await stream.recv_message()
            for _ in range(50):
                await stream.send_message(predict)
                await stream.recv_message()
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(n):
                await stream.send_message(predict)
                await stream.recv_message()
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            await stream.end()
            while await stream.recv_message() is not None:
                pass
        return wall / n * 1e6, cpu / n * 1e6
    finally:
        channel.close()


def main() -> None:
    address, n, resolve, predict = sys.argv[1:5]
    assert "trio_asyncio" not in sys.modules
    wall, cpu = asyncio.run(
        measure(address, int(n), bytes.fromhex(resolve), bytes.fromhex(predict))
    )
    print(f"{wall} {cpu}")


if __name__ == "__main__":
    main()
