"""The client half of the transport: connections to env and model servers, and the
``RuntimeEnv``/``RuntimeModel`` endpoints over them.

It never imports the server half (a contract in pyproject.toml); what both share
(addresses, the handshake, the write side) sits in :mod:`rlmesh_trio.transport`.
The public names are exported from :mod:`rlmesh_trio.transport` only.
"""

__all__: list[str] = []
