"""The route driver: the reference runtime loop, on Trio."""

from ._protocols import EndpointInfo, Reply, RuntimeEnv, RuntimeModel

__all__ = ["EndpointInfo", "Reply", "RuntimeEnv", "RuntimeModel"]
