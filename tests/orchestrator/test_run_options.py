"""``rt.RunOptions``: one frozen, checked value for the settings of ``run``, ``run_routes``,
``Orchestrator`` and a distributed run's shards; the keywords still work and override it."""

from __future__ import annotations

import inspect
import pickle
import ssl
import warnings
from pathlib import Path
from typing import Any

import attrs
import gymnasium as gym
import pytest
import trio

import rlmesh_trio as rt
from rlmesh_trio.distributed._work import ShardWork
from rlmesh_trio.orchestrator._options import KeywordSettings, RunSettings

FIELDS = set(attrs.fields_dict(rt.RunOptions))


def _policy(obs: object) -> int:
    return 0


def _routes(seeds: int = 4) -> list[rt.Route]:
    return rt.shard([gym.make("CartPole-v1"), gym.make("CartPole-v1")], _policy, range(seeds))


def test_the_keyword_types_name_exactly_the_fields() -> None:
    assert set(RunSettings.__optional_keys__) == FIELDS
    assert not RunSettings.__required_keys__
    # run and run_routes take the first two positionally too (after hooks), so their
    # ``**settings`` type holds the rest: together, every field once.
    positional = {"on_failure", "max_concurrency"}
    assert set(KeywordSettings.__optional_keys__) == FIELDS - positional
    for fn in (rt.run, rt.run_routes):
        names = list(inspect.signature(fn).parameters)
        assert names[:4] == ["routes", "hooks", "on_failure", "max_concurrency"]
        assert names[4:] == ["options", "settings"]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"on_failure": "explode"}, "on_failure must be one of ('cancel_siblings', 'isolate')"),
        ({"max_concurrency": 0}, "max_concurrency must be >= 1, got 0"),
        ({"max_concurrency": "2"}, "max_concurrency must be an integer >= 1 or None, got '2'"),
        ({"retries": -1}, "retries must be an integer >= 0, got -1"),
        ({"retry_backoff": float("inf")}, "retry_backoff must be a number of seconds >= 0"),
        ({"resume": True}, "resume needs a ledger (ledger=PATH, --ledger FILE)"),
        ({"batch_predicts": "yes"}, "batch_predicts must be True, False or None, got 'yes'"),
        ({"handle_sigint": 1}, "handle_sigint must be True or False, got 1"),
        ({"client_options": {"tokn": "x"}}, "client_options: unknown key 'tokn'"),
        ({"client_options": ["token"]}, "client_options must be a mapping"),
        ({"ledger": 3}, "ledger must be a path or None, got int"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(rt.InvalidSpec) as direct:
        rt.RunOptions(**settings)
    assert message in str(direct.value) and "\n" not in str(direct.value)
    # The same check, the same line, whichever way the setting comes in.
    with pytest.raises(rt.InvalidSpec) as keyword:
        rt.Orchestrator(_routes(), **settings)
    assert str(keyword.value) == str(direct.value)


def test_keywords_override_options_and_the_value_is_frozen(tmp_path: Path) -> None:
    base = rt.RunOptions(on_failure="isolate", max_concurrency=4, retries=2)
    ledger = tmp_path / "run.jsonl"
    orchestrator = rt.Orchestrator(_routes(), options=base, max_concurrency=1, ledger=ledger)
    assert orchestrator.options == attrs.evolve(base, max_concurrency=1, ledger=ledger)
    assert base.max_concurrency == 4  # evolved, not changed
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        base.retries = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        base.client_options["token"] = "x"  # type: ignore[index]
    with pytest.raises(TypeError, match="positional"):
        rt.RunOptions("isolate")  # type: ignore[misc]
    with pytest.raises(rt.InvalidSpec, match="options must be a RunOptions, got dict"):
        rt.Orchestrator(_routes(), options={"retries": 1})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="'retrys'"):
        rt.run(_routes(), retrys=1)  # type: ignore[call-arg]


def test_run_takes_options_keywords_and_the_old_positional_order() -> None:
    options = rt.RunOptions(on_failure="isolate", batch_predicts=False)
    by_options = rt.run(_routes(), options=options)
    positional = rt.run(_routes(), None, "isolate", 1, batch_predicts=False)
    keywords = rt.run(_routes(), on_failure="isolate", max_concurrency=1, batch_predicts=False)
    for report in (by_options, positional, keywords):
        assert report.total_episodes == 4
        assert [r.status for r in report.routes] == ["completed", "completed"]
    assert trio.run(lambda: rt.run_routes(_routes(), options=options)).total_episodes == 4


def test_repr_names_client_option_keys_never_their_values() -> None:
    context = ssl.create_default_context()
    options = rt.RunOptions(client_options={"token": "s3cret-token", "ssl": context}, retries=1)
    text = repr(options)
    assert text.startswith("RunOptions(on_failure='cancel_siblings', max_concurrency=None, ")
    assert "client_options=ClientOptions(keys=['ssl', 'token'])" in text
    assert "s3cret" not in text and "SSLContext" not in text and "\n" not in text


def test_options_pickle_hash_and_travel_to_shards(tmp_path: Path) -> None:
    options = rt.RunOptions(
        client_options={"token": "t", "connect_timeout": 2.0}, ledger=tmp_path / "run.jsonl"
    )
    again = pickle.loads(pickle.dumps(options))
    assert again == options and hash(again) == hash(options)
    assert dict(again.client_options) == {"token": "t", "connect_timeout": 2.0}
    # A distributed run's shards get the same type (less the ledger: the coordinator's).
    assert attrs.fields_dict(ShardWork)["options"].type in (rt.RunOptions, "RunOptions")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert rt.distributed.RunOptions is rt.RunOptions
    assert any(issubclass(w.category, DeprecationWarning) for w in caught)
    assert "RunOptions" not in rt.distributed.__all__


def test_route_repr_counts_large_values() -> None:
    lanes = [gym.make("CartPole-v1") for _ in range(16)]
    route = rt.Route(env=lanes, model=_policy, seeds=range(100_000), route_id="big")
    text = repr(route)
    assert "env=<16 envs>" in text and "seeds=<100000 seeds>" in text
    assert "route_id='big'" in text and len(text) < 200
    small = rt.Route(env="127.0.0.1:1", model="127.0.0.1:2", seeds=[1, 2])
    assert repr(small) == "Route(env='127.0.0.1:1', model='127.0.0.1:2', seeds=(1, 2))"
    report = rt.run([attrs.evolve(route, seeds=range(3), env=lanes[:2])])
    outcome = report.routes[0]
    assert outcome.report is not None
    route_report = repr(outcome.report)
    assert "episodes=3" in route_report and "EpisodeResult" not in route_report
    for env in lanes:
        env.close()
