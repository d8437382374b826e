"""Serve a Python policy with rlmesh 0.1.0's model-server semantics, transport-free.

The gRPC ``ModelServer`` and the in-process ``LocalModel`` both wrap a
:class:`ModelHost`, so they answer every request identically.
"""

from ._adapter import RowAnswer, answer_row, sync_row
from ._coerce import as_policy
from ._faults import ModelFault
from ._host import Adapter, Invoke, ModelHost, inline_invoke
from ._invoke import PlacedInvoker, ThreadedInvoker
from ._jax import JaxPolicy
from ._one_row import decode_row, encode_row
from ._policy import Policy, PolicyFn, policy
from ._sb3 import SB3Policy
from ._torch import TorchPolicy

__all__ = [
    "Adapter",
    "Invoke",
    "JaxPolicy",
    "ModelFault",
    "ModelHost",
    "PlacedInvoker",
    "Policy",
    "PolicyFn",
    "RowAnswer",
    "SB3Policy",
    "ThreadedInvoker",
    "TorchPolicy",
    "answer_row",
    "as_policy",
    "decode_row",
    "encode_row",
    "inline_invoke",
    "policy",
    "sync_row",
]
