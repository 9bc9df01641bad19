"""What the `rules` provider takes as a person taking something back, and the note lines it contradicts.

A retraction ("I'm not vegetarian anymore", "I no longer work at Acme", "I stopped running") names
a topic; the lines of known notes that state that topic are what it contradicts (curator.rules
removes them, or forgets a note left with none). Removing a true note is the costly mistake here,
so both halves are narrow: only the person's own plain statements retract (no question, no
hypothetical, no one else, nothing temporary), and only a line that states the topic alone, about
the person, and not already as over, is contradicted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A capitalised name ends at punctuation or at the next lowercase word ("Bergen last week").
END = r"(?=[.,!?;:]|$|\s+[a-z])"
# A lowercase phrase ends at punctuation or at a joining word ("peanuts and ...").
END_PHRASE = (
    r"(?=[.,!?;:]|$|\s+(?:and|but|with|since|now|because|for|so|too|when|if|anymore|any\s+more|any\s+longer"
    r"|after\s+all)\b)"
)
PLACE = r"([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,3})"
ORG = r"([A-Z][\w&'.-]*(?:\s+[A-Z&][\w&'.-]*){0,3})"
ANYMORE = r"(?i:anymore|any\s+more|any\s+longer)"
_THING = r"([a-z][\w' -]{1,50}?)"
_DIETS = r"(vegetarian|vegan|pescatarian)"

DIET_DROPPED = [
    re.compile(r"\b(?:I'm|I\s+am)\s+(?:not|no\s+longer)\s+(?:a\s+)?" + _DIETS + r"\b", re.IGNORECASE),
    re.compile(
        r"\bI(?:'ve|\s+have)?\s+(?:just\s+|finally\s+)?stopped\s+being\s+(?:a\s+)?" + _DIETS + r"\b", re.IGNORECASE
    ),
]
MEAT_AGAIN = re.compile(
    r"\bI(?:'m|\s+am|'ve|\s+have)?\s+(?:started\s+|begun\s+)?eat(?:ing)?\s+meat\s+(?:again|now)\b", re.IGNORECASE
)
# "I left Acme", "I quit my job at Acme": the employer note says so ("Left Acme; ..."), even when
# no employer was known: where someone no longer works is worth knowing too.
LEFT_JOB = re.compile(
    r"\bI\s+(?i:just\s+)?(?i:left|quit|resigned\s+from|was\s+laid\s+off\s+from|got\s+laid\s+off\s+from"
    r"|was\s+fired\s+from|no\s+longer\s+work\s+(?:at|for)|(?:quit|left)\s+my\s+job\s+(?:at|with|for))\s+" + ORG + END
)
NOT_WORKING_AT = re.compile(
    r"\b(?:I\s+(?i:don't|do\s+not)\s+(?i:work)|(?:I'm|I\s+am)\s+(?i:not|no\s+longer)\s+(?i:working))\s+(?i:at|for)\s+"
    + ORG
    + END
)
JOB_GONE = re.compile(
    r"\bI\s+(?:just\s+|finally\s+)?(?:(?:quit|left|lost)\s+my\s+job|(?:was|got)\s+(?:laid\s+off|fired|let\s+go))\b"
    r"(?!\s+(?:at|with|for|from)\b)",
    re.IGNORECASE,
)
HOME_LEFT = [
    re.compile(
        r"\bI(?:'ve|\s+have)?\s+(?i:just\s+|recently\s+)?(?i:moved\s+(?:out\s+of|away\s+from|from))\s+" + PLACE + END
    ),
    re.compile(r"\bI\s+(?i:no\s+longer|don't|do\s+not)\s+(?i:live)\s+(?i:in)\s+" + PLACE + END),
    re.compile(r"\b(?:I'm|I\s+am)\s+(?i:not|no\s+longer)\s+(?i:living)\s+(?i:in)\s+" + PLACE + END),
]
ALLERGY_GONE = [
    re.compile(
        r"\b(?:I'm|I\s+am)\s+not\s+allergic\s+to\s+([a-z][\w -]{1,40}?)\s+(?:anymore|any\s+more|any\s+longer|after\s+all)\b",
        re.IGNORECASE,
    ),
    re.compile(r"\b(?:I'm|I\s+am)\s+no\s+longer\s+allergic\s+to\s+([a-z][\w -]{1,40}?)" + END_PHRASE, re.IGNORECASE),
    re.compile(
        r"\bI(?:'ve|\s+have)?\s+(?:outgrew|outgrown)\s+my\s+([a-z][\w-]{1,30})\s+allerg(?:y|ies)\b", re.IGNORECASE
    ),
]
LIKING_GONE = [
    re.compile(
        r"\bI\s+(?:don't|do\s+not)\s+(?:really\s+)?(like|love|enjoy|hate|dislike|mind)\s+" + _THING + r"\s+" + ANYMORE,
        re.IGNORECASE,
    ),
    re.compile(r"\bI\s+no\s+longer\s+(like|love|enjoy|hate|dislike)\s+" + _THING + END_PHRASE, re.IGNORECASE),
    re.compile(
        r"\bI(?:'ve|\s+have)?\s+stopped\s+(liking|loving|enjoying|hating)\s+" + _THING + END_PHRASE, re.IGNORECASE
    ),
]
_DISLIKING = {"hate", "dislike", "mind", "hating"}
# A habit: "I stopped running", "I gave up coffee", "I don't run anymore", "I'm not smoking anymore".
# The topic is lowercase (a capitalised one is a place or an employer, above).
HABIT_GONE = [
    re.compile(
        r"\bI(?:'ve|\s+have)?\s+(?i:just\s+|finally\s+|recently\s+|already\s+)?"
        r"(?i:stopped|quit|gave\s+up|given\s+up|kicked)\s+(?:the\s+)?([a-z]+)(?:\s+([a-z]+))?"
    ),
    re.compile(r"\bI\s+(?i:don't|do\s+not)\s+([a-z]+)(?:\s+([a-z]+))?\s+" + ANYMORE),
    re.compile(r"\bI\s+(?i:no\s+longer)\s+([a-z]+)(?:\s+([a-z]+))?"),
    re.compile(r"\b(?:I'm|I\s+am)\s+(?i:not)\s+([a-z]+ing)(?:\s+([a-z]+))?\s+" + ANYMORE),
    re.compile(r"\b(?:I'm|I\s+am)\s+(?i:no\s+longer)\s+([a-z]+ing)(?:\s+([a-z]+))?"),
]
# Words after "I stopped" / "I don't ... anymore" that name no habit, or one a rule above handles.
_NOT_A_HABIT = {
    "a", "an", "my", "the", "it", "that", "this", "these", "those", "them", "him", "her", "you", "there", "here",
    "by", "at", "in", "on", "to", "for", "from", "with", "and", "but", "so", "because", "since", "now", "then",
    "today", "yesterday", "again", "altogether", "completely", "entirely", "every", "each", "daily", "last",
    "being", "job", "work", "working", "school", "live", "living", "like", "love", "enjoy", "hate", "dislike",
    "mind", "liking", "loving", "enjoying", "hating", "care", "caring", "know", "think", "want", "need",
    "remember", "get", "have", "do", "see", "believe", "trust", "worry", "worrying", "trying", "talking", "am",
    "is", "are", "be", "feel", "really", "even", "much", "allergic", "anymore",
    "longer", "any", "more", "after", "all", "go", "going", "too", "also", "as", "well", "either", "cold",
    "turkey", "over", "ago", "years", "months", "weeks",
}  # fmt: skip

# Verbs too general to name a habit alone: "I stopped eating meat" is one, "I stopped eating" is not.
_NEEDS_AN_OBJECT = {"eat", "eating", "drink", "drinking", "play", "playing", "do", "doing", "make", "making"}

# What makes a sentence no retraction: a question, and before the match a hypothetical, someone
# else's claim or a negation ("if I stopped running", "she says I quit", "not that I quit");
# after it, something temporary or a joke ("for a week", "until my knee heals", "just kidding").
_ASKS = re.compile(
    r"^\W*(?:do|does|did|should|would|could|can|will|shall|may|might|is|are|am|was|were|what|why|how|where|who"
    r"|which|have|has)\b",
    re.IGNORECASE,
)
_HEDGED_BEFORE = re.compile(
    r"\b(?:if|unless|whether|suppose|supposing|imagine|pretend|maybe|perhaps|might|may|would|could|should|think|"
    r"thinks|thought|wonder|wondering|consider|considering|plan|planning|want|wants|hope|hoping|say|says|said|tell|"
    r"tells|told|claims?|believes?|not|never|don't|didn't|doesn't|when|once|before|after|wish|dream|dreamt|dreamed)\b",
    re.IGNORECASE,
)
_HEDGED_AFTER = re.compile(
    r"\b(?:for\s+(?:a|the|now|some|two|three|a\s+few|the\s+moment)|temporarily|until|till|this\s+(?:week|month)"
    r"|at\s+the\s+moment|right\s+now|kidding|joking|jk|yet)\b",
    re.IGNORECASE,
)

# A note line about someone else, or one saying the thing is over already, is not contradicted.
_SOMEONE_ELSE = re.compile(
    r"\b(?:he|she|his|her|hers|him|sister|brother|mother|mom|mum|father|dad|wife|husband|partner|boyfriend"
    r"|girlfriend|son|daughter|kids?|child|children|friends?|colleagues?|boss|parents?|family|roommate|flatmate)\b",
    re.IGNORECASE,
)
_OVER = r"no\s+longer|not|never|n't|used\s+to|stopped|quit|gave\s+up|given\s+up|left|former|formerly|ex"
_ALREADY_OVER = re.compile(r"(?:\b(?:" + _OVER + r")\b|n't\b)", re.IGNORECASE)
_ALREADY_OVER_OR_DISLIKED = re.compile(
    r"(?:\b(?:" + _OVER + r"|dislikes?|hates?|can't\s+stand|cannot\s+stand)\b|n't\b)", re.IGNORECASE
)
# A line joining several facts says more than what was taken back: it is left alone.
_SEVERAL = re.compile(r"\s(?:and|but|or)\s|[,;]\s|\.\s+\S")


@dataclass(frozen=True)
class Retraction:
    """A topic the person took back, and how to recognise a note line that states it."""

    topic: str  # diet, home, employer, allergy, liking, habit
    states: re.Pattern[str]
    spares: re.Pattern[str] = _ALREADY_OVER
    employer: str | None = None  # a job retraction: the employer it names ("" for "I quit my job")
    records_left: bool = False  # "I left Acme": the employer note says so, even if nothing was known
    removes: bool = True  # False: only whether a line states it matters

    def contradicts(self, line: str) -> bool:
        text = line.strip()
        return bool(
            text
            and self.states.search(text)
            and not self.spares.search(text)
            and not _SOMEONE_ELSE.search(text)
            and not _SEVERAL.search(text.rstrip("."))
        )


def _alternatives(words: set[str]) -> str:
    return "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))


def word_forms(word: str) -> set[str]:
    """The forms a note may use for a habit or a thing: run, runs, running, runner; peanut, peanuts."""
    word = word.lower()
    stems = {word}
    if word.endswith("ing") and len(word) > 5:
        stem = word[:-3]
        stems = {stem, stem + "e"}
        if len(stem) > 2 and stem[-1] == stem[-2]:
            stems.add(stem[:-1])  # running → run
    forms = {word}
    for stem in stems:
        forms |= {stem, stem + "s", stem + "es", stem + "er", stem + "ers", stem + "ing"}
        forms |= {stem + stem[-1] + "ing", stem + stem[-1] + "er", stem + stem[-1] + "ers"}  # run: running, runner
        if stem.endswith("e"):
            forms |= {stem[:-1] + "ing", stem + "r", stem + "rs"}
    if word.endswith("s") and len(word) > 3:
        forms.add(word[:-1])
    return {f for f in forms if len(f) > 1}


def _habit(words: set[str]) -> re.Pattern[str]:
    # "Runs a bakery" is not running: a form followed by an object of its own is another sense.
    return re.compile(r"\b(?:" + _alternatives(words) + r")\b(?!\s+(?:a|an|the|his|her|their|its|my)\b)", re.IGNORECASE)


def _mentions(name: str, topic: str) -> re.Pattern[str]:
    """A line naming `name` (as written) and the topic's words, in either order."""
    named = r"\b" + re.escape(name) + r"\b"
    return re.compile(rf"(?=.*{named})(?=.*\b(?i:{topic})\b)")


