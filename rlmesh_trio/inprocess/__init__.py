"""In-process endpoints: a gymnasium env and a Python policy in the run's own process.

:class:`LocalEnv` and :class:`LocalModel` speak the same endpoint protocols as the
remote clients, so a route runs the same loop over either; :data:`RANDOM` is the
seeded random baseline. Where a sync call runs (inline or on a worker thread) is
decided per call by :mod:`._placement`.
"""

from ._local_env import LocalEnv
from ._local_model import LocalModel
from ._random_model import RANDOM

__all__ = ["RANDOM", "LocalEnv", "LocalModel"]
