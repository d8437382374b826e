"""`rlmesh-trio serve-model module:obj` with a torch module or a TorchPolicy as the target."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

import rlmesh_trio as rt

from .._faults_procs import our_model
from ._models import cartpole_logs, logged_actions_match, make_mlp

pytestmark = pytest.mark.timeout(90)


# Each case starts a server process that imports torch: two cases cover both targets
# and both ways of sending predicts.
@pytest.mark.parametrize(("target", "batch_predicts"), [("MLP", False), ("MLP_POLICY", True)])
async def test_served_module_acts_like_the_module(target: str, batch_predicts: bool) -> None:
    with our_model(f"tests.policies._models:{target}") as server:
        logs = cartpole_logs(3)
        routes = rt.shard(envs=logs, model=server.address, seeds=range(6))
        report = await rt.run_routes(routes, batch_predicts=batch_predicts)
    assert report.ok and report.total_episodes == 6
    # The same seed builds the same weights in the server process and here.
    assert logged_actions_match(logs, make_mlp()) == report.total_steps
