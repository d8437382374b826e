"""``TorchPolicy``: a torch module (or any callable taking tensors) as a policy.

The only module that imports torch, and only when a ``TorchPolicy`` is built
(the ``torch`` extra). Batching, default actions and error naming are shared
with the other frameworks in :mod:`._frameworks`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._errors import InvalidSpec
from .._extras import require
from ._frameworks import ActionRule, FrameworkPolicy, check_action, map_leaves

__all__ = ["TorchPolicy", "import_torch"]


def import_torch(what: str) -> Any:
    """The torch module.

    Raises:
        MissingExtra: torch is not installed (the message says ``pip install
            'rlmesh-trio[torch]'``).
    """
    return require("torch", extra="torch", purpose=what)


class TorchPolicy(FrameworkPolicy):
    """Evaluate a torch ``nn.Module`` (or any callable taking and returning tensors).

    Each call gets the observations of one or more routes stacked along a
    leading axis, as tensors on ``device``: ``torch.from_numpy`` views (no
    copy) where the dtype already fits, cast to the module's floating dtype
    where it does not. Calls run under ``torch.inference_mode()``; a module is
    put in eval mode. Grouped predicts from several routes are ONE forward
    pass.

    ``device``: where inputs go (``"cpu"``, ``"cuda"``, ``"cuda:1"``, a
    ``torch.device``); a module is moved there. Default: the device of the
    module's first parameter (CPU for a parameterless callable).

    ``action``: how the output becomes actions. Default: argmax over the last
    axis for a Discrete action space (integer outputs are taken as actions),
    the output itself for a Box (reshaped to the space, cast to its dtype,
    clipped to its bounds only with ``clip=True``), the output for
    MultiDiscrete/MultiBinary. ``"argmax"`` or ``"identity"`` force one rule;
    a callable gets the raw output (a tensor, or whatever the module returns,
    e.g. ``lambda out: out[0]`` for ``(logits, value)``) and returns actions
    (a tensor or an array).

    Raises:
        MissingExtra: torch is not installed.
        InvalidSpec: ``module`` is not callable, ``device`` is not a torch device,
            the module cannot move there (no GPU), or ``action`` is not valid.
    """

    def __init__(
        self,
        module: Callable[..., Any],
        *,
        device: Any = None,
        action: ActionRule = None,
        clip: bool = False,
    ) -> None:
        torch = import_torch("TorchPolicy")
        if not callable(module):
            raise InvalidSpec(f"TorchPolicy needs a callable module, got {type(module).__name__}")
        self.name = f"TorchPolicy({type(module).__name__})"
        self.argmax_call = ".argmax(dim=1)"
        self.action = check_action(action)
        self.clip = bool(clip)
        self.module = module
        # The module-only calls go through ``nn_module``: a plain callable has none of them.
        nn_module: Any = module if isinstance(module, torch.nn.Module) else None
        params = list(nn_module.parameters()) if nn_module is not None else []
        try:
            self.device = torch.device(device) if device is not None else None
            if nn_module is not None and self.device is not None:
                nn_module.to(self.device)
        except (RuntimeError, TypeError, AssertionError) as exc:
            raise InvalidSpec(f"{self.name}: device {device!r}: {exc}") from None
        if self.device is None:
            self.device = params[0].device if params else torch.device("cpu")
        floats = [p.dtype for p in params if p.is_floating_point()]
        self._float_dtype = floats[0] if floats else None
        if nn_module is not None:
            nn_module.eval()
        self._on_cpu = self.device.type == "cpu"

    def _tensor(self, value: Any) -> Any:
        import torch  # already imported by __init__: a dict lookup (we hold no module: pickles)

        if not isinstance(value, np.ndarray):
            value = np.asarray(value)
        if not value.flags.writeable or value.dtype.byteorder == ">":
            value = value.copy()  # torch.from_numpy wants a writable, native-order array
        tensor = torch.from_numpy(value)
        dtype = self._float_dtype
        if dtype is not None and tensor.is_floating_point() and tensor.dtype != dtype:
            tensor = tensor.to(dtype)
        if not self._on_cpu:
            tensor = tensor.to(self.device, non_blocking=True)
        return tensor

    def forward(self, obs_batch: Any) -> Any:
        """One forward pass over the batch, under ``torch.inference_mode()``."""
        import torch

        inputs = map_leaves(obs_batch, self._tensor)
        with torch.inference_mode():
            return self.module(inputs)

    def to_numpy(self, output: Any) -> Any:
        """Tensors (of any device) as numpy arrays; other leaves as they are."""
        import torch

        tensor_type = torch.Tensor

        def leaf(value: Any) -> Any:
            if isinstance(value, tensor_type):
                return value.detach().cpu().numpy()
            return value

        return map_leaves(output, leaf)
