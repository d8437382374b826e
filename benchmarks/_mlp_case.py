"""Case 7 of ``compare_rlmesh.py``: where batching should pay (issue 13).

Eight routes (eight rlmesh env servers) share one served numpy MLP policy
(``_mlp.py``: 4 -> 256 -> 256 -> 2; its batched call is one matmul per
layer) on rlmesh 0.1.0's model server, which fuses a ``GroupedPredict`` into
one ``predict_batch``. Sides: our runtime without and with
``batch_predicts``, and rlmesh's own runtime in eight threads. Targets:
batched >= 1.5x unbatched and >= 2.5x rlmesh.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import rlmesh_trio as rt

#: Routes (env servers) sharing the MLP model server.
ROUTES = 8
#: batched / unbatched, and batched / rlmesh's threads.
TARGET_VS_UNBATCHED = 1.5
TARGET_VS_RLMESH = 2.5


def mlp_sides(
    env_addresses: list[str],
    model_address: str,
    seeds: list[int],
    ours: Callable[..., Any],
    theirs: Callable[[list[Callable[[], Any]]], Any],
) -> list[tuple[str, Callable[[], Any]]]:
    """(label, run) for ``ours``, ``ours+batch`` and ``theirs`` over the same seeds."""
    import rlmesh

    routes = rt.shard(env_addresses, model_address, seeds=seeds)
    dealt = [seeds[i :: len(env_addresses)] for i in range(len(env_addresses))]

    def job(address: str, mine: list[int]) -> Callable[[], Any]:
        return lambda: rlmesh.run(rlmesh.RemoteModel(model_address), address, seeds=mine)

    jobs = [job(a, s) for a, s in zip(env_addresses, dealt, strict=True)]
    return [
        ("ours", lambda: ours(routes)),
        ("ours+batch", lambda: ours(routes, batch_predicts=True)),
        ("theirs", lambda: theirs(jobs)),
    ]
