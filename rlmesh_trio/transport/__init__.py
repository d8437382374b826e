"""gRPC transport (grpclib hosted inside Trio): clients and servers for rlmesh-wire-v1."""
