"""The measured grouping rule: it groups when grouping pays and sends singles when not.

Costs are controlled, never read off the wall clock: the rule is fed window
costs directly, or a fake model spends virtual time (Trio's autojump clock)
per call and per row behind one lock (one model, one call at a time), and
the test asserts the decision the batcher made from those samples.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

import rlmesh_trio as rt
from rlmesh_trio._protocol import model_pb
from rlmesh_trio.orchestrator._batching import MAX_HOLD, PredictBatcher
from rlmesh_trio.orchestrator._grouping import GROUP, SINGLE, GroupingRule


def test_rule_groups_only_when_a_grouped_row_is_cheaper() -> None:
    cheap_groups = GroupingRule()
    assert cheap_groups.mode == GROUP  # the first window is grouped...
    cheap_groups.sample(GROUP, 10e-6)
    assert cheap_groups.mode == SINGLE  # ...the second measures single calls
    cheap_groups.sample(SINGLE, 50e-6)
    assert cheap_groups.mode == GROUP

    dear_groups = GroupingRule()
    dear_groups.sample(GROUP, 50e-6)
    dear_groups.sample(SINGLE, 10e-6)
    assert dear_groups.mode == SINGLE

    tie = GroupingRule()
    tie.sample(GROUP, 20e-6)
    tie.sample(SINGLE, 20e-6)
    assert tie.mode == SINGLE  # grouping must be strictly cheaper


def test_rule_reprobes_the_other_mode_for_one_window_then_returns() -> None:
    rule = GroupingRule(reprobe_every=3)
    rule.sample(GROUP, 10e-6)
    rule.sample(SINGLE, 50e-6)
    modes = []
    for _ in range(4):
        rule.sample(rule.mode, 10e-6 if rule.mode == GROUP else 50e-6)
        modes.append(rule.mode)
    assert modes == [GROUP, GROUP, GROUP, SINGLE]  # three grouped windows, then one probe
    rule.sample(SINGLE, 50e-6)
    assert rule.mode == GROUP
    # The model got cheaper per call than per group: the next probe flips the choice.
    for _ in range(4):
        rule.sample(rule.mode, 10e-6 if rule.mode == GROUP else 1e-6)
    assert rule.mode == SINGLE


def test_rule_times_windows_from_their_first_answer_and_skips_old_epochs() -> None:
    now = [0.0]
    rule = GroupingRule(window_rows=4, clock=lambda: now[0])
    epoch = rule.epoch
    now[0] = 1.0
    rule.answered(8, epoch)  # starts the window's clock; its rows are not counted
    now[0] = 1.5
    rule.answered(4, epoch)
    assert rule.cost(GROUP) == pytest.approx(0.5 / 4)
    assert rule.mode == SINGLE and rule.epoch == epoch + 1
    rule.answered(4, epoch)  # sent before the switch: ignored
    assert rule.cost(SINGLE) is None


def test_a_pinned_rule_never_switches() -> None:
    rule = GroupingRule(fixed=GROUP, window_rows=1, clock=lambda: 0.0)
    for _ in range(5):
        rule.answered(1, rule.epoch)
    assert rule.mode == GROUP and rule.switches == 0


class CostedModel:
    """One model, one call at a time, costing ``per_call + per_row * rows`` virtual seconds
    (``grouped_per_row`` per row in a group)."""

    def __init__(self, per_call: float, per_row: float, grouped_per_row: float) -> None:
        self.per_call, self.per_row, self.grouped_per_row = per_call, per_row, grouped_per_row
        self.lock = trio.Lock()
        self.calls: list[int] = []

    async def _spend(self, rows: int) -> None:
        async with self.lock:
            self.calls.append(rows)
            per_row = self.per_row if rows == 1 else self.grouped_per_row
            await trio.sleep(self.per_call + per_row * rows)

    async def resolve_adapter(self, request: Any) -> None:
        return None

    async def predict(self, request: Any) -> Any:
        await self._spend(1)
        return rt.Reply(request)

    async def grouped_predict(self, requests: list) -> list:
        await self._spend(len(requests))
        return [rt.Reply(r) for r in requests]


async def _drive(batcher: PredictBatcher, routes: int, steps: int) -> None:
    """``routes`` routes registered on the batcher, each predicting ``steps`` times."""

    async def route(i: int) -> None:
        context = model_pb.AdapterContext(session_id="s", env_id=f"e{i}")
        await batcher.resolve_adapter(model_pb.ResolveAdapterRequest(context=context))
        for _ in range(steps):
            await batcher.predict(model_pb.PredictRequest(context=context))

    async with trio.open_nursery() as nursery:
        await nursery.start(batcher.serve)
        async with trio.open_nursery() as inner:
            for i in range(routes):
                inner.start_soon(route, i)
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("per_call", "per_row", "grouped_per_row", "chosen"),
    [
        (1e-3, 10e-6, 10e-6, GROUP),  # a torch forward: the cost is per call, groups pay
        (10e-6, 1e-3, 1.2e-3, SINGLE),  # a numpy MLP: a row costs more in a group than alone
    ],
)
async def test_batcher_decides_from_the_costs_it_measured(
    autojump_clock: Any, per_call: float, per_row: float, grouped_per_row: float, chosen: str
) -> None:
    model = CostedModel(per_call, per_row, grouped_per_row)
    rule = GroupingRule(window_rows=16, reprobe_every=100, clock=trio.current_time)
    batcher = PredictBatcher(model, rule=rule)
    await _drive(batcher, routes=8, steps=40)
    assert rule.cost(GROUP) is not None and rule.cost(SINGLE) is not None
    assert rule.mode == chosen
    if chosen == GROUP:
        assert rule.cost(GROUP) < rule.cost(SINGLE)  # type: ignore[operator]
        assert model.calls[-1] > 1 and max(model.calls) == 8  # grouped to the end
    else:
        assert rule.cost(SINGLE) < rule.cost(GROUP)  # type: ignore[operator]
        assert model.calls[-8:] == [1] * 8
        assert batcher.single_calls > 0


class Submitting:
    """A client that sends without waiting (the direct path); answers when told."""

    def __init__(self) -> None:
        self.sent: list[tuple[float, int]] = []
        self.pending: list[tuple[list[Any], Any]] = []

    def submit_predicts(self, requests: list, on_done: Any) -> bool:
        self.sent.append((trio.current_time(), len(requests)))
        on_done([rt.Reply(r) for r in requests])
        return True

    async def resolve_adapter(self, request: Any) -> None:
        return None

    async def release_adapter(self, request: Any, timeout: float) -> None:
        return None

    async def predict(self, request: Any) -> Any:
        return rt.Reply(request)


class Grouping:
    """A client without ``submit_predicts`` (the sender-task path, as ``LocalModel``)."""

    def __init__(self) -> None:
        self.sent: list[tuple[float, int]] = []

    async def resolve_adapter(self, request: Any) -> None:
        return None

    async def release_adapter(self, request: Any, timeout: float) -> None:
        return None

    async def predict(self, request: Any) -> Any:
        self.sent.append((trio.current_time(), 1))
        return rt.Reply(request)

    async def grouped_predict(self, requests: list) -> list:
        self.sent.append((trio.current_time(), len(requests)))
        return [rt.Reply(r) for r in requests]


@pytest.mark.parametrize("client_type", [Submitting, Grouping])
async def test_a_group_flushes_when_all_have_asked_or_after_the_hold(
    autojump_clock: Any, client_type: type
) -> None:
    client = client_type()
    batcher = PredictBatcher(client)
    contexts = [model_pb.AdapterContext(session_id="s", env_id=f"e{i}") for i in range(3)]

    async def ask(i: int) -> None:
        await batcher.predict(model_pb.PredictRequest(context=contexts[i]))

    async with trio.open_nursery() as nursery:
        await nursery.start(batcher.serve)
        for context in contexts:
            await batcher.resolve_adapter(model_pb.ResolveAdapterRequest(context=context))
        start = trio.current_time()
        async with trio.open_nursery() as asking:  # all three ask: no hold at all
            for i in range(3):
                asking.start_soon(ask, i)
        assert client.sent == [(start, 3)]
        start = trio.current_time()
        await ask(0)  # two routes never ask: the group of one goes at the hold's end
        assert client.sent[1] == (pytest.approx(start + MAX_HOLD), 1)
        release = model_pb.ReleaseAdapterRequest(context=contexts[1])
        await batcher.release_adapter(release, 1.0)
        await batcher.release_adapter(model_pb.ReleaseAdapterRequest(context=contexts[2]), 1.0)
        start = trio.current_time()
        await ask(0)  # the others finished: nobody else to wait for
        assert client.sent[2] == (start, 1)
        nursery.cancel_scope.cancel()


def test_the_warmup_answers_are_not_measured() -> None:
    now = [0.0]
    rule = GroupingRule(window_rows=4, warmup_rows=8, clock=lambda: now[0])
    for _ in range(2):
        now[0] += 10.0  # a slow start (env resets, first calls): never sampled
        rule.answered(4, rule.epoch)
    now[0] = 100.0
    rule.answered(1, rule.epoch)  # the first window's clock starts here
    now[0] = 100.4
    rule.answered(4, rule.epoch)
    assert list(rule.costs[GROUP]) == [pytest.approx(0.1)]


def test_a_winning_probe_is_confirmed_at_once_and_then_chosen() -> None:
    rule = GroupingRule(reprobe_every=2)
    rule.sample(GROUP, 100e-6)  # an outlier first window...
    rule.sample(SINGLE, 50e-6)  # ...makes singles look cheaper
    assert rule.mode == SINGLE
    for _ in range(3):
        rule.sample(SINGLE, 50e-6)
    assert rule.mode == GROUP  # the re-probe
    rule.sample(GROUP, 10e-6)  # beats singles, though the median [100, 10] does not
    assert rule.mode == GROUP  # confirmed: another grouped window, not 2 windows of singles
    rule.sample(GROUP, 10e-6)  # median 10 < 50
    assert rule.mode == GROUP
    for _ in range(2):
        rule.sample(GROUP, 10e-6)
    assert rule.mode == GROUP  # chosen: it runs its interval before probing singles
    rule.sample(GROUP, 10e-6)
    assert rule.mode == SINGLE


def test_a_confirmation_that_loses_goes_back_to_the_chosen_mode() -> None:
    rule = GroupingRule(reprobe_every=1)
    rule.sample(GROUP, 100e-6)
    rule.sample(SINGLE, 50e-6)
    rule.sample(SINGLE, 50e-6)
    rule.sample(SINGLE, 50e-6)
    assert rule.mode == GROUP  # the probe
    rule.sample(GROUP, 10e-6)
    assert rule.mode == GROUP  # a lucky window: confirm it
    rule.sample(GROUP, 200e-6)  # median [100, 10, 200] = 100: singles stay chosen
    assert rule.mode == SINGLE


@pytest.mark.parametrize(("group", "single", "interval"), [(10e-6, 50e-6, 10), (1e-6, 1e-3, 16)])
def test_probe_share_spaces_the_probes_by_time(group: float, single: float, interval: int) -> None:
    rule = GroupingRule(reprobe_every=2, probe_share=True)
    rule.sample(GROUP, group)
    rule.sample(SINGLE, single)
    grouped = 0
    while rule.mode == GROUP:
        rule.sample(GROUP, group)
        grouped += 1
    # 2 windows times how much dearer a single window is (5x; at most MAX_STRETCH = 8x).
    assert grouped == interval + 1
