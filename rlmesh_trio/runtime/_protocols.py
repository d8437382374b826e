"""Moved to :mod:`rlmesh_trio._endpoints` (below runtime and transport); re-exported here."""

from .._endpoints import EndpointInfo, Reply, RuntimeEnv, RuntimeModel

__all__ = ["EndpointInfo", "Reply", "RuntimeEnv", "RuntimeModel"]
