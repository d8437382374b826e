"""The hostile-client matrix (issue 22): every attack against both of our servers.

Each test starts one server (CartPole-v1 env, or a numpy policy) in a subprocess
on 127.0.0.1 port 0, attacks it from raw sockets (``_attacks.py``) while our
runtime, as a legitimate client, runs a handshake and one episode against it,
and checks:

* the legitimate episode, during and after the attack, takes at most
  ``LEGIT_MARGIN_S`` more than the unloaded ones measured first in the same test
  (more than the slowest of them: what the machine's own noise adds is not the
  server's doing); a functional bound of the issue, not a benchmark;
* the server reacts as the issue asks (a GOAWAY with the right code, a gRPC
  status at the message prefix, closing idle connections at the timeout), or,
  for a frame RFC 9113 allows, serves on (issue 34's stream states);
* its memory: RSS back within ``RSS_RETURN_MIB`` of the start afterwards (within
  ``RSS_NOISE_MIB`` after 100k rapid resets), peak under ``PEAK_LIMIT_MIB`` for
  8 x 64 MiB.

``RLMESH_TRIO_RELIABILITY_SERVER=rlmesh`` runs the same attacks against rlmesh
0.1.0's servers (the calibration: the checks there are the mitigations rlmesh
has, so passing them shows each attack is real). Figures: see ``_harness.py``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest

from . import _attacks as attacks
from ._harness import Figures, run_attack
from ._targets import IDLE_TIMEOUT_S, PREFACE_TIMEOUT_S, Target, limits_available, serving

# Run on their own (`pytest -n 0 -m reliability`): a neighbouring test's load would
# blur the legitimate client's 100 ms margin.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.reliability,
    pytest.mark.xdist_group("reliability"),
    pytest.mark.timeout(120),
]

LEGIT_MARGIN_S = 0.100
RSS_RETURN_MIB = 20.0
RSS_NOISE_MIB = 8.0
PEAK_LIMIT_MIB = 300.0
#: A prefix refused "at the prefix": the sender never gets far past its first windows.
PREFIX_SENT_LIMIT = 16 * 1024**2
#: Far below the attacks' budgets (64 MiB), above what loopback's socket buffers take in
#: before a server that reacts at once is heard from.
HEADER_SENT_LIMIT = 16 * 1024**2
MIN_BACKLOG = 1024
#: Where ``ss`` cannot tell the backlog: no one of 900 connects waits for a SYN
#: retransmission (1 s), as one does when a short listen backlog overflows.
SLOWEST_CONNECT_LIMIT_S = 0.9
CLOSE_SLACK_S = 1.5
BEFORE_ENV_VAR = "RLMESH_TRIO_RELIABILITY_BEFORE"

NO_ERROR, PROTOCOL, FLOW_CONTROL, STREAM_CLOSED = 0x0, 0x1, 0x3, 0x5
FRAME_SIZE, COMPRESSION, CALM = 0x6, 0x9, 0xB
RESOURCE_EXHAUSTED, OUT_OF_RANGE = 8, 11


@attrs.frozen
class Expect:
    """What the server must do. ``goaways``: at least one GOAWAY, every one of these codes;
    ``reacts``: every connection gets a reaction (GOAWAY, reset, close or backpressure);
    ``served``: no GOAWAY, and every connection is answered a gRPC status."""

    goaways: frozenset[int] = frozenset()
    reacts: bool = False
    status: int | None = None
    max_sent: int | None = None
    at_header: bool = False
    rss_return: float | None = RSS_RETURN_MIB
    peak: float | None = None
    served: bool = False
    legit: bool = True


ATTACKS: dict[str, attacks.Attack] = {
    "rapid_reset": attacks.rapid_reset,
    "settings_flood": attacks.settings_flood,
    "ping_flood": attacks.ping_flood,
    "empty_data_flood": attacks.empty_data_flood,
    "prefix_2gib": attacks.prefix_lie,
    "8x64mib_fast": attacks.big_streams,
    "frame_header_16mib": attacks.huge_frame_header,
    "random_after_preface": attacks.random_bytes,
    "continuation_flood": attacks.continuation_flood,
    "hpack_bomb": attacks.hpack_bomb,
    "oversized_header_block": attacks.oversized_header,
    "invalid_hpack": attacks.invalid_hpack,
    "window_update_overflow": attacks.window_overflow,
    # RFC 9113's stream states for the frames our servers handle outside h2 (issue 34)
    "data_on_stream_0": attacks.data_on_stream_0,
    "data_on_idle_stream": attacks.data_on_idle_stream,
    "data_after_end_stream": attacks.data_after_end_stream,
    "data_after_rst_stream": attacks.data_after_rst_stream,
    "window_update_idle": attacks.window_update_idle,
    "rst_stream_idle": attacks.rst_stream_idle,
    "data_after_server_reset": attacks.data_after_server_reset,
}

OURS: dict[str, Expect] = {
    "rapid_reset": Expect(goaways=frozenset({CALM}), rss_return=RSS_NOISE_MIB),
    "settings_flood": Expect(goaways=frozenset({CALM})),
    "ping_flood": Expect(goaways=frozenset({CALM})),
    "empty_data_flood": Expect(goaways=frozenset({CALM})),
    "prefix_2gib": Expect(status=RESOURCE_EXHAUSTED, max_sent=PREFIX_SENT_LIMIT),
    "8x64mib_fast": Expect(reacts=True, peak=PEAK_LIMIT_MIB),
    "frame_header_16mib": Expect(goaways=frozenset({FRAME_SIZE}), reacts=True, at_header=True),
    "random_after_preface": Expect(reacts=True),
    "continuation_flood": Expect(reacts=True, max_sent=HEADER_SENT_LIMIT),
    "hpack_bomb": Expect(reacts=True),
    "oversized_header_block": Expect(reacts=True),
    # RFC 9113 §4.3: COMPRESSION_ERROR (h2 queues PROTOCOL_ERROR; the core rewrites its code).
    "invalid_hpack": Expect(goaways=frozenset({COMPRESSION}), reacts=True),
    "window_update_overflow": Expect(goaways=frozenset({FLOW_CONTROL}), reacts=True),
    "data_on_stream_0": Expect(goaways=frozenset({PROTOCOL}), reacts=True),
    "data_on_idle_stream": Expect(goaways=frozenset({PROTOCOL}), reacts=True),
    # §5.1: the peer itself ended or reset the stream; a connection error (see wire/_streams.py)
    "data_after_end_stream": Expect(goaways=frozenset({STREAM_CLOSED}), reacts=True),
    "data_after_rst_stream": Expect(goaways=frozenset({STREAM_CLOSED}), reacts=True),
    "window_update_idle": Expect(goaways=frozenset({PROTOCOL}), reacts=True),
    "rst_stream_idle": Expect(goaways=frozenset({PROTOCOL}), reacts=True),
    # §5.1: DATA after our RST_STREAM is dropped, counted toward the window and credited
    "data_after_server_reset": Expect(served=True),
}
#: What our servers do not meet yet (issue 22 stays open for them), with what was measured
#: on 2 cores. These still run and print their figures; xfail(strict=False) keeps them
#: from failing the suite until they are met.
NOT_YET: dict[str, str] = {}


def _attack_params() -> list[Any]:
    return [
        pytest.param(name, marks=pytest.mark.xfail(reason=NOT_YET[name], strict=False))
        if name in NOT_YET
        else name
        for name in sorted(ATTACKS)
    ]


#: rlmesh 0.1.0's mitigations (issue 22's table); elsewhere only the legitimate client counts.
RLMESH: dict[str, Expect] = {
    "rapid_reset": Expect(goaways=frozenset({CALM}), rss_return=RSS_NOISE_MIB),
    "prefix_2gib": Expect(status=OUT_OF_RANGE, max_sent=PREFIX_SENT_LIMIT),
    # No mitigation there (peak 481-556 MiB): the transfer competes for the 2 cores.
    "8x64mib_fast": Expect(reacts=True, legit=False),
    "frame_header_16mib": Expect(goaways=frozenset({FRAME_SIZE}), reacts=True, at_header=True),
    "random_after_preface": Expect(reacts=True),
    # rlmesh's h2 answers undecodable HPACK with PROTOCOL_ERROR (RFC 9113 asks COMPRESSION_ERROR).
    "invalid_hpack": Expect(goaways=frozenset({PROTOCOL, COMPRESSION}), reacts=True),
    "window_update_overflow": Expect(goaways=frozenset({FLOW_CONTROL}), reacts=True),
    # grpcio's C core keeps the same stream states; its codes where ours differ: PROTOCOL_ERROR
    # for DATA after END_STREAM, a stream error (RST_STREAM STREAM_CLOSED) after a reset.
    "data_on_stream_0": Expect(goaways=frozenset({PROTOCOL}), reacts=True),
    "data_on_idle_stream": Expect(goaways=frozenset({PROTOCOL}), reacts=True),
    "data_after_end_stream": Expect(goaways=frozenset({PROTOCOL}), reacts=True),
    "data_after_rst_stream": Expect(reacts=True),
    "window_update_idle": Expect(goaways=frozenset({PROTOCOL}), reacts=True),
    "rst_stream_idle": Expect(goaways=frozenset({PROTOCOL}), reacts=True),
    "data_after_server_reset": Expect(served=True),
}


def _problems(figures: Figures, expect: Expect) -> list[str]:
    out, found = figures.outcome, []
    if figures.error:
        found.append(figures.error)
    if expect.goaways and (not out.goaways or not set(out.goaways) <= expect.goaways):
        found.append(f"GOAWAY codes {out.goaways[:8]}, expected {sorted(expect.goaways)}")
    if expect.served and (out.goaways or len(out.statuses) < out.connections):
        found.append(
            f"served on {len(out.statuses)} of {out.connections} connections, GOAWAY codes "
            f"{out.goaways[:8]}, {out.extra.get('window_stalls', 0)} window stalls"
        )
    if expect.reacts and out.unreacted:
        found.append(f"{out.unreacted} of {out.connections} connections got no reaction")
    if expect.status is not None and expect.status not in out.statuses:
        found.append(f"grpc-status {out.statuses[:8]}, expected {expect.status}")
    if expect.max_sent is not None and out.sent > expect.max_sent:
        found.append(f"{out.sent} bytes sent before the server reacted (<= {expect.max_sent})")
    reacted_early = out.extra.get("reacted_at_header", out.connections)
    if expect.at_header and reacted_early < out.connections:
        found.append(f"only {reacted_early} of {out.connections} reacted at the frame header")
    grown = figures.rss_end_mib - figures.rss_start_mib
    if expect.rss_return is not None and not grown <= expect.rss_return:
        found.append(f"RSS still {grown:.1f} MiB above its start (<= {expect.rss_return})")
    if expect.peak is not None and not figures.rss_peak_mib < expect.peak:
        found.append(f"peak RSS {figures.rss_peak_mib:.0f} MiB (< {expect.peak:.0f})")
    return found + (_legit_problems(figures) if expect.legit else [])


def _legit_problems(figures: Figures) -> list[str]:
    found = list(figures.legit_errors)
    for when, seconds in (("during", figures.during_s), ("after", figures.after_s)):
        if not seconds - figures.unloaded_max_s <= LEGIT_MARGIN_S:
            found.append(
                f"legit episode {when} the attack took {seconds * 1e3:.0f} ms, unloaded "
                f"{figures.unloaded_s * 1e3:.0f} ms, slowest {figures.unloaded_max_s * 1e3:.0f}"
                f" ms (margin {LEGIT_MARGIN_S * 1e3:.0f} ms)"
            )
    return found


@pytest.fixture(params=["env", "model"])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    with serving(request.param) as served:
        yield served


@pytest.mark.parametrize("name", _attack_params())
def test_server_holds_against(name: str, target: Target) -> None:
    attack = ATTACKS[name]
    bound: Callable[[attacks.Halt], attacks.Outcome] = functools.partial(
        attack, target.port, target.path
    )
    expect = (OURS if target.side == "ours" else RLMESH).get(name, Expect(rss_return=None))
    figures = run_attack(name, target, bound, expect.rss_return or RSS_RETURN_MIB)
    assert not (problems := _problems(figures, expect)), "; ".join(problems)


def test_idle_and_half_open_connections_close_at_the_timeout(target: Target) -> None:
    before = os.environ.get(BEFORE_ENV_VAR) == "1"
    if target.side == "ours" and not limits_available() and not before:
        pytest.skip("rt.ServerLimits does not exist yet: no idle/preface timeout to set")
    close_within = max(IDLE_TIMEOUT_S, PREFACE_TIMEOUT_S) + CLOSE_SLACK_S

    idle = functools.partial(attacks.idle_connections, target.port, close_within)
    figures = run_attack("idle_900", target, idle, RSS_RETURN_MIB)
    out, problems = figures.outcome, _legit_problems(figures)
    if figures.error:
        problems.append(figures.error)
    if target.side == "ours":
        problems += _idle_problems(out, target.listen_backlog(), close_within)
        # A silent connection holds no protocol state, so the burst leaves little behind.
        grown = figures.rss_end_mib - figures.rss_start_mib
        if not grown <= RSS_RETURN_MIB:
            problems.append(f"RSS still {grown:.1f} MiB above its start (<= {RSS_RETURN_MIB})")
    assert not problems, "; ".join(problems)


def _idle_problems(out: attacks.Outcome, backlog: int | None, close_within: float) -> list[str]:
    problems = []
    slowest = out.extra.get("slowest_connect_s", 99.0)
    print(f"RELIABILITY listen backlog {backlog}, slowest connect {slowest:.2f}s")
    if backlog is not None and backlog < MIN_BACKLOG:
        problems.append(f"listen backlog {backlog} (>= {MIN_BACKLOG})")
    if backlog is None and not slowest < SLOWEST_CONNECT_LIMIT_S:
        problems.append(
            f"a connect took {slowest:.2f}s (< {SLOWEST_CONNECT_LIMIT_S}): backlog full"
        )
    closed = out.extra.get("closed_in_time", 0)
    if closed < attacks.IDLE_CONNECTIONS:
        problems.append(f"only {closed} of 900 idle connections closed within {close_within}s")
    return problems
