"""The bounded bank's policy: what a note is worth now, and what gives way at capacity.

Pure functions of a note's kind, age, repetitions and a clock: no model, no database.

A note's worth is how much value it still has to give: its decay factor now times its
half-life (the area left under its decay curve), scaled by repetition. So a year-old name still
outweighs a fresh sandwich, and an allergy a season old outweighs a train journey, because what
decays in hours is worth hours, however fresh.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

HOUR = 3600.0

# Half-lives per kind, in hours. None never decays.
HALF_LIFE_HOURS: dict[str, float | None] = {
    "identity": None,
    "preference": 180 * 24.0,
    "fact": 90 * 24.0,
    "ephemeral": 2.0,
    "page": None,
    "daily": 90 * 24.0,
}
# A note that never decays is valued over this horizon: long enough that nothing that decays
# can match it, even at full repetition.
NEVER_DECAYS_HORIZON_HOURS = 10 * 365 * 24.0

# Repetition multiplies worth by 1 + REPETITION_STEP per extra mention, at most MAX_REPETITION_BOOST.
# Bounded, so that no amount of repetition lifts an ephemeral above anything durable (2 h x 3
# is far below a fresh fact's 90 days) or anything at all above an identity (180 days x 3 is
# far below the never-decaying horizon). A much-repeated fact may outweigh a fresh preference.
REPETITION_STEP = 0.25
MAX_REPETITION_BOOST = 3.0


@dataclass(frozen=True)
class Candidate:
    key: str
    kind: str
    updated_at: datetime
    repetitions: int = 1


def decay_factor(kind: str, age_hours: float) -> float:
    half_life = HALF_LIFE_HOURS[kind]
    if half_life is None:
        return 1.0
    return math.pow(0.5, max(age_hours, 0.0) / half_life)


def repetition_boost(repetitions: int) -> float:
    return min(MAX_REPETITION_BOOST, 1.0 + REPETITION_STEP * max(repetitions - 1, 0))


def worth(candidate: Candidate, now: datetime) -> float:
    age_hours = (now - candidate.updated_at) / timedelta(hours=1)
    half_life = HALF_LIFE_HOURS[candidate.kind]
    horizon = NEVER_DECAYS_HORIZON_HOURS if half_life is None else half_life
    return decay_factor(candidate.kind, age_hours) * horizon * repetition_boost(candidate.repetitions)


def weakest(candidates: list[Candidate], now: datetime) -> Candidate:
    """The note that gives way first: lowest worth, then the oldest, then by key (stable)."""
    return min(candidates, key=lambda c: (worth(c, now), c.updated_at, c.key))


@dataclass(frozen=True)
class Verdict:
    admit: bool
    evict: Candidate | None  # the note to evict before the write, when admitting at capacity
    newcomer_worth: float
    weakest_worth: float | None


def judge_newcomer(newcomer: Candidate, held: list[Candidate], capacity: int, now: datetime) -> Verdict:
    """Decide a net-new note's fate in a bank holding `held` with room for `capacity`.

    Below capacity it is admitted. At capacity it is scored against the weakest held note: worth
    strictly more, and the weakest is evicted first; otherwise the newcomer is refused (a tie keeps
    what is already there).
    """
    newcomer_worth = worth(newcomer, now)
    if len(held) < capacity:
        return Verdict(admit=True, evict=None, newcomer_worth=newcomer_worth, weakest_worth=None)
    loser = weakest(held, now)
    loser_worth = worth(loser, now)
    if newcomer_worth > loser_worth:
        return Verdict(admit=True, evict=loser, newcomer_worth=newcomer_worth, weakest_worth=loser_worth)
    return Verdict(admit=False, evict=None, newcomer_worth=newcomer_worth, weakest_worth=loser_worth)
