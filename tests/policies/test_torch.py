"""TorchPolicy and bare nn.Modules: the same actions as calling the module directly."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import rlmesh_trio as rt  # noqa: E402

from ._calls import SHAPES, endpoint, env_spec, grouped, observations_of  # noqa: E402
from ._models import (  # noqa: E402
    ForwardCounter,
    argmax_actions,
    cartpole_logs,
    logged_actions_match,
    make_mlp,
)

CARTPOLE = gym.make("CartPole-v1")
PENDULUM = gym.make("Pendulum-v1")


def test_a_bare_module_is_a_routes_model() -> None:
    mlp = make_mlp()
    logs = cartpole_logs(1)
    report = rt.run(rt.shard(envs=logs, model=mlp, seeds=range(2)))
    assert report.ok and report.total_episodes == 2
    assert logged_actions_match(logs, mlp) == report.total_steps


@pytest.mark.parametrize("where", ["local", "served"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
async def test_discrete_actions_are_the_modules_argmax(where: str, shape: str) -> None:
    mlp = make_mlp()
    observations = observations_of(CARTPOLE, 12)
    async with endpoint(rt.TorchPolicy(mlp), where) as model:
        actions = await SHAPES[shape](model, env_spec(CARTPOLE), observations)
    assert [int(a) for a in actions] == argmax_actions(mlp, observations)


@pytest.mark.parametrize("where", ["local", "served"])
async def test_grouped_predicts_are_one_forward_pass(where: str) -> None:
    mlp = make_mlp()
    counter = ForwardCounter(mlp)
    observations = observations_of(CARTPOLE, 8)
    async with endpoint(mlp, where) as model:
        actions = await grouped(model, env_spec(CARTPOLE), observations)
    assert (counter.calls, counter.rows) == (1, 8)
    assert [int(a) for a in actions] == argmax_actions(mlp, observations)


@pytest.mark.parametrize("clip", [False, True])
async def test_box_actions_are_the_output_clipped_only_if_asked(clip: bool) -> None:
    mlp = make_mlp(n_in=3, n_out=1)
    with torch.no_grad():
        mlp[2].bias.fill_(3.0)  # outputs beyond Pendulum's torque bound of 2
    observations = observations_of(PENDULUM, 6)
    async with endpoint(rt.TorchPolicy(mlp, clip=clip), "local") as model:
        actions = await grouped(model, env_spec(PENDULUM), observations)
    with torch.no_grad():
        expected = mlp(torch.as_tensor(np.stack(observations))).numpy()
    if clip:
        expected = np.clip(expected, -2.0, 2.0)
    assert np.array_equal(np.stack(actions), expected.astype(np.float32))
    assert (np.stack(actions).max() <= 2.0) == clip


async def test_a_custom_action_rule_gets_the_raw_output() -> None:
    class ActorCritic(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = make_mlp()

        def forward(self, obs: Any) -> Any:
            return self.body(obs), obs.sum(dim=1)

    net = ActorCritic()
    policy = rt.TorchPolicy(net, action=lambda out: out[0].argmax(dim=1))
    observations = observations_of(CARTPOLE, 5)
    async with endpoint(policy, "local") as model:
        actions = await grouped(model, env_spec(CARTPOLE), observations)
    assert [int(a) for a in actions] == argmax_actions(net.body, observations)


def test_float64_observations_meet_a_float32_module() -> None:
    env = gym.make("CartPole-v1")
    env.observation_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float64)
    mlp = make_mlp()
    report = rt.run(rt.shard(envs=[env], model=mlp, seeds=[3]))
    assert report.ok and report.total_steps > 0


def test_a_failing_module_gives_the_routes_model_error_naming_the_policy() -> None:
    wrong = make_mlp(n_in=5)  # CartPole has 4 observations: the matmul fails
    with pytest.raises(rt.RunFailed) as failed:
        rt.run(rt.shard(envs=[gym.make("CartPole-v1")], model=wrong, seeds=[0]))
    (outcome,) = failed.value.report.routes
    assert isinstance(outcome.error, rt.ModelRpcError)
    assert "PolicyError: TorchPolicy(Sequential) raised RuntimeError" in str(outcome.error)


def test_logits_that_do_not_fit_the_action_space_say_so() -> None:
    three = make_mlp(n_out=3)
    with pytest.raises(rt.RunFailed) as failed:
        rt.run(rt.shard(envs=[gym.make("CartPole-v1")], model=three, seeds=[0]))
    message = str(failed.value.report.routes[0].error)
    assert "Discrete(2) actions take logits of shape (rows, 2)" in message
    assert "action=" in message


class LogitsAndValue(torch.nn.Module):
    """An actor-critic as trained: ``(logits, value)``, with no ``action=`` to pick from it."""

    def __init__(self) -> None:
        super().__init__()
        self.pi = torch.nn.Linear(4, 2)
        self.v = torch.nn.Linear(4, 1)

    def forward(self, obs: Any) -> Any:
        return self.pi(obs), self.v(obs)


ACTOR_CRITIC_MISMATCH = (
    "internal error: ActionMismatch: TorchPolicy(LogitsAndValue): Discrete(2) actions take "
    "logits of shape (rows, 2) or integer actions; the model gave a tuple of 2 "
    "(float32 of shape (1, 2), float32 of shape (1, 1)); pass action=... to pick the "
    "actions from it, e.g. action=lambda out: out[0].argmax(dim=1)"
)


@pytest.mark.parametrize("where", ["local", "served"])
async def test_a_module_returning_logits_and_value_points_at_action(where: str) -> None:
    net = LogitsAndValue()
    env = gym.make("CartPole-v1")
    if where == "local":
        route = rt.Route(env=env, model=net, seeds=[0])
        report = await rt.run_routes([route], on_failure="isolate")
    else:
        async with rt.serve_model(net, "127.0.0.1:0") as server:
            route = rt.Route(env=env, model=server.address, seeds=[0])
            report = await rt.run_routes([route], on_failure="isolate")
    (outcome,) = report.routes
    assert outcome.status == "failed" and outcome.episodes == ()
    assert isinstance(outcome.error, rt.ModelRpcError)
    # the served model's client reads the same words, under the wire's error code
    said = "" if where == "local" else "model error: [Internal] "
    assert (
        str(outcome.error) == f"model endpoint model request failed: {said}{ACTOR_CRITIC_MISMATCH}"
    )
    # what the message says to do works
    fixed = rt.TorchPolicy(net, action=lambda out: out[0].argmax(dim=1))
    route = rt.Route(env=gym.make("CartPole-v1"), model=fixed, seeds=[0])
    assert (await rt.run_routes([route])).ok


def test_what_does_not_fit_is_named_for_each_space() -> None:
    from rlmesh_trio._modelhost._frameworks import ActionMismatch

    def call(policy: Any, space: gym.Space, rows: int = 1) -> None:
        fn = policy.for_spaces(gym.spaces.Box(-1, 1, (4,)), space).predict_batch.fn
        fn(np.zeros((rows, 4), np.float32))

    heads = rt.TorchPolicy(lambda obs: {"mu": obs[:, :2], "v": obs[:, 0]})
    with pytest.raises(ActionMismatch) as raised:
        call(heads, gym.spaces.Box(-1, 1, (2,)))
    assert str(raised.value) == (
        "TorchPolicy(function): Box(-1.0, 1.0, (2,), float32) actions take an array of "
        "shape (rows, 2); the model gave a dict {'mu': float32 of shape (1, 2), "
        "'v': float32 of shape (1,)}; pass action=... to pick the actions from it, "
        "e.g. action=lambda out: out['mu']"
    )
    assert isinstance(raised.value, rt.PolicyError)
    wide = rt.TorchPolicy(lambda obs: obs)  # 4 numbers where a Box wants 3
    with pytest.raises(ActionMismatch, match=r"the model gave float32 of shape \(1, 4\) \("):
        call(wide, gym.spaces.Box(-1, 1, (3,)))
    wrong_pick = rt.TorchPolicy(LogitsAndValue(), action=lambda out: out)
    with pytest.raises(ActionMismatch, match="from its action= callable, which must return"):
        call(wrong_pick, gym.spaces.Discrete(2))


def test_bad_arguments_are_typed_errors() -> None:
    with pytest.raises(rt.InvalidSpec, match="action must be"):
        rt.TorchPolicy(make_mlp(), action="softmax")
    with pytest.raises(rt.InvalidSpec, match="device"):
        rt.TorchPolicy(make_mlp(), device="no-such-device")
    with pytest.raises(rt.InvalidSpec, match="callable"):
        rt.TorchPolicy(42)  # type: ignore[arg-type]


def test_argmax_for_a_box_space_refuses_the_route() -> None:
    policy = rt.TorchPolicy(make_mlp(n_in=3, n_out=1), action="argmax")
    with pytest.raises(rt.RunFailed) as failed:
        rt.run(rt.shard(envs=[gym.make("Pendulum-v1")], model=policy, seeds=[0]))
    assert "action='argmax' needs a Discrete action space" in str(
        failed.value.report.routes[0].error
    )


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no GPU")
async def test_cuda_device() -> None:
    mlp = make_mlp()
    reference = argmax_actions(mlp, observations_of(CARTPOLE, 6))
    observations = observations_of(CARTPOLE, 6)
    async with endpoint(rt.TorchPolicy(mlp, device="cuda"), "local") as model:
        actions = await grouped(model, env_spec(CARTPOLE), observations)
    assert [int(a) for a in actions] == reference


async def test_a_torch_policy_pickles_with_its_module() -> None:
    import pickle

    mlp = make_mlp()
    copy = pickle.loads(pickle.dumps(rt.TorchPolicy(mlp)))
    observations = observations_of(CARTPOLE, 6)
    async with endpoint(copy, "local") as model:
        actions = await grouped(model, env_spec(CARTPOLE), observations)
    assert [int(a) for a in actions] == argmax_actions(mlp, observations)


@pytest.mark.skipif(torch.cuda.is_available(), reason="torch sees a GPU")
def test_cuda_without_a_gpu_is_refused_when_built() -> None:
    with pytest.raises(rt.InvalidSpec, match="device 'cuda'"):
        rt.TorchPolicy(make_mlp(), device="cuda")


async def test_dict_observations_arrive_as_a_dict_of_tensors() -> None:
    class TwoInputs(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = make_mlp()

        def forward(self, obs: dict[str, Any]) -> Any:
            return self.body(torch.cat([obs["pos"], obs["vel"]], dim=1))

    space = gym.spaces.Dict(
        {
            "pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
            "vel": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
        }
    )
    space.seed(5)
    shaped = gym.make("CartPole-v1")
    shaped.observation_space = space
    net = TwoInputs()
    observations = [space.sample() for _ in range(6)]
    flat = [np.concatenate([o["pos"], o["vel"]]) for o in observations]
    for shape in sorted(SHAPES):
        async with endpoint(net, "local") as model:
            actions = await SHAPES[shape](model, env_spec(shaped), observations)
        assert [int(a) for a in actions] == argmax_actions(net.body, flat), shape
