"""A request the model host refuses, with the code and text 0.1.0 uses for it."""

from __future__ import annotations

from .._protocol import model_pb

__all__ = ["Code", "ModelFault"]

Code = model_pb.ModelErrorCode


class ModelFault(Exception):
    """Raised inside the host for one request; becomes that request's ``ModelError``.

    Never escapes the host: :meth:`ModelHost.handle` turns it into the error arm
    of the response, and the in-process model turns it into ``ModelRpcError``.
    """

    def __init__(self, code: model_pb.ModelErrorCode, message: str, recoverable: bool = False):
        super().__init__(message)
        self.code = code
        self.message = message
        self.recoverable = recoverable

    def to_proto(self) -> model_pb.ModelError:
        return model_pb.ModelError(
            code=self.code, message=self.message, is_recoverable=self.recoverable
        )

    @classmethod
    def invalid(cls, message: str) -> ModelFault:
        return cls(Code.INVALID_REQUEST, message)

    @classmethod
    def internal(cls, message: str) -> ModelFault:
        return cls(Code.INTERNAL, message)

    @classmethod
    def from_exception(cls, exc: BaseException) -> ModelFault:
        """A user policy raised: name the exception type and its message, as 0.1.0 does."""
        return cls(Code.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")
