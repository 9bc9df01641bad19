"""Dates a query names ("on 25 May, 2022", "in April 2022", "December 1, 2023", "in 2024"), as spans of days.

Messages carry the time they were said (a history import keeps each message's real date), so a
question that names a date is asking about what was said around it. Only dates that name their
year are read (a bare "25 May" could be any year); English month names only, and anything else
is left alone (a query in another language simply names no date here).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

_MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
_MONTHS |= {name.lower(): number for number, name in enumerate(calendar.month_abbr) if name}
_MONTHS["sept"] = 9
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
# Most specific first: a day's date, then a month's, then a year's; each span of text is read once.
_PATTERNS = [
    ("day", re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s*{_YEAR}\b", re.IGNORECASE)),
    ("day", re.compile(rf"\b{_MONTH}\s+{_DAY},?\s*{_YEAR}\b", re.IGNORECASE)),
    ("day", re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<month>[01]\d)-(?P<day>[0-3]\d)\b")),
    ("month", re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE)),
    ("year", re.compile(rf"\b{_YEAR}\b")),
]


# The words that lead into a date ("on", "as of", "in the week before"): cut out with it.
_LEADING = re.compile(
    r"(?:\b(?:on|in|by|of|as|during|since|until|before|after|around|between|and|from|to)\b[\s,]*)+$", re.IGNORECASE
)


@dataclass(frozen=True)
class NamedDate:
    """A date the query names: the days it covers (first and last, inclusive) and where it was said."""

    first: date
    last: date
    start: int  # its place in the query's text
    end: int

    def window(self, *, slack_days: int = 0) -> tuple[datetime, datetime]:
        """The moments on these days (in UTC), give or take slack_days: from the first, up to but not the second."""
        start = datetime.combine(self.first - timedelta(days=slack_days), time(), tzinfo=UTC)
        end = datetime.combine(self.last + timedelta(days=slack_days + 1), time(), tzinfo=UTC)
        return start, end

    def covers(self, at: datetime, *, slack_days: int = 0) -> bool:
        """Whether a moment falls on one of these days (in UTC), give or take slack_days."""
        start, end = self.window(slack_days=slack_days)
        return start <= at < end


def _month(raw: str) -> int:
    return int(raw) if raw.isdigit() else _MONTHS[raw.lower().rstrip(".")]


def named_dates(text: str) -> list[NamedDate]:
    """The dates the text names, in order of where they are said; none when it names no year."""
    found: list[NamedDate] = []
    taken: list[tuple[int, int]] = []
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            if any(match.start() < end and start < match.end() for start, end in taken):
                continue
            taken.append((match.start(), match.end()))  # read once, a date or not
            year = int(match["year"])
            try:
                if kind == "day":
                    first = last = date(year, _month(match["month"]), int(match["day"]))
                elif kind == "month":
                    month = _month(match["month"])
                    first = date(year, month, 1)
                    last = date(year, month, calendar.monthrange(year, month)[1])
                else:
                    first, last = date(year, 1, 1), date(year, 12, 31)
            except ValueError:  # "31 February, 2023", "Sept 0, 2023": not a date
                continue
            found.append(NamedDate(first, last, match.start(), match.end()))
    return sorted(found, key=lambda named: named.start)


def without_dates(text: str, dates: list[NamedDate]) -> str:
    """The text with the dates it names cut out (what is left is what the query asks about them)."""
    kept, at = [], 0
    for named in dates:
        kept.append(_LEADING.sub("", text[at : named.start]))
        at = named.end
    kept.append(text[at:])
    return re.sub(r"\s+", " ", "".join(kept)).strip()
