"""In-process endpoints: a gymnasium env and a Python policy in the run's own process.

:class:`LocalEnv` and :class:`LocalModel` speak the same endpoint protocols as the
remote clients, so a route runs the same loop over either; :data:`RANDOM` is the
seeded random baseline. Where a sync call runs (inline or on a worker thread) is
decided per call by :mod:`._placement`.
"""

from typing import TYPE_CHECKING

# Each name is imported when first read (PEP 562, see rlmesh_trio._lazy): a run with
# remote endpoints loads neither the env host nor the model host.
if TYPE_CHECKING:
    from ._local_env import LocalEnv
    from ._local_model import LocalModel
    from ._random_model import RANDOM
else:
    from .._lazy import lazy_exports

    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "._local_env": ("LocalEnv",),
            "._local_model": ("LocalModel",),
            "._random_model": ("RANDOM",),
        },
    )

__all__ = ["RANDOM", "LocalEnv", "LocalModel"]
