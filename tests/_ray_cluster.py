"""A local Ray instance for tests: temp dir and HOME in a temp folder, no usage stats."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def ray_environment() -> Iterator[str]:
    """Point Ray's temp dir and HOME at a fresh short folder for the block."""
    folder = tempfile.mkdtemp(prefix="rtray-", dir="/tmp")  # unix socket paths must stay short
    saved = {key: os.environ.get(key) for key in ("RAY_TMPDIR", "HOME", "RAY_USAGE_STATS_ENABLED")}
    os.environ.update({"RAY_TMPDIR": folder, "HOME": folder, "RAY_USAGE_STATS_ENABLED": "0"})
    try:
        yield folder
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def local_ray(**init: Any) -> Iterator[Any]:
    import ray

    with ray_environment():
        ray.init(include_dashboard=False, log_to_driver=False, **init)
        try:
            yield ray
        finally:
            ray.shutdown()
