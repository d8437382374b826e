"""Serve a Python policy with rlmesh 0.1.0's model-server semantics, transport-free.

The gRPC ``ModelServer`` and the in-process ``LocalModel`` both wrap a
:class:`ModelHost`, so they answer every request identically.
"""

from ._faults import ModelFault
from ._host import Adapter, Invoke, ModelHost, inline_invoke
from ._invoke import PlacedInvoker, ThreadedInvoker
from ._policy import Policy, PolicyFn, as_policy, policy

__all__ = [
    "Adapter",
    "Invoke",
    "ModelFault",
    "ModelHost",
    "PlacedInvoker",
    "Policy",
    "PolicyFn",
    "ThreadedInvoker",
    "as_policy",
    "inline_invoke",
    "policy",
]
