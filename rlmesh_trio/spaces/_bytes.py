"""A spec's wire bytes, serialised once per spec object.

Serialising a ``SpaceSpec`` with betterproto2 costs tens of microseconds, and
one route's setup needs its two specs' bytes several times (the model host
keys its adapters by them, the ledger's env contract digests them). Cached by
the spec object's identity, as compiled codecs are (``compile_spec``): treat
specs as immutable once used.
"""

from __future__ import annotations

from .._protocol import spaces_pb
from ._cache import IdentityCache

__all__ = ["spec_bytes"]

_BYTES: IdentityCache[bytes] = IdentityCache()


def spec_bytes(spec: spaces_pb.SpaceSpec) -> bytes:
    """``bytes(spec)``, from the cache when this very object was serialised before."""
    cached = _BYTES.get(spec)
    if cached is None:
        cached = bytes(spec)
        _BYTES.put(spec, cached)
    return cached
