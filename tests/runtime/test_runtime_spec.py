"""RouteSpec and Limits: defaults, JSON in and out, validation messages."""

from __future__ import annotations

import uuid

import pytest

from rlmesh_trio import InvalidSpec, Limits, RouteSpec
from rlmesh_trio.runtime import DEFAULT_MAX_EPISODE_STEPS, mint_uuid7
from rlmesh_trio.testing import scripted_contract


def test_limits_defaults_match_the_reference_runtime() -> None:
    limits = Limits()
    assert limits.to_json() == {
        "envConnectTimeoutMs": 60_000,
        "modelConnectTimeoutMs": 600_000,
        "configureRouteTimeoutMs": 600_000,
        "envResetTimeoutMs": 300_000,
        "modelPredictTimeoutMs": 300_000,
        "envStepTimeoutMs": 300_000,
        "serviceCloseTimeoutMs": 5_000,
        "telemetryWindowMs": 1_000,
    }
    assert limits.env_step_timeout == 300.0
    assert limits.timeout_ms("env_reset_timeout") == 300_000
    assert DEFAULT_MAX_EPISODE_STEPS == 100_000


def test_limits_json_round_trip_and_partial_input() -> None:
    limits = Limits(env_step_timeout=1.5, service_close_timeout=0.25)
    assert Limits.from_json(limits.to_json()) == limits
    partial = Limits.from_json({"envResetTimeoutMs": 2000})
    assert partial.env_reset_timeout == 2.0
    assert partial.model_predict_timeout == 300.0


def test_limits_json_rejects_unknown_fields_naming_them() -> None:
    with pytest.raises(InvalidSpec) as info:
        Limits.from_json({"envStepTimeoutMs": 10, "stepTimeout": 5, "bogus": 1})
    text = str(info.value)
    assert text.startswith(
        "invalid runtime session spec: unknown field(s) in limits: bogus, stepTimeout"
    )
    assert "envStepTimeoutMs" in text  # the known names are listed to help fix the typo


@pytest.mark.parametrize("value", [0, -5, "100", True])
def test_limits_json_rejects_bad_values(value: object) -> None:
    with pytest.raises(InvalidSpec, match=r"envStepTimeoutMs|env_step_timeout"):
        Limits.from_json({"envStepTimeoutMs": value})


def test_limits_validate_names_the_limit() -> None:
    with pytest.raises(InvalidSpec) as info:
        Limits(model_predict_timeout=0).validate()
    assert str(info.value) == (
        "invalid runtime session spec: limits.model_predict_timeout must be positive, got 0.0s"
    )
    with pytest.raises(InvalidSpec, match="must be finite"):
        Limits(env_reset_timeout=float("inf")).validate()
    with pytest.raises(InvalidSpec, match="number of seconds"):
        Limits(env_reset_timeout=float("nan"))


def test_route_spec_mints_a_uuid7_env_id() -> None:
    a = RouteSpec(route_id="r", session_id="s")
    b = RouteSpec(route_id="r", session_id="s")
    assert a.env_id != b.env_id
    assert uuid.UUID(a.env_id).version == 7
    assert uuid.UUID(mint_uuid7()).version == 7
    assert a.execution_horizon == 1 and a.close_env_on_end is False
    a.validate()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"route_id": ""}, "route_id must be a non-empty string"),
        ({"session_id": " "}, "session_id must be a non-empty string"),
        ({"max_episodes": 0}, "max_episodes must be >= 1, got 0"),
        ({"num_envs": 0}, "num_envs must be >= 1, got 0"),
        ({"seeds": ()}, "seeds must not be empty when given"),
        (
            {"seeds": (1, 2), "max_episodes": 3},
            "max_episodes (3) must equal the number of seeds (2) when both are given",
        ),
        ({"max_episode_steps": 0}, "max_episode_steps must be >= 1, got 0"),
        ({"execution_horizon": 0}, "execution_horizon must be in 1..1024, got 0"),
        ({"limits": Limits(env_step_timeout=-1)}, "limits.env_step_timeout must be positive"),
    ],
)
def test_route_spec_validate_messages(kwargs: dict[str, object], message: str) -> None:
    base: dict[str, object] = {"route_id": "r", "session_id": "s"}
    base.update(kwargs)
    spec = RouteSpec(**base)  # type: ignore[arg-type]
    with pytest.raises(InvalidSpec) as info:
        spec.validate()
    assert str(info.value).startswith("invalid runtime session spec: " + message)
    assert info.value.detail.startswith(message)


def test_episode_budget_defaults_to_the_seed_count() -> None:
    assert RouteSpec(route_id="r", session_id="s", seeds=[3, 4, 5]).episode_budget == 3
    assert RouteSpec(route_id="r", session_id="s", max_episodes=2).episode_budget == 2
    assert RouteSpec(route_id="r", session_id="s").episode_budget is None
    spec = RouteSpec(route_id="r", session_id="s", contract=scripted_contract(2))
    spec.validate()
