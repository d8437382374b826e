"""The server half of the transport: env and model servers, each on a thread of its
own with a ``trio.run`` of its own, over the wire core in server mode.

It never imports the client half (a contract in pyproject.toml); what both share
(addresses, the handshake, the write side) sits in :mod:`rlmesh_trio.transport`.
The public names are exported from :mod:`rlmesh_trio.transport` only.
"""

__all__: list[str] = []
