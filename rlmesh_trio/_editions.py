"""Workflow edition selection: the runtime's three-way floor (protocol notes §2.2)."""

from __future__ import annotations

import json
from collections.abc import Sequence

import attrs

__all__ = ["EditionOffer", "edition_key", "select_edition"]


def edition_key(name: str) -> tuple[str, int, str]:
    """Sort key: ``YYYY.MM`` base, then a suffixed cohort above the bare name, then the suffix."""
    base, sep, suffix = name.partition("-")
    return (base, 1 if sep else 0, suffix)


@attrs.frozen
class EditionOffer:
    """What one party can run (CAN) and, optionally, declares it wants (WANT)."""

    party: str
    can: tuple[str, ...] = attrs.field(converter=tuple)
    want: str | None = None

    def describe(self) -> str:
        want = f"wants {json.dumps(self.want)}" if self.want else "declares no edition"
        return f"{self.party} {want} and can {json.dumps(list(self.can))}"


def select_edition(offers: Sequence[EditionOffer]) -> str | None:
    """The highest edition every party can run that is at or below every declared WANT.

    Returns ``None`` when there is no such edition; callers raise with
    :func:`describe_offers` in the message.
    """
    if not offers:
        return None
    common = set(offers[0].can)
    for offer in offers[1:]:
        common &= set(offer.can)
    for offer in offers:
        if offer.want:
            ceiling = edition_key(offer.want)
            common = {e for e in common if edition_key(e) <= ceiling}
    if not common:
        return None
    return max(common, key=edition_key)


def describe_offers(offers: Sequence[EditionOffer]) -> str:
    parties = [o.party for o in offers]
    if len(parties) == 2:
        across = f"with the {parties[0]}"
    else:
        across = "across " + ", ".join(parties[:-1]) + f", and {parties[-1]}"
    return f"no mutual workflow edition {across}: " + "; ".join(o.describe() for o in offers)
