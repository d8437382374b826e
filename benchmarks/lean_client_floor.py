"""How fast can a Python client drive cases 1 and 3 at all? A lean-client floor (issue 7 item 3).

A deliberately minimal client (NOT a design to ship; blocking sockets, or
Trio sockets for the per-step I/O): one Join
stream per server opened with ``h2``, then per step hand-built HTTP/2 DATA
frames and hand-rolled protobuf for the four hot envelopes (predict and
step, request and response); setup and per-episode messages (resolve,
reset) use betterproto2. It runs the same seeds and policy as
``compare_rlmesh.py`` against rlmesh 0.1.0's servers and checks the
episodes, so the numbers say what a lean transport + codec could reach in
Python, next to what our runtime and rlmesh do in the same process::

    python benchmarks/lean_client_floor.py [--episodes 3] [--pairs 3]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import struct
import sys
import time
import uuid
import warnings
from typing import Any

os.environ.setdefault("RLMESH_WORKFLOW_EDITION", "2026.06")
warnings.filterwarnings("ignore")

import gymnasium as gym  # noqa: E402
import h2.connection  # noqa: E402

import rlmesh_trio as rt  # noqa: E402
from rlmesh_trio import spaces  # noqa: E402
from rlmesh_trio._demo_policy import cartpole_policy  # noqa: E402
from rlmesh_trio._wire import WORKFLOW_EDITION, core_pb, env_pb, model_pb, spaces_pb  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _servers  # noqa: E402
from transport_floor import _grpc_frame, _h2_roundtrip, _RawReader  # noqa: E402

_ENV_JOIN = "/rlmesh.env.v1.EnvService/Join"
_MODEL_JOIN = "/rlmesh.model.v1.ModelService/Join"


# ---- hand-rolled protobuf for the hot envelopes ----------------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _ld(tag: bytes, payload: bytes) -> bytes:
    return tag + _varint(len(payload)) + payload


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> Any:
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _read_varint(buf, pos)
        wire = key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _read_varint(buf, pos)
        elif wire == 2:
            n, pos = _read_varint(buf, pos)
            value, pos = buf[pos : pos + n], pos + n
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield key >> 3, value


def predict_envelope(ctx_prefix: bytes, request_id: bytes, obs_leaf: bytes, info: bytes) -> bytes:
    """JoinRequest{predict=PredictRequest{context, observation, episode_info}, request_id}."""
    context = ctx_prefix + _ld(b"\x1a", request_id)
    predict = _ld(b"\x0a", context) + _ld(b"\x12", _ld(b"\x0a", obs_leaf)) + info
    return _ld(b"\x12", predict) + _ld(b"\x2a", request_id)


def step_envelope(request_id: bytes, action_leaf: bytes, timeout_ms: int, eid: bytes) -> bytes:
    """JoinRequest{step=StepRequest{action, timeout_ms, episode_ids}, request_id}."""
    step = _ld(b"\x0a", _ld(b"\x0a", action_leaf)) + b"\x10" + _varint(timeout_ms)
    step += _ld(b"\x22", eid)
    return _ld(b"\x12", step) + _ld(b"\x2a", request_id)


def predict_action(data: bytes) -> bytes:
    """The first action leaf of a predict response (a real client also checks the context)."""
    for number, value in _fields(data):
        if number == 2:
            for n2, v2 in _fields(value):
                if n2 == 2:
                    for n3, v3 in _fields(v2):
                        if n3 == 1:
                            return bytes(v3)
        elif number == 10:
            raise RuntimeError(f"model error: {model_pb.ModelError.parse(value)}")
    raise RuntimeError("no predict arm")


def step_result(data: bytes) -> tuple[bytes, float, bool]:
    """(observation leaf, reward, episode completed) of a step response."""
    obs, reward, done = b"", 0.0, False
    for number, value in _fields(data):
        if number == 2:
            for n2, v2 in _fields(value):
                if n2 == 1:
                    obs = bytes(next(v for n, v in _fields(v2) if n == 1))
                elif n2 == 2:
                    reward = struct.unpack("<d", v2[:8])[0]
                elif n2 == 6:
                    done = True
        elif number == 10:
            raise RuntimeError(f"env error: {env_pb.EnvError.parse(value)}")
    return obs, reward, done


# ---- the loop ------------------------------------------------------------------------


class _Join:
    def __init__(self, address: str, path: str) -> None:
        host, port = address.removeprefix("tcp://").rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        self.conn.increment_flow_control_window(2**30)
        self.sid = self.conn.get_next_available_stream_id()
        self.conn.send_headers(
            self.sid,
            [
                (":method", "POST"),
                (":scheme", "http"),
                (":path", path),
                (":authority", f"{host}:{port}"),
                ("content-type", "application/grpc"),
                ("te", "trailers"),
            ],
        )
        self.conn.increment_flow_control_window(2**30, stream_id=self.sid)
        self.sock.sendall(self.conn.data_to_send())
        self.reader: _RawReader | None = None
        self.header_tail = b"\x00\x00" + self.sid.to_bytes(4, "big")

    def first(self, payload: bytes) -> None:
        """The first message goes through h2 (it also reads the response headers)."""
        _h2_roundtrip(self.sock, self.conn, self.sid, _grpc_frame(payload))
        self.reader = _RawReader(self.sock, self.sid)

    def call(self, payload: bytes) -> bytes:
        body = b"\x00" + len(payload).to_bytes(4, "big") + payload
        self.sock.sendall(len(body).to_bytes(3, "big") + self.header_tail + body)
        assert self.reader is not None
        return self.reader.message()

    def close(self) -> None:
        self.sock.close()


class _TrioReader:
    """``_RawReader`` over a Trio socket: the same frame walk, awaiting ``recv``."""

    def __init__(self, sock: Any, sid: int) -> None:
        self.sock = sock
        self.sid = sid
        self.buf = bytearray()

    async def _fill(self, need: int) -> None:
        while len(self.buf) < need:
            chunk = await self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk

    async def message(self) -> bytes:
        while True:
            await self._fill(9)
            length = int.from_bytes(self.buf[0:3], "big")
            kind = self.buf[3]
            await self._fill(9 + length)
            body = bytes(self.buf[9 : 9 + length])
            del self.buf[: 9 + length]
            if kind == 0 and length:  # DATA (window updates omitted: runs stay far below 1 GiB)
                return body[5:]
            if kind in (3, 7):
                raise ConnectionError("stream ended")


class _TrioCalls:
    """Per-step calls of a :class:`_Join` over a Trio socket (after the blocking setup)."""

    def __init__(self, join: _Join) -> None:
        import trio

        self.sock = trio.socket.from_stdlib_socket(join.sock)
        self.reader = _TrioReader(self.sock, join.sid)
        self.header_tail = join.header_tail
        assert join.reader is not None and not join.reader.buf

    async def call(self, payload: bytes) -> bytes:
        body = b"\x00" + len(payload).to_bytes(4, "big") + payload
        await self.sock.send(len(body).to_bytes(3, "big") + self.header_tail + body)
        return await self.reader.message()


def _bp_predict(session: str, env_id: str, rid: bytes, obs: bytes, eid: str, seed: int) -> bytes:
    request_id = rid.decode()
    return bytes(
        model_pb.JoinRequest(
            request_id=request_id,
            predict=model_pb.PredictRequest(
                context=model_pb.AdapterContext(
                    session_id=session, env_id=env_id, request_id=request_id
                ),
                observation=spaces_pb.SpaceValue(leaves=[obs]),
                episode_info=[model_pb.EpisodeInfo(episode_id=eid, seed=seed)],
            ),
        )
    )


def _bp_action(data: bytes) -> bytes:
    reply = model_pb.JoinResponse.parse(data).predict
    assert reply is not None
    return reply.actions[0].leaves[0]


def _bp_step(rid: bytes, action: bytes, eid: str) -> bytes:
    return bytes(
        env_pb.JoinRequest(
            request_id=rid.decode(),
            step=env_pb.StepRequest(
                action=spaces_pb.SpaceValue(leaves=[action]), timeout_ms=30000, episode_ids=[eid]
            ),
        )
    )


def _bp_step_result(data: bytes) -> tuple[bytes, float, bool]:
    reply = env_pb.JoinResponse.parse(data).step
    assert reply is not None and reply.observation is not None
    return reply.observation.leaves[0], reply.rewards[0], bool(reply.completed_episodes)


def run_lean(
    env_addr: str,
    model_addr: str | None,
    seeds: list[int],
    *,
    use_trio: bool = False,
    betterproto: bool = False,
) -> tuple[int, dict[int, Any]]:
    if use_trio:
        import trio

        return trio.run(_run_lean_async, env_addr, model_addr, seeds, True, betterproto)
    import asyncio

    return asyncio.run(_run_lean_async(env_addr, model_addr, seeds, False, betterproto))


async def _run_lean_async(
    env_addr: str, model_addr: str | None, seeds: list[int], use_trio: bool, betterproto: bool
) -> tuple[int, dict[int, Any]]:
    """The loop; with ``use_trio`` the per-step I/O awaits Trio sockets, else it blocks.

    With ``betterproto`` the four hot envelopes go through betterproto2 instead
    of the hand-rolled codec (to separate the codec's share from the transport's).
    """
    g = gym.make("CartPole-v1")
    spec = core_pb.EnvSpec(
        action_space=spaces.from_gymnasium(g.action_space),
        observation_space=spaces.from_gymnasium(g.observation_space),
    )
    act_spec = spec.action_space
    assert act_spec is not None
    env = _Join(env_addr, _ENV_JOIN)
    model = _Join(model_addr, _MODEL_JOIN) if model_addr else None
    session, env_id = "lean", "lean-env"
    try:
        env.first(
            bytes(
                env_pb.JoinRequest(
                    request_id="c0",
                    configure=env_pb.ConfigureEnvRequest(
                        selected_workflow_edition=WORKFLOW_EDITION
                    ),
                )
            )
        )
        if model is not None:
            ctx = model_pb.AdapterContext(session_id=session, env_id=env_id, request_id="r0")
            model.first(
                bytes(
                    model_pb.JoinRequest(
                        request_id="r0",
                        resolve_adapter=model_pb.ResolveAdapterRequest(
                            context=ctx,
                            env_spec=spec,
                            selected_workflow_edition=WORKFLOW_EDITION,
                            execution_horizon=1,
                        ),
                    )
                )
            )
        ctx_prefix = _ld(b"\x0a", session.encode()) + _ld(b"\x12", env_id.encode())
        env_call: Any
        model_call: Any
        if use_trio:
            env_call = _TrioCalls(env).call
            model_call = _TrioCalls(model).call if model is not None else None
        else:

            async def env_call(payload: bytes) -> bytes:
                return env.call(payload)

            async def model_call(payload: bytes) -> bytes:
                assert model is not None
                return model.call(payload)

        steps = 0
        seq = 0
        episodes: dict[int, Any] = {}
        for seed in seeds:
            eid = str(uuid.uuid4())
            reset = env_pb.JoinRequest(
                request_id=f"e{seq}",
                reset=env_pb.ResetRequest(seeds=[seed], timeout_ms=30000, episode_ids=[eid]),
            )
            reply = env_pb.JoinResponse.parse(await env_call(bytes(reset)))
            assert reply.reset is not None and reply.reset.observation is not None
            obs = reply.reset.observation.leaves[0]
            info = _ld(b"\x1a", bytes(model_pb.EpisodeInfo(episode_id=eid, seed=seed)))
            eid_b = eid.encode()
            n, total = 0, 0.0
            while True:
                seq += 1
                rid = f"{env_id}:step_observation:{seq:06d}".encode()
                if model is not None and betterproto:
                    action = _bp_action(
                        await model_call(_bp_predict(session, env_id, rid, obs, eid, seed))
                    )
                elif model is not None:
                    action = predict_action(
                        await model_call(predict_envelope(ctx_prefix, rid, obs, info))
                    )
                else:
                    theta, theta_dot = struct.unpack_from("<2f", obs, 8)
                    action = struct.pack("<q", cartpole_policy([0.0, 0.0, theta, theta_dot]))
                if betterproto:
                    obs, reward, done = _bp_step_result(
                        await env_call(_bp_step(b"s%d" % seq, action, eid))
                    )
                else:
                    obs, reward, done = step_result(
                        await env_call(step_envelope(b"s%d" % seq, action, 30000, eid_b))
                    )
                n += 1
                total += reward
                if done:
                    break
            steps += n
            episodes[seed] = (n, total)
        return steps, episodes
    finally:
        env.close()
        if model is not None:
            model.close()


def main() -> None:
    import rlmesh
    import rlmesh.numpy as rnp

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    seeds = list(range(args.episodes))
    with _servers.rlmesh_env() as env, _servers.rlmesh_model() as model:
        native = rnp.Model(cartpole_policy)
        sides: dict[str, Any] = {
            "1 lean floor, blocking (served model)": lambda: run_lean(
                env.address, model.address, seeds
            ),
            "1 lean floor, Trio sockets": lambda: run_lean(
                env.address, model.address, seeds, use_trio=True
            ),
            "1 lean Trio sockets + betterproto2": lambda: run_lean(
                env.address, model.address, seeds, use_trio=True, betterproto=True
            ),
            "1 ours (run_routes)": lambda: _ours(env.address, model.address, seeds),
            "1 rlmesh.run(RemoteModel)": lambda: _theirs(
                lambda: rlmesh.run(rlmesh.RemoteModel(model.address), env.address, seeds=seeds)
            ),
            "3 lean floor, blocking (in-process)": lambda: run_lean(env.address, None, seeds),
            "3 lean floor, Trio sockets": lambda: run_lean(env.address, None, seeds, use_trio=True),
            "3 lean Trio sockets + betterproto2": lambda: run_lean(
                env.address, None, seeds, use_trio=True, betterproto=True
            ),
            "3 ours (run_routes)": lambda: _ours(env.address, cartpole_policy, seeds),
            "3 rlmesh.run(numpy.Model)": lambda: _theirs(
                lambda: rlmesh.run(native, env.address, seeds=seeds)
            ),
        }
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
        reference: dict[int, Any] | None = None
        for _ in range(args.pairs):
            for name, fn in sides.items():
                w0, c0 = time.perf_counter(), time.process_time()
                steps, episodes = fn()
                wall, cpu = time.perf_counter() - w0, time.process_time() - c0
                reference = reference or episodes
                if episodes != reference:
                    print(f"MISMATCH {name}: {episodes} vs {reference}")
                results[name].append((steps / wall, cpu / steps * 1e6))
    print(f"{'client':<36} {'steps/s':>8} {'client cpu us/step':>19}")
    for name, samples in results.items():
        rate = statistics.median(s[0] for s in samples)
        cpu = statistics.median(s[1] for s in samples)
        print(f"{name:<36} {rate:8.0f} {cpu:19.0f}")


def _ours(env: str, model: Any, seeds: list[int]) -> tuple[int, dict[int, Any]]:
    report = rt.run([rt.Route(env=env, model=model, seeds=seeds)])
    return report.total_steps, {
        e.seed if e.seed is not None else -1: (e.steps, float(e.reward)) for e in report.episodes
    }


def _theirs(fn: Any) -> tuple[int, dict[int, Any]]:
    result = fn()
    return int(result.total_steps), {
        e.seed: (int(e.steps), float(e.reward)) for e in result.episodes
    }


if __name__ == "__main__":
    main()
