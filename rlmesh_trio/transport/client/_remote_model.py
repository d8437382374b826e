"""``RemoteModel``: a wire-v1 model endpoint reached over gRPC, as a ``RuntimeModel``.

One ``RemoteModel`` may serve several routes at once (the orchestrator makes
one per model address): the handshake is done once, one Join stream is opened
lazily and shared, and responses are demultiplexed by ``request_id``. The
envelope id is the request's ``AdapterContext.request_id`` (the route's own id,
e.g. ``<env_id>:predict:<n>``), made unique if a duplicate is in flight.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from ... import _wire as wire
from ..._endpoints import EndpointInfo, Reply
from ..._errors import (
    ConnectError,
    ModelRpcError,
    ProtocolError,
)
from ..._protocol import model_pb
from ..._wire._client_codec import (
    GroupedEnvelope,
    GroupOutcome,
    ModelJoinCodec,
    ModelReply,
    PredictEnvelope,
    decode_grouped_results,
    decode_model_response,
    encode_model_grouped_predict,
)
from .._handshake import MODEL_COMPONENT, endpoint_info
from ._channel import time_limit
from ._join import JoinSession, SessionClosed
from ._remote_base import RemoteEndpoint, code_label, reply_telemetry

__all__ = ["RemoteModel"]

#: What a route's model call hands :meth:`RemoteModel._encode`: a whole envelope, or the
#: bare predict (or list of them, a grouped predict) that the hand codec wraps itself.
_Envelope = model_pb.JoinRequest | model_pb.PredictRequest | list[model_pb.PredictRequest]
#: One group's outcome in a grouped predict.
_GroupOutcome = Reply[model_pb.PredictResponse] | ModelRpcError


class RemoteModel(RemoteEndpoint):
    """A remote model endpoint; the address and options are :class:`RemoteEndpoint`'s."""

    _session: JoinSession[ModelReply] | None
    #: The Join stream's predict codec (made with the stream).
    _codec: ModelJoinCodec
    _kind: ClassVar[str] = "model"
    _pb: ClassVar[Any] = model_pb

    async def connect(self) -> EndpointInfo:
        """Handshake once (later calls return the first result; concurrent callers share it).

        Raises :class:`ConnectError` or :class:`HandshakeError` naming the
        address. Bounded by ``connect_timeout`` for the connect and the handshake.
        """
        async with self._connect_lock:
            if self._info is not None:
                return self._info
            reply = wire.parse_message(
                model_pb.HandshakeResponse, await self._handshake(MODEL_COMPONENT)
            )
            self._info = endpoint_info(self.address, reply.base)
            return self._info

    async def resolve_adapter(self, request: model_pb.ResolveAdapterRequest) -> None:
        """Create or update the route's adapter (idempotent upsert keyed by ``env_id``).

        Cancellation abandons this request only; the shared stream stays up.
        """
        envelope = model_pb.JoinRequest(resolve_adapter=request)
        await self._call("resolve_adapter", request.context, envelope)

    async def predict(self, request: model_pb.PredictRequest) -> Reply[model_pb.PredictResponse]:
        """One prediction for R rows, the reply as the server sent it: the route checks
        the echoed context and that actions came back (``RouteCalls.predict``, the one
        check every model, remote or in-process, goes through).

        Raises :class:`ModelRpcError`. Cancellation abandons this request
        only (a late reply is dropped); the shared stream stays up.
        """
        return await self._call("predict", request.context, request)

    async def grouped_predict(
        self, requests: Sequence[model_pb.PredictRequest]
    ) -> list[_GroupOutcome]:
        """Several routes' predictions in one GroupedPredict round trip.

        Returns one entry per request, in order: a :class:`Reply` (telemetry
        shared by the group; its context and actions are checked by the route,
        as for :meth:`predict`) or the error for that group alone. A failure of
        the whole call (transport, or a top-level ``ModelError``) raises.
        """
        groups = list(requests)
        return self._grouped_replies(groups, await self._call("grouped_predict", None, groups))

    def _grouped_replies(
        self,
        requests: Sequence[model_pb.PredictRequest],
        grouped: Reply[GroupedEnvelope | model_pb.GroupedPredictResponse],
    ) -> list[_GroupOutcome]:
        response = grouped.response
        results: list[GroupOutcome]
        if type(response) is GroupedEnvelope:
            results = decode_grouped_results(response.body, requests)
        else:  # an envelope the hand codec left to betterproto2
            assert isinstance(response, model_pb.GroupedPredictResponse)
            results = [r.error if r.error is not None else r.response for r in response.results]
        if len(results) != len(requests):
            raise ProtocolError(
                f"model endpoint {self.address} answered a grouped predict of "
                f"{len(requests)} groups with {len(results)} results"
            )
        telemetry = {**grouped.telemetry, "group.size": float(len(requests))}
        out: list[_GroupOutcome] = []
        for result in results:  # as many as requests: checked above
            if type(result) is model_pb.PredictResponse:
                out.append(Reply(result, telemetry))
            elif result is None:
                out.append(ModelRpcError(self.address, "grouped predict result has no outcome"))
            else:
                out.append(self._model_error(result))  # type: ignore[arg-type]
        return out

    def submit_predicts(
        self,
        requests: Sequence[model_pb.PredictRequest],
        on_done: Callable[[list[Reply[model_pb.PredictResponse] | Exception]], None],
    ) -> bool:
        """Send one predict (or, for several, one GroupedPredict) without waiting.

        ``on_done`` later gets one entry per request, in order: its
        :class:`Reply` or its error (a failure of the whole call is every
        entry's error). It runs on the connection's reader, so it must not
        block. Returns ``False`` and sends nothing when no stream is open yet
        (use :meth:`predict` / :meth:`grouped_predict` then).
        """
        session = self._session
        if session is None or not session.alive:
            return False
        groups = list(requests)
        if len(groups) == 1:
            kind = "predict"
            request_id, payload = self._encode(session, kind, groups[0].context, groups[0])
        else:
            kind = "grouped_predict"
            request_id, payload = self._encode(session, kind, None, groups)

        def landed(
            outcome: tuple[ModelReply, int] | BaseException,
        ) -> None:
            results: list[Reply[model_pb.PredictResponse] | Exception]
            try:
                if isinstance(outcome, SessionClosed):
                    raise ModelRpcError(self.address, outcome.detail)
                if isinstance(outcome, BaseException):
                    raise outcome
                reply = self._reply(kind, outcome[0], len(payload), outcome[1])
                if len(groups) == 1:
                    results = [reply]
                else:
                    results = list(self._grouped_replies(groups, reply))
            except Exception as exc:
                results = [exc] * len(groups)
            on_done(results)

        try:
            session.submit(request_id, payload, landed)
        except SessionClosed:
            return False
        return True

    async def reset_adapter(self, request: model_pb.ResetAdapterRequest) -> None:
        """Garbage-collect per-episode state (best-effort; errors raise for the caller to log).

        Cancellation abandons this request only.
        """
        envelope = model_pb.JoinRequest(reset_adapter=request)
        await self._call("reset_adapter", request.context, envelope)

    async def release_adapter(
        self, request: model_pb.ReleaseAdapterRequest, timeout: float
    ) -> None:
        """Release the route's adapter, bounded by ``timeout`` seconds.

        Raises :class:`ModelRpcError` when the time runs out (the request is
        abandoned; the shared stream stays up).
        """
        envelope = model_pb.JoinRequest(release_adapter=request)
        with time_limit(timeout, lambda why: ModelRpcError(self.address, f"release_adapter {why}")):
            await self._call("release_adapter", request.context, envelope)

    async def close(self, reason: str = "client close", *, timeout: float = 5.0) -> None:
        """Send CloseParticipant: the server releases EVERY adapter (all routes), ends the stream.

        Only for an owner that is done with the whole endpoint; routes use
        :meth:`release_adapter`. Bounded by ``timeout`` seconds.
        """
        session = self._session
        if session is None or not session.alive:
            return
        envelope = model_pb.JoinRequest(close=model_pb.CloseParticipantRequest(reason=reason))
        with time_limit(timeout, lambda why: ModelRpcError(self.address, f"close {why}")):
            await self._call("close", None, envelope)

    async def _ensure_session(self) -> JoinSession[ModelReply]:
        try:
            conn = await self._conn.connect()
        except ConnectError as exc:
            raise ModelRpcError(self.address, f"transport error: {exc.detail}") from exc
        if self._session is None:  # another route may have opened it meanwhile
            self._codec = ModelJoinCodec()
            self._session = self._open_session(conn, self._codec.decode_reply)
        return self._session

    def _encode(
        self,
        session: JoinSession[ModelReply],
        kind: str,
        context: model_pb.AdapterContext | None,
        envelope: _Envelope,
    ) -> tuple[str, bytes]:
        """The envelope's request id and bytes; bare predicts go in by the hand codec."""
        # `is not None`, never truthiness: a message's bool() walks all its fields.
        base = context.request_id if context is not None else ""
        self._last_id += 1
        if not base:
            request_id = f"rlmesh-trio:{kind}:{self._last_id}"
        elif session.has_pending(base):
            request_id = f"{base}#{self._last_id}"
        else:
            request_id = base
        if isinstance(envelope, model_pb.PredictRequest):
            return request_id, self._codec.encode_predict(request_id, envelope)
        if isinstance(envelope, list):
            return request_id, encode_model_grouped_predict(request_id, envelope)
        envelope.request_id = request_id
        return request_id, bytes(envelope)

    async def _call(
        self, kind: str, context: model_pb.AdapterContext | None, envelope: _Envelope
    ) -> Reply[Any]:
        """One Join round trip: the response's ``kind`` reply, with its telemetry.

        Raises:
            ModelRpcError: the stream failed, or the model answered with a ``ModelError``.
            ProtocolError: the model answered with another kind of reply.
        """
        session = self._session or await self._ensure_session()
        request_id, payload = self._encode(session, kind, context, envelope)
        try:
            response, size = await session.request(request_id, payload, kill_on_cancel=False)
        except SessionClosed as exc:
            raise ModelRpcError(self.address, exc.detail) from None
        return self._reply(kind, response, len(payload), size)

    def _reply(
        self,
        kind: str,
        response: ModelReply,
        request_bytes: int,
        response_bytes: int,
    ) -> Reply[Any]:
        if type(response) is PredictEnvelope:
            if kind == "predict":  # the hot reply: its one arm, no error arm
                telemetry = reply_telemetry(response, request_bytes, response_bytes, model=True)
                return Reply(response.predict, telemetry)
            response = decode_model_response(response.data)  # the checks below need it
        elif type(response) is GroupedEnvelope:
            if kind == "grouped_predict":  # its results are decoded against the requests
                telemetry = reply_telemetry(response, request_bytes, response_bytes, model=True)
                return Reply(response, telemetry)
            response = decode_model_response(response.data)
        assert isinstance(response, model_pb.JoinResponse)
        if response.error is not None:
            raise self._model_error(response.error)
        reply = getattr(response, kind)
        if reply is None:
            raise self._unexpected(kind, response)
        return Reply(reply, reply_telemetry(response, request_bytes, response_bytes, model=True))

    def _model_error(self, error: model_pb.ModelError) -> ModelRpcError:
        return ModelRpcError(
            self.address,
            f"model error: [{code_label(error.code)}] {error.message}",
            code=int(error.code),
            recoverable=error.is_recoverable,
        )
