"""``RemoteEnv``: a wire-v1 env endpoint reached over gRPC, as a ``RuntimeEnv``
(and, for a lane server with array spaces, a ``LaneBlockEnv``: see ``_remote_lanes``).

Errors raise :class:`EnvRpcError` with ``step=0``: the client does not know
the runtime step, so the driver re-raises with the real one (``message``,
``code`` and ``recoverable`` are attributes for that).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import trio

from ..._blocks import BlockReset
from ..._endpoints import EndpointInfo, Reply
from ..._errors import ConnectError, EnvRpcError, HandshakeError
from ..._protocol import env_pb
from ..._wire import GrpcStatus
from ..._wire._client_codec import decode_env_response, encode_env_step
from .._handshake import ENV_COMPONENT, parse_env_handshake
from ._channel import time_limit
from ._join import JoinSession, SessionClosed
from ._lane_values import ServedBlockStep
from ._remote_base import (
    CLOSE_GRACE,
    SHUTDOWN_CONNECTION_LOST,
    RemoteEndpoint,
    code_label,
    reply_telemetry,
)
from ._remote_lanes import RemoteLaneBlock, block_info

__all__ = ["SHUTDOWN_CONNECTION_LOST", "RemoteEnv"]


class RemoteEnv(RemoteEndpoint):
    """A remote env endpoint; the address and options are :class:`RemoteEndpoint`'s."""

    _session: JoinSession[env_pb.JoinResponse] | None
    _kind: ClassVar[str] = "env"
    _pb: ClassVar[Any] = env_pb
    _block: RemoteLaneBlock | None = None

    async def connect(self) -> EndpointInfo:
        """Handshake: learn the contract, editions and capabilities. Takes no session slot.

        A handshake starts a new use of the endpoint (a run): a Join session
        left open and idle by an earlier run is half-closed first (the server
        ends it and completes its leftover episodes as truncated, as after a
        0.1.0 run), so the same client can serve run after run.

        Raises :class:`ConnectError` (unreachable, refused, timed out) or
        :class:`HandshakeError` (incompatible generation, no usable contract),
        both naming the address. Bounded by ``connect_timeout`` for the connect
        and again for the handshake. Cancellation: nothing is left half-open.
        """
        session = self._session
        if session is not None and session.alive and session.idle:
            await session.end(CLOSE_GRACE)
        data = await self._handshake(ENV_COMPONENT)
        self._info = parse_env_handshake(self.address, data)
        usable = block_info(self._info)
        self._block = RemoteLaneBlock(self, usable) if usable is not None else None
        return self._info

    async def configure(self, edition: str) -> None:
        """Open the Join session and pin the workflow edition (the first Join message).

        After the session ended (Close, a fatal env error, a dropped stream) a
        new ``configure`` opens a fresh one.

        Raises :class:`ConnectError` when another client holds the env's
        single Join slot, or the stream cannot be opened; :class:`HandshakeError`
        when the env refuses the edition. Cancellation: tears the stream down.
        """
        if self._session is not None and self._session.alive:
            raise RuntimeError(f"{self!r} already has an open Join session")
        session = self._open_session(await self._conn.connect(), decode_env_response)
        self._session = session
        envelope = env_pb.JoinRequest(
            configure=env_pb.ConfigureEnvRequest(selected_workflow_edition=edition)
        )
        self._last_id += 1
        envelope.request_id = request_id = f"grpc-req-{self._last_id}"
        try:
            response, _size = await session.request(
                request_id, bytes(envelope), kill_on_cancel=True
            )
        except SessionClosed as exc:
            if exc.status is GrpcStatus.FAILED_PRECONDITION:
                raise ConnectError(
                    self.address,
                    f"the env endpoint is in use by another client ({exc.status_message})",
                ) from None
            raise ConnectError(
                self.address, f"could not open the Join session: {exc.detail}"
            ) from None
        if response.error is not None:
            raise HandshakeError(self.address, f"configure refused: {response.error.message}")
        if response.configure is None:
            raise self._unexpected("env.configure", response)

    async def reset(self, request: env_pb.ResetRequest) -> Reply[env_pb.ResetResponse]:
        """Reset (all lanes, or ``env_indices``). Cancellation tears the stream down."""
        return await self._call("reset", env_pb.JoinRequest(reset=request))

    async def step(self, request: env_pb.StepRequest) -> Reply[env_pb.StepResponse]:
        """Step (all lanes, or ``env_indices``). Safe to call concurrently for different lanes.

        Cancellation tears the stream down.
        """
        return await self._call("step", request)

    async def render(self, env_index: int = 0, *, timeout_ms: int = 0) -> bytes | None:
        """One lane's frame as PNG bytes; ``None`` when the env has none (or an unknown format).

        Cancellation tears the stream down.
        """
        request = env_pb.RenderRequest(env_indices=[env_index], timeout_ms=timeout_ms)
        reply = (await self._call("render", env_pb.JoinRequest(render=request))).response
        if reply.format not in (env_pb.RenderFormat.UNSPECIFIED, env_pb.RenderFormat.PNG):
            return None
        return reply.frame

    async def close(self, timeout: float) -> list[env_pb.EpisodeMetadata]:
        """Send Close (reason ``client close``) and return the final episodes.

        The server ends the stream after replying. Bounded by ``timeout``
        seconds: raises :class:`EnvRpcError` (operation ``env.close``) when it
        runs out. Returns ``[]`` when no session was opened or it already ended.
        """
        session = self._session
        if session is None or not session.alive:
            return []
        envelope = env_pb.JoinRequest(close=env_pb.CloseEnvsRequest(reason="client close"))
        with time_limit(timeout, lambda why: EnvRpcError("env.close", 0, f"close {why}")):
            reply = (await self._call("close", envelope)).response
            # the server ends the stream after its reply; wait for that so a
            # following configure() finds the env's Join slot free
            with trio.move_on_after(CLOSE_GRACE):
                await session.wait_finished()
        return list(reply.final_episodes)

    # -- the lane block (rlmesh_trio._blocks.LaneBlockEnv) -------------------------------

    @property
    def block_ready(self) -> bool:
        """Whether the handshake found a lane server this client can drive as a block
        (``subset_step``, driver-owned resets, Box or Discrete spaces); see
        :class:`~._remote_lanes.RemoteLaneBlock`."""
        return self._block is not None

    @property
    def num_lanes(self) -> int:
        """The endpoint's lanes (its contract's ``num_envs``; 1 before the handshake)."""
        contract = self._info.contract if self._info is not None else None
        return max(1, contract.num_envs) if contract is not None else 1

    def _lane_block(self) -> RemoteLaneBlock:
        if self._block is None:
            raise RuntimeError(f"{self!r} has no lane block (see block_ready)")
        return self._block

    async def reset_lanes(
        self,
        lanes: np.ndarray,
        seeds: Sequence[int | None],
        options: Sequence[Mapping[str, Any] | None],
        timeout: float,
        *,
        episode_ids: Sequence[str] | None = None,
    ) -> BlockReset:
        """:meth:`RemoteLaneBlock.reset_lanes`. Cancellation tears the stream down.

        Raises:
            EnvRpcError: a lane's reset failed (``env_index`` set).
        """
        return await self._lane_block().reset_lanes(
            lanes, seeds, options, timeout, episode_ids=episode_ids
        )

    async def step_lanes(
        self, lanes: np.ndarray, actions: np.ndarray, timeout: float
    ) -> ServedBlockStep:
        """:meth:`RemoteLaneBlock.step_lanes`. Cancellation tears the stream down.

        Raises:
            EnvRpcError: a lane's step failed (``env_index`` set where known).
        """
        return await self._lane_block().step_lanes(lanes, actions, timeout)

    async def _call(
        self, kind: str, envelope: env_pb.JoinRequest | env_pb.StepRequest
    ) -> Reply[Any]:
        """One Join round trip: the response's ``kind`` reply, with its telemetry.

        A bare ``StepRequest`` (the hot call) goes into its envelope by the hand codec.

        Raises:
            EnvRpcError: the stream failed, or the env answered with an ``EnvError``.
            ProtocolError: the env answered with another kind of reply.
        """
        session = self._session
        if session is None:
            raise RuntimeError(f"{self!r} is not configured: call configure() first")
        self._last_id += 1
        request_id = f"grpc-req-{self._last_id}"
        if isinstance(envelope, env_pb.StepRequest):
            payload = encode_env_step(request_id, envelope)
        else:
            envelope.request_id = request_id
            payload = bytes(envelope)
        try:
            response, size = await session.request(request_id, payload, kill_on_cancel=True)
        except SessionClosed as exc:
            raise EnvRpcError(f"env.{kind}", 0, exc.detail) from None
        error = response.error
        if error is not None:
            raise EnvRpcError(
                f"env.{kind}",
                0,
                f"environment error: [{code_label(error.code)}] {error.message}",
                code=int(error.code),
                recoverable=error.is_recoverable,
            )
        reply = getattr(response, kind)
        if reply is None:
            raise self._unexpected(f"env.{kind}", response)
        return Reply(reply, reply_telemetry(response, len(payload), size))