_HOME_WORDS = r"lives?|living|home|moved|resides|based"
_WORK_WORDS = r"works?|working|employed|employee|employer|job|joined"


def plain_statement(sentence: str, match: re.Match[str]) -> bool:
    """Whether the match is the person's own plain statement: not asked, hedged or temporary."""
    if sentence.rstrip().endswith("?") or _ASKS.match(sentence):
        return False
    # From the match's start: a pattern's optional object may have taken the hedge's first word.
    return not _HEDGED_BEFORE.search(sentence[: match.start()]) and not _HEDGED_AFTER.search(sentence[match.start() :])


def find_retractions(sentence: str) -> list[Retraction]:
    """The retractions a sentence of the person's makes (none when it asks, supposes or hedges)."""
    found: list[Retraction] = []
    claimed: list[tuple[int, int]] = []  # spans a rule took: a later, broader rule leaves them alone

    def plain(match: re.Match[str]) -> bool:
        if any(start < match.end() and match.start() < end for start, end in claimed):
            return False
        if not plain_statement(sentence, match):
            return False
        claimed.append(match.span())
        return True

    for pattern in DIET_DROPPED:
        for match in pattern.finditer(sentence):
            if plain(match):
                found.append(Retraction("diet", re.compile(rf"\b{match.group(1).lower()}\b", re.IGNORECASE)))
    for match in MEAT_AGAIN.finditer(sentence):
        if plain(match):
            found.append(Retraction("diet", re.compile(r"\b" + _DIETS + r"\b", re.IGNORECASE)))
    for pattern in HOME_LEFT:
        for match in pattern.finditer(sentence):
            place = match.group(1).strip()
            if plain(match):
                found.append(Retraction("home", _mentions(place, _HOME_WORDS)))
    for match in LEFT_JOB.finditer(sentence):
        org = match.group(1).strip().rstrip(".")
        if plain(match):
            if re.match(r"I\s+(?:just\s+)?left\s", match.group(0), re.IGNORECASE):
                # "I left Oslo" may be a trip: it takes back no home, but is no job left either.
                found.append(Retraction("home", _mentions(org, _HOME_WORDS), removes=False))
            found.append(Retraction("employer", _mentions(org, _WORK_WORDS), employer=org, records_left=True))
    for match in NOT_WORKING_AT.finditer(sentence):
        org = match.group(1).strip().rstrip(".")
        if plain(match):
            found.append(Retraction("employer", _mentions(org, _WORK_WORDS), employer=org))
    for match in JOB_GONE.finditer(sentence):
        if plain(match):
            works = re.compile(r"\b(?:works|working|employed)\s+(?:at|for|by)\b", re.IGNORECASE)
            found.append(Retraction("employer", works, employer=""))
    for pattern in ALLERGY_GONE:
        for match in pattern.finditer(sentence):
            if plain(match):
                # An allergy is only let go when a line states exactly it: a wrong removal is dangerous.
                things = _alternatives(word_forms(match.group(1).strip()))
                found.append(
                    Retraction(
                        "allergy",
                        re.compile(
                            rf"^(?:is\s+)?(?:severely\s+|very\s+)?allergic\s+to\s+(?:{things})\.?$"
                            rf"|^(?:has\s+an?\s+)?(?:{things})\s+allergy\.?$",
                            re.IGNORECASE,
                        ),
                    )
                )
    for pattern in LIKING_GONE:
        for match in pattern.finditer(sentence):
            verb = match.group(1).lower()
            thing = re.sub(r"^(?:to|the|a|an)\s+", "", match.group(2).strip(), flags=re.IGNORECASE)
            if not thing or not plain(match):
                continue
            things = _alternatives(word_forms(thing))
            if verb in _DISLIKING:
                found.append(
                    Retraction(
                        "liking",
                        re.compile(rf"\b(?:dislikes?|hates?|can't\s+stand|cannot\s+stand)\s+(?:{things})\b", re.I),
                        spares=re.compile(r"\b(?:no\s+longer|used\s+to|stopped|formerly)\b", re.IGNORECASE),
                    )
                )
            else:
                found.append(
                    Retraction(
                        "liking",
                        re.compile(rf"\b(?:likes?|loves?|enjoys?|adores?|prefers?|fan\s+of)\s+(?:{things})\b", re.I),
                        spares=_ALREADY_OVER_OR_DISLIKED,
                    )
                )
    for pattern in HABIT_GONE:
        for match in pattern.finditer(sentence):
            verb, thing = match.group(1).lower(), (match.group(2) or "").lower()
            if verb in _NOT_A_HABIT:
                continue
            if len(verb) < 3 or not plain(match):
                continue
            if thing and thing not in _NOT_A_HABIT and len(thing) > 2:
                # "I stopped drinking coffee": a line about drinking coffee, not one that likes coffee.
                both = (
                    rf"(?=.*\b(?:{_alternatives(word_forms(verb))})\b)(?=.*\b(?:{_alternatives(word_forms(thing))})\b)"
                )
                found.append(Retraction("habit", re.compile(both, re.IGNORECASE)))
            elif verb not in _NEEDS_AN_OBJECT:
                found.append(Retraction("habit", _habit(word_forms(verb))))
    return found
