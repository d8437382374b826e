"""Client CPU per round trip with no server process: a fake wire-v1 server in the same Trio run.

The cross-process cases of ``compare_rlmesh.py`` are noisy on a loaded box
(the servers' scheduling dominates). This bench runs a minimal HTTP/2 + gRPC
server as a Trio task in the client's own run: ``h2`` for the handshake and
stream setup, hand-framed canned replies for the hot Join messages (an env
step and a model predict, the shapes rlmesh 0.1.0 servers send). It then
drives :class:`rlmesh_trio.RemoteEnv` and :class:`rlmesh_trio.RemoteModel`
through their public API and reports CPU microseconds per step (one env step
and one predict). The server's share is small and the same on every branch,
so two checkouts compare fairly in one process each::

    python benchmarks/client_hot_path.py [--steps 20000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import h2.config
import h2.connection
import h2.events
import trio

from rlmesh_trio import RemoteEnv, RemoteModel
from rlmesh_trio._protocol import WORKFLOW_EDITION, env_pb, model_pb, spaces_pb
from rlmesh_trio._wire._pb import key, number

_DATA = 0


def _message(payload: bytes) -> bytes:
    return b"\x00" + len(payload).to_bytes(4, "big") + payload


def _data_frame(stream_id: int, payload: bytes) -> bytes:
    body = _message(payload)
    return len(body).to_bytes(3, "big") + b"\x00\x00" + stream_id.to_bytes(4, "big") + body


def _ld(tag: int, payload: bytes) -> bytes:
    size = len(payload)
    out = bytearray([tag])
    while size >= 0x80:
        out.append(size & 0x7F | 0x80)
        size >>= 7
    out.append(size)
    return bytes(out) + payload


def _top_fields(data: bytes) -> dict[int, bytes]:
    """Top-level length-delimited fields of a Join request (one-byte keys are enough here)."""
    out: dict[int, bytes] = {}
    pos = 0
    while pos < len(data):
        tag = data[pos]
        pos += 1
        if tag & 7 != 2:
            while data[pos] & 0x80:
                pos += 1
            pos += 1
            continue
        size, shift = 0, 0
        while True:
            byte = data[pos]
            pos += 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        out[tag >> 3] = data[pos : pos + size]
        pos += size
    return out


class _FakeServer:
    """Answers Handshake (unary) and Join (bidi) on one connection."""

    def __init__(self, handshake: bytes, answer: object) -> None:
        self.handshake = handshake
        self.answer = answer  # (message bytes) -> reply message bytes
        self.consumed = 0  # DATA bytes not yet credited back to the client

    async def serve(self, stream: trio.SocketStream) -> None:
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        conn = h2.connection.H2Connection(config)
        conn.initiate_connection()
        conn.increment_flow_control_window(2**30)
        await stream.send_all(conn.data_to_send())
        join: int | None = None
        pending = b""
        unary: dict[int, bytes] = {}
        while True:
            data = await stream.receive_some(1 << 18)
            if not data:
                return
            if join is None:
                join, extra = self._h2_events(conn, conn.receive_data(data), unary)
                out = conn.data_to_send() + extra
            else:
                pending, out = self._hot(conn, join, pending + data)
            if out:
                await stream.send_all(out)

    def _h2_events(
        self, conn: h2.connection.H2Connection, events: list, unary: dict
    ) -> tuple[int | None, bytes]:
        join = None
        extra = b""
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                path = dict(event.headers)[":path"]
                if path.endswith("/Join"):
                    join = event.stream_id
                    conn.send_headers(
                        join, [(":status", "200"), ("content-type", "application/grpc")]
                    )
                else:
                    unary[event.stream_id] = b""
            elif isinstance(event, h2.events.DataReceived) and event.stream_id == join:
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                extra += self._hot(conn, join, _data_frame(join, event.data[5:]))[1]
            elif isinstance(event, h2.events.DataReceived):
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                unary[event.stream_id] = unary.get(event.stream_id, b"") + event.data
            elif isinstance(event, h2.events.StreamEnded) and event.stream_id in unary:
                sid = event.stream_id
                conn.send_headers(sid, [(":status", "200"), ("content-type", "application/grpc")])
                conn.send_data(sid, _message(self.handshake))
                conn.send_headers(sid, [("grpc-status", "0")], end_stream=True)
        return join, extra

    def _hot(self, conn: h2.connection.H2Connection, join: int, data: bytes) -> tuple[bytes, bytes]:
        out = bytearray()
        pos = 0
        while len(data) - pos >= 9:
            length = int.from_bytes(data[pos : pos + 3], "big")
            end = pos + 9 + length
            if end > len(data):
                break
            kind, stream_id = data[pos + 3], int.from_bytes(data[pos + 5 : pos + 9], "big")
            if kind == _DATA and stream_id == join:
                self.consumed += length
                if self.consumed >= 32768:  # credit the client back in batches, as servers do
                    for target in (0, join):
                        out += b"\x00\x00\x04\x08\x00" + target.to_bytes(4, "big")
                        out += self.consumed.to_bytes(4, "big")
                    self.consumed = 0
                body, at = data[pos + 9 : end], 0
                while at < len(body):
                    size = int.from_bytes(body[at + 1 : at + 5], "big")
                    out += _data_frame(join, self.answer(body[at + 5 : at + 5 + size]))  # type: ignore[operator]
                    at += 5 + size
            else:
                conn.receive_data(data[pos:end])
                out += conn.data_to_send()
            pos = end
        return data[pos:], bytes(out)


_OBS = spaces_pb.SpaceValue(leaves=[b"\x00" * 16])
_STEP_BODY = bytes(
    env_pb.StepResponse(
        observation=_OBS,
        rewards=[1.0],
        terminated_mask=b"\x00",
        truncated_mask=b"\x00",
        infos=spaces_pb.MetaMap(),
    )
)
_ENV_COUNTERS = bytes(
    env_pb.JoinResponse(
        endpoint_total_ns=157218, decode_ns=2535, user_ns=133333, encode_ns=16334, queue_ns=5592
    )
)
_MODEL_COUNTERS = bytes(
    model_pb.JoinResponse(
        endpoint_total_ns=108999,
        decode_ns=2262,
        user_ns=102475,
        encode_ns=3230,
        adapter_ns=6165,
        in_flight=1,
    )
)
_ACTION = bytes(spaces_pb.SpaceValue(leaves=[b"\x00" * 8]))
_ENV_STEP = key(env_pb.JoinResponse, "step")[0]
_ENV_RID_IN = number(env_pb.JoinRequest, "request_id")
_ENV_RID = key(env_pb.JoinResponse, "request_id")[0]
_MODEL_PREDICT_IN = number(model_pb.JoinRequest, "predict")
_MODEL_RID_IN = number(model_pb.JoinRequest, "request_id")
_CONTEXT_IN = number(model_pb.PredictRequest, "context")
_MODEL_PREDICT = key(model_pb.JoinResponse, "predict")[0]
_MODEL_RID = key(model_pb.JoinResponse, "request_id")[0]
_CONTEXT = key(model_pb.PredictResponse, "context")[0]
_ACTIONS = key(model_pb.PredictResponse, "actions")[0]


def _env_answer(message: bytes) -> bytes:
    rid = _top_fields(message)[_ENV_RID_IN]
    if rid == b"grpc-req-1":  # configure
        configure = env_pb.ConfigureEnvResponse()
        return bytes(env_pb.JoinResponse(configure=configure, request_id=rid.decode()))
    return _ld(_ENV_STEP, _STEP_BODY) + _ld(_ENV_RID, rid) + _ENV_COUNTERS


def _model_answer(message: bytes) -> bytes:
    fields = _top_fields(message)
    context = _top_fields(fields[_MODEL_PREDICT_IN])[_CONTEXT_IN]
    body = _ld(_CONTEXT, context) + _ld(_ACTIONS, _ACTION)
    return _ld(_MODEL_PREDICT, body) + _ld(_MODEL_RID, fields[_MODEL_RID_IN]) + _MODEL_COUNTERS


async def _listen(server: _FakeServer, nursery: trio.Nursery) -> str:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]

    async def accept() -> None:
        while True:
            stream = await listeners[0].accept()
            nursery.start_soon(server.serve, stream)

    nursery.start_soon(accept)
    return f"127.0.0.1:{port}"


async def _run(steps: int, repeats: int) -> list[float]:
    handshake = bytes(env_pb.HandshakeResponse())
    async with trio.open_nursery() as nursery:
        env_addr = await _listen(_FakeServer(handshake, _env_answer), nursery)
        model_addr = await _listen(_FakeServer(handshake, _model_answer), nursery)
        env, model = RemoteEnv(env_addr), RemoteModel(model_addr)
        await env.configure(WORKFLOW_EDITION)
        step = env_pb.StepRequest(action=_OBS, timeout_ms=300000, episode_ids=["e" * 36])
        info = [model_pb.EpisodeInfo(episode_id="e" * 36, seed=0)]
        results = []
        for _ in range(repeats + 1):
            t0 = time.process_time()
            for i in range(steps):
                await env.step(step)
                context = model_pb.AdapterContext(
                    session_id="route-0",
                    env_id="x" * 36,
                    request_id=f"{'x' * 36}:step_observation:{i:06d}",
                )
                await model.predict(
                    model_pb.PredictRequest(context=context, observation=_OBS, episode_info=info)
                )
            results.append((time.process_time() - t0) / steps * 1e6)
        nursery.cancel_scope.cancel()
    return results[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    results = trio.run(_run, args.steps, args.repeats)
    print(
        f"{os.path.dirname(os.path.dirname(sys.modules['rlmesh_trio'].__file__))} "
        f"client+fake-server cpu us/step median {statistics.median(results):.1f} "
        f"runs {' '.join(f'{r:.1f}' for r in results)}"
    )


if __name__ == "__main__":
    main()
