"""Moved to :mod:`rlmesh_trio.wire._client_codec`; this name stays importable."""

from ..wire._client_codec import (
    decode_env_response,
    decode_model_response,
    encode_env_step,
    encode_model_grouped_predict,
    encode_model_predict,
)

__all__ = [
    "decode_env_response",
    "decode_model_response",
    "encode_env_step",
    "encode_model_grouped_predict",
    "encode_model_predict",
]
