"""A deliberately misbehaving rlmesh-wire-v1 server, run as a subprocess by the fault tests.

It produces the faults a well-behaved server of ours cannot (``MODES``)::

    python tests/_faults_server.py MODE --ready-fd N [--log FILE]

* ``env-bad-slab``: a small episodic env (Dict observation ``pos``/``vel``,
  Discrete(2) actions, ``EPISODE_STEPS`` steps per episode) whose observation
  in episode ``GOOD_EPISODES + 1``, step 2, has a ``vel`` slab 4 bytes short.
* ``env-wrong-generation``: the handshake answers ``compatible=false`` as a
  server of generation ``rlmesh-wire-v2`` would.
* ``env-no-edition``: a valid contract, but the only workflow edition it can
  drive is ``2099.01``.
* ``model-wrong-context``: predict number ``WRONG_CONTEXT_AT`` is answered with
  another route's ``AdapterContext`` (the right envelope request id).
* ``model-release-hang``: ReleaseAdapter is never answered; the stream still
  ends when the client half-closes.
* ``model-wedged``: as ``model-release-hang``, and the stream never ends either.

Every RPC is appended to ``--log`` (one word per line: ``handshake``, ``join``,
``configure``, ``release``, ...) so tests can tell what reached the server.
The bound address goes to ``--ready-fd`` as one line, as ``serve-env`` does.

This is a standalone process: it runs grpclib on a plain asyncio loop
(``asyncio.run``); it is test tooling, not library code.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import betterproto2
import grpclib.const
import grpclib.server
import gymnasium
import numpy as np

from rlmesh_trio import spaces
from rlmesh_trio._protocol import (
    CAP_CONCURRENT_PREDICT,
    PROTOCOL_GENERATION,
    WORKFLOW_EDITION,
    core_pb,
)
from tests._grpc_services import env_pb, model_pb

MODES = (
    "env-bad-slab",
    "env-wrong-generation",
    "env-no-edition",
    "model-wrong-context",
    "model-release-hang",
    "model-wedged",
)
OTHER_GENERATION = "rlmesh-wire-v2"
FUTURE_EDITION = "2099.01"
EPISODE_STEPS = 4
GOOD_EPISODES = 2
WRONG_CONTEXT_AT = 25

OBS_SPACE = gymnasium.spaces.Dict(
    {
        "pos": gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32),
        "vel": gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32),
    }
)
ACTION_SPACE = gymnasium.spaces.Discrete(2)
OBS_SPEC = spaces.from_gymnasium(OBS_SPACE)
ACTION_SPEC = spaces.from_gymnasium(ACTION_SPACE)


class Log:
    def __init__(self, path: str | None) -> None:
        self._file = open(path, "a", buffering=1) if path else None

    def __call__(self, word: str) -> None:
        if self._file is not None:
            self._file.write(word + "\n")


def _observation() -> Any:
    value = {"pos": np.zeros(2, np.float32), "vel": np.full(2, 0.5, np.float32)}
    return spaces.encode_batch(OBS_SPEC, [value])


def _unsupported(join_response: Any, error: Any, code: Any) -> Any:
    """A recoverable UNSUPPORTED error reply (the env and model services alike)."""
    return join_response(error=error(code=code, message="unsupported", is_recoverable=True))


async def _answer(stream: Any, request: Any, response: Any) -> None:
    """Send ``response`` to ``request``: its request id, a token endpoint time."""
    response.request_id = request.request_id
    response.endpoint_total_ns = 1
    await stream.send_message(response)


class FaultyEnv(env_pb.EnvServiceBase):
    def __init__(self, mode: str, log: Log) -> None:
        self.mode = mode
        self.log = log

    def __mapping__(self) -> dict[str, grpclib.const.Handler]:
        join = grpclib.const.Handler(
            self._join,
            grpclib.const.Cardinality.STREAM_STREAM,
            env_pb.JoinRequest,
            env_pb.JoinResponse,
        )
        return {**super().__mapping__(), "/rlmesh.env.v1.EnvService/Join": join}

    async def handshake(self, message: env_pb.HandshakeRequest) -> env_pb.HandshakeResponse:
        self.log("handshake")
        editions = [FUTURE_EDITION] if self.mode == "env-no-edition" else [WORKFLOW_EDITION]
        contract = core_pb.EnvContract(
            spec=core_pb.EnvSpec(
                id="Faulty-v0", action_space=ACTION_SPEC, observation_space=OBS_SPEC
            ),
            num_envs=1,
            autoreset_mode=core_pb.AutoresetMode.DISABLED,
        )
        if self.mode == "env-wrong-generation":
            theirs = message.base.protocol_generation if message.base else "?"
            base = core_pb.HandshakeResponse(
                compatible=False,
                supported_workflow_editions=editions,
                error_message=(
                    f"protocol generation {theirs} not compatible with server {OTHER_GENERATION}"
                ),
            )
            return env_pb.HandshakeResponse(base=base)
        base = core_pb.HandshakeResponse(compatible=True, supported_workflow_editions=editions)
        return env_pb.HandshakeResponse(base=base, env_contract=contract)

    async def _join(self, stream: grpclib.server.Stream[Any, Any]) -> None:
        self.log("join")
        await stream.send_initial_metadata()
        episode_id, seed, steps, reward, started, done_episodes = "", None, 0, 0.0, 0, 0
        async for request in stream:
            kind, body = betterproto2.which_one_of(request, "kind")
            self.log(kind or "empty")
            body_any: Any = body
            if kind == "configure":
                response = env_pb.JoinResponse(configure=env_pb.ConfigureEnvResponse())
            elif kind == "reset":
                episode_id = body_any.episode_ids[0] if body_any.episode_ids else ""
                seed = body_any.seeds[0] if body_any.seeds else None
                steps, reward, started = 0, 0.0, time.time_ns()
                response = env_pb.JoinResponse(
                    reset=env_pb.ResetResponse(observation=_observation())
                )
            elif kind == "step":
                steps += 1
                reward += 1.0
                done = steps >= EPISODE_STEPS
                observation = _observation()
                if done_episodes == GOOD_EPISODES and steps == 2:
                    observation.leaves[1] = observation.leaves[1][:4]  # "vel" 4 bytes short
                completed = []
                if done:
                    done_episodes += 1
                    completed.append(
                        env_pb.EpisodeMetadata(
                            episode_id=episode_id,
                            seed=seed,
                            step_count=steps,
                            cumulative_reward=reward,
                            terminated=True,
                            start_timestamp_ns=started,
                            end_timestamp_ns=time.time_ns(),
                        )
                    )
                response = env_pb.JoinResponse(
                    step=env_pb.StepResponse(
                        observation=observation,
                        rewards=[1.0],
                        terminated_mask=bytes([done]),
                        truncated_mask=b"\x00",
                        completed_episodes=completed,
                    )
                )
            elif kind == "close":
                response = env_pb.JoinResponse(close=env_pb.CloseEnvsResponse())
            else:
                response = _unsupported(
                    env_pb.JoinResponse, env_pb.EnvError, env_pb.EnvErrorCode.UNSUPPORTED
                )
            await _answer(stream, request, response)
            if kind == "close":
                return


class FaultyModel(model_pb.ModelServiceBase):
    def __init__(self, mode: str, log: Log) -> None:
        self.mode = mode
        self.log = log
        self.predicts = 0
        self.contexts: dict[str, model_pb.AdapterContext] = {}

    def __mapping__(self) -> dict[str, grpclib.const.Handler]:
        join = grpclib.const.Handler(
            self._join,
            grpclib.const.Cardinality.STREAM_STREAM,
            model_pb.JoinRequest,
            model_pb.JoinResponse,
        )
        return {**super().__mapping__(), "/rlmesh.model.v1.ModelService/Join": join}

    async def handshake(self, message: model_pb.HandshakeRequest) -> model_pb.HandshakeResponse:
        self.log("handshake")
        return model_pb.HandshakeResponse(
            base=core_pb.HandshakeResponse(
                compatible=True,
                capabilities={CAP_CONCURRENT_PREDICT: "true"},
                supported_workflow_editions=[WORKFLOW_EDITION],
            )
        )

    def _wrong_context(self, context: model_pb.AdapterContext) -> model_pb.AdapterContext:
        for env_id, other in self.contexts.items():
            if env_id != context.env_id:
                return other
        return model_pb.AdapterContext(
            session_id=context.session_id, env_id="another-route", request_id=context.request_id
        )

    async def _join(self, stream: grpclib.server.Stream[Any, Any]) -> None:
        self.log("join")
        await stream.send_initial_metadata()
        action_specs: dict[str, Any] = {}
        async for request in stream:
            kind, body = betterproto2.which_one_of(request, "kind")
            self.log(kind or "empty")
            body_any: Any = body
            if kind == "resolve_adapter":
                action_specs[body_any.context.env_id] = body_any.env_spec.action_space
                response = model_pb.JoinResponse(resolve_adapter=model_pb.ResolveAdapterResponse())
            elif kind == "predict":
                self.predicts += 1
                context = body_any.context
                rows = len(body_any.episode_info)
                spec = action_specs.get(context.env_id, ACTION_SPEC)
                actions = spaces.encode_batch(spec, [self.predicts % 2] * rows)
                answer = context
                if self.mode == "model-wrong-context" and self.predicts == WRONG_CONTEXT_AT:
                    answer = self._wrong_context(context)
                    self.log("wrong-context")
                self.contexts[context.env_id] = context
                response = model_pb.JoinResponse(
                    predict=model_pb.PredictResponse(context=answer, actions=[actions])
                )
            elif kind == "reset_adapter":
                response = model_pb.JoinResponse(reset_adapter=model_pb.ResetAdapterResponse())
            elif kind == "release_adapter":
                if self.mode in ("model-release-hang", "model-wedged"):
                    continue  # never answered
                response = model_pb.JoinResponse(release_adapter=model_pb.ReleaseAdapterResponse())
            elif kind == "close":
                response = model_pb.JoinResponse(close=model_pb.CloseParticipantResponse())
            else:
                response = _unsupported(
                    model_pb.JoinResponse, model_pb.ModelError, model_pb.ModelErrorCode.UNSUPPORTED
                )
            await _answer(stream, request, response)
            if kind == "close":
                return
        self.log("half-close")
        if self.mode == "model-wedged":
            await asyncio.Event().wait()  # never end the stream


async def main(mode: str, ready_fd: int | None, log_path: str | None) -> None:
    log = Log(log_path)
    service: Any = FaultyEnv(mode, log) if mode.startswith("env-") else FaultyModel(mode, log)
    server = grpclib.server.Server([service])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    await server.start(sock=sock)
    host, port = sock.getsockname()[:2]
    if ready_fd is not None:
        with os.fdopen(ready_fd, "w") as ready:
            ready.write(f"tcp://{host}:{port}\n")
    await server.wait_closed()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=MODES)
    parser.add_argument("--ready-fd", type=int)
    parser.add_argument("--log")
    args = parser.parse_args()
    assert PROTOCOL_GENERATION == "rlmesh-wire-v1"
    asyncio.run(main(args.mode, args.ready_fd, args.log))
