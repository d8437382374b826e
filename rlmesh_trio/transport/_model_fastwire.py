"""Moved to :mod:`rlmesh_trio.wire._model_codec`; this name stays importable for the servers."""

from ..wire._model_codec import decode_join_request, encode_join_response

__all__ = ["decode_join_request", "encode_join_response"]
