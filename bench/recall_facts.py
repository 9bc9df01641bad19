# ruff: noqa: SIM905 (word lists are written as words; list literals would run to hundreds of lines)
"""1,000 facts about the people in one person's life, generated deterministically (names x relations x values).

Each fact is stored two ways: with an informative key and description (`priya-home-city`,
"Priya's home city") and with a neutral one (`fact-0001`, the fact itself as description), the
content being the fact in both. Questions come in two kinds: targeted (a name and a relation:
"Which city does Priya live in?") and reverse (a value: "Who lives in Lisbon?"), each answered by
exactly one fact. Every value is unique within its relation, so a reverse question has one answer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

NAMES = """
Priya Tomas Ingrid Kwame Mei Rafael Sofia Dmitri Amara Lukas Hana Oliver Fatima Mateo Yuki Nadia
Ethan Leila Jonas Chloe Arjun Zara Henrik Lucia Samir Freya Diego Aisha Marco Elena Kofi Greta
Ravi Isla Pablo Noor Felix Mira Hugo Selin Bruno Anya Tariq Clara Emil Rosa Idris Vera Nico Dalia
""".split()

CITIES = """
Lisbon Porto Madrid Seville Valencia Barcelona Lyon Marseille Bordeaux Nantes Geneva Zurich Basel Munich
Hamburg Cologne Leipzig Dresden Vienna Salzburg Prague Brno Krakow Gdansk Warsaw Vilnius Riga Tallinn
Helsinki Tampere Stockholm Uppsala Gothenburg Oslo Bergen Copenhagen Aarhus Dublin Cork Galway Glasgow
Edinburgh Aberdeen Belfast Cardiff Bristol Leeds York Sheffield Brighton Norwich Exeter
""".split()
COMPANY_A = "Northwind Bluefin Redwood Silverline Greenleaf Ironbridge Sunpeak Harbor Clearwater Stonegate".split()
COMPANY_B = "Logistics Analytics Pharma Robotics Insurance Foods Energy Studios".split()
JOBS = """
nurse architect plumber pharmacist translator electrician journalist physiotherapist accountant librarian
carpenter veterinarian dentist firefighter pilot baker florist geologist surveyor optician paramedic
midwife welder chemist lawyer judge economist photographer illustrator sculptor tailor butcher chef
barista teacher lecturer astronomer botanist zoologist locksmith mechanic jeweller potter beekeeper
sommelier cartographer archivist curator actuary radiographer
""".split()
SPECIES = "beagle spaniel terrier collie poodle tabby parrot tortoise rabbit hamster".split()
PET_NAMES = "Biscuit Pepper Mochi Juniper Waffles Nutmeg Pickle Clementine Bramble Sprout".split()
COLOURS = "red blue green white black silver yellow orange".split()
MAKES = "Volvo Toyota Skoda Fiat Renault Kia Mazda Honda Peugeot Subaru".split()
MONTHS = "January February March April May June July August September October November December".split()
DISHES = """
paella ramen lasagne risotto moussaka goulash pierogi biryani pho bibimbap tagine falafel ceviche
gnocchi couscous dumplings burritos enchiladas shakshuka jambalaya carbonara tempura sushi satay
laksa curry pad-thai kimchi-stew haggis borscht fondue raclette schnitzel souvlaki kebab tapas
gazpacho bouillabaisse cassoulet croissants pancakes waffles churros baklava tiramisu cheesecake
brownies crumble porridge bagels
""".split()
SPORTS_A = "tennis squash badminton volleyball football basketball hockey rugby netball cricket".split()
SPORTS_B = "Mondays Tuesdays Wednesdays Thursdays Fridays".split()
INSTRUMENTS = "violin cello piano guitar drums flute clarinet trumpet saxophone harp".split()
STYLES = "jazz folk classical rock blues".split()
ALLERGENS = """
peanuts shellfish penicillin pollen latex gluten sesame almonds walnuts eggs strawberries kiwi celery
mustard soy lupin mussels cashews pistachios hazelnuts dust-mites wasps bees ibuprofen aspirin oats plums
""".split()
SUBJECTS = "physics history medicine law chemistry biology economics philosophy music geography".split()
UNIVERSITIES = "Oxford Cambridge Edinburgh Bologna Leiden Uppsala Heidelberg Coimbra Salamanca Trinity".split()
LANGUAGES = """
Spanish Italian German French Portuguese Dutch Swedish Norwegian Danish Finnish Polish Czech Greek Turkish
Arabic Hebrew Hindi Urdu Bengali Japanese Korean Mandarin Cantonese Vietnamese Thai Swahili Welsh Irish
Icelandic Hungarian Romanian Ukrainian Russian Farsi Tagalog Indonesian Malay Catalan Basque Estonian
Latvian Lithuanian Slovak Slovenian Croatian Serbian Bulgarian Albanian Maltese Zulu
""".split()
AUTHORS = """
Austen Dickens Tolstoy Woolf Orwell Borges Calvino Murakami Atwood Morrison Achebe Ishiguro Mantel
Pratchett Tolkien Christie Dostoevsky Kafka Camus Eco Marquez Nabokov Steinbeck Hemingway Faulkner
Bronte Eliot Hardy Chekhov Ferrante Rushdie Smith Adichie Ondaatje Lessing Saramago Pamuk Sebald
Baldwin Le-Guin Asimov Herbert Gaiman Mitchell Tartt Franzen Roy Desai Coetzee Munro
""".split()
HOBBIES = """
knitting pottery birdwatching gardening woodworking calligraphy origami beekeeping fishing sailing
kayaking climbing orienteering geocaching astronomy chess bridge crosswords jigsaws baking brewing
foraging embroidery quilting weaving glassblowing blacksmithing archery fencing juggling magic
ballroom-dancing salsa tango karaoke improv podcasting vlogging birding stamp-collecting
coin-collecting model-railways drone-flying kite-flying skateboarding surfing snowboarding
paragliding scuba-diving yoga pilates
""".split()
STREETS_A = "Oak Elm Maple Willow Cedar Birch Ash Hazel Rowan Linden".split()
STREETS_B = "Street Road Lane Avenue Close".split()
DRINKS_A = "oat-milk soy-milk almond-milk whole-milk skimmed-milk".split()
DRINKS_B = (
    "flat-whites lattes cappuccinos mochas cortados macchiatos americanos chai-lattes matcha-lattes espressos".split()
)
TEAMS = """
Arsenal Chelsea Liverpool Everton Fulham Brentford Celtic Rangers Hibernian Aberdeen Benfica Sporting
Ajax Feyenoord Napoli Roma Lazio Torino Sevilla Valencia Villarreal Getafe Bayern Dortmund Freiburg
Mainz Lyon Marseille Monaco Lille Nantes Rennes Porto Braga Galatasaray Besiktas Anderlecht Brugge
Basel Young-Boys Copenhagen Brondby Malmo Rosenborg Molde Legia Sparta Slavia Dinamo Partizan
""".split()
PARTNERS = """
Alex Sam Jordan Robin Casey Morgan Jamie Taylor Riley Avery Quinn Rowan Sasha Charlie Drew Emery Finley
Harper Jesse Kai Lee Marley Noel Oakley Parker Reese Sage Skyler Tatum Blair Devon Ellis Frankie Gray
Hayden Indigo Jules Kendall Lane Mackenzie Nova Ocean Peyton Remy Sidney Teagan Val Wren Yael Zion
""".split()


def _combos(first: list[str], second: list[str], template: str) -> list[str]:
    return [template.format(a=a, b=b) for a in first for b in second]


@dataclass(frozen=True)
class Relation:
    slug: str
    label: str  # "home city": the informative description is "<Name>'s home city"
    fact: str  # "{name} lives in {value}."
    question: str  # targeted: "Which city does {name} live in?"
    reverse: str  # "Who lives in {value}?"
    values: list[str]


def _words(value: str) -> str:
    return value.replace("-", " ")


RELATIONS = [
    Relation(
        "home-city",
        "home city",
        "{name} lives in {value}.",
        "Which city does {name} live in?",
        "Who lives in {value}?",
        CITIES,
    ),
    Relation(
        "employer",
        "employer",
        "{name} works at {value}.",
        "Which company does {name} work for?",
        "Who is employed by {value}?",
        _combos(COMPANY_A, COMPANY_B, "{a} {b}"),
    ),
    Relation(
        "job",
        "job",
        "{name} works as a {value}.",
        "What does {name} do for a living?",
        "Which of my friends is a {value}?",
        JOBS,
    ),
    Relation(
        "pet",
        "pet",
        "{name} has a {value}.",
        "What pet does {name} have?",
        "Whose pet is a {value}?",
        _combos(SPECIES, PET_NAMES, "{a} called {b}"),
    ),
    Relation(
        "car",
        "car",
        "{name} drives a {value}.",
        "What car does {name} drive?",
        "Who drives a {value}?",
        _combos(COLOURS, MAKES, "{a} {b}"),
    ),
    Relation(
        "birthday",
        "birthday",
        "{name}'s birthday is on {value}.",
        "When was {name} born?",
        "Whose birthday falls on {value}?",
        _combos([str(d) for d in range(1, 29)], MONTHS, "{a} {b}"),
    ),
    Relation(
        "favourite-food",
        "favourite food",
        "{name}'s favourite food is {value}.",
        "What does {name} like to eat most?",
        "Who loves eating {value}?",
        DISHES,
    ),
    Relation(
        "sport",
        "sport",
        "{name} plays {value}.",
        "Which sport does {name} play, and when?",
        "Who plays {value}?",
        _combos(SPORTS_A, SPORTS_B, "{a} on {b}"),
    ),
    Relation(
        "instrument",
        "instrument",
        "{name} plays {value}.",
        "Which musical instrument does {name} play?",
        "Who plays {value}?",
        _combos(STYLES, INSTRUMENTS, "{a} {b}"),
    ),
    Relation(
        "allergy",
        "allergy",
        "{name} is allergic to {value}.",
        "What is {name} allergic to?",
        "Who must avoid {value}?",
        _combos(ALLERGENS, ["", "and dust"], "{a} {b}"),
    ),
    Relation(
        "degree",
        "degree",
        "{name} studied {value}.",
        "What did {name} study at university?",
        "Who studied {value}?",
        _combos(SUBJECTS, UNIVERSITIES, "{a} at {b}"),
    ),
    Relation(
        "language",
        "language",
        "{name} is learning {value}.",
        "Which language is {name} learning?",
        "Who is taking {value} lessons?",
        LANGUAGES,
    ),
    Relation(
        "favourite-author",
        "favourite author",
        "{name}'s favourite writer is {value}.",
        "Whose books does {name} like best?",
        "Who reads everything by {value}?",
        AUTHORS,
    ),
    Relation(
        "hobby",
        "hobby",
        "{name}'s hobby is {value}.",
        "What does {name} do in their spare time?",
        "Who is into {value}?",
        HOBBIES,
    ),
    Relation(
        "address",
        "address",
        "{name}'s address is {value}.",
        "What is {name}'s street address?",
        "Who lives at {value}?",
        _combos([str(n) for n in range(3, 80, 7)], _combos(STREETS_A, STREETS_B, "{a} {b}"), "{a} {b}"),
    ),
    Relation(
        "coffee-order",
        "coffee order",
        "{name} always orders {value}.",
        "How does {name} take their coffee?",
        "Who drinks {value}?",
        _combos(DRINKS_A, DRINKS_B, "{a} {b}"),
    ),
    Relation(
        "football-team",
        "football team",
        "{name} supports {value}.",
        "Which football club does {name} follow?",
        "Who is a {value} fan?",
        TEAMS,
    ),
    Relation(
        "partner",
        "partner",
        "{name} is married to {value}.",
        "Who is {name}'s spouse?",
        "Whose husband or wife is {value}?",
        PARTNERS,
    ),
    Relation(
        "phone",
        "phone number",
        "{name}'s phone number ends in {value}.",
        "What are the last digits of {name}'s phone?",
        "Whose number ends in {value}?",
        [f"{n:04d}" for n in range(1200, 9999, 97)],
    ),
    Relation(
        "commute",
        "commute",
        "{name} gets to work by {value}.",
        "How does {name} travel to the office?",
        "Who commutes by {value}?",
        _combos(
            "bike train bus tram ferry scooter car foot".split(),
            ["", "every day", "most days", "in summer", "when it is dry", "twice a week", "before seven"],
            "{a} {b}",
        ),
    ),
]


@dataclass(frozen=True)
class Fact:
    index: int  # 1-based, the neutral key's number
    name: str
    relation: Relation
    value: str

    @property
    def text(self) -> str:
        return self.relation.fact.format(name=self.name, value=_words(self.value).strip())

    @property
    def informative_key(self) -> str:
        return f"{self.name.lower()}-{self.relation.slug}"

    @property
    def informative_description(self) -> str:
        return f"{self.name}'s {self.relation.label}"

    @property
    def neutral_key(self) -> str:
        return f"fact-{self.index:04d}"


@dataclass(frozen=True)
class Question:
    text: str
    answer: Fact
    kind: str  # targeted | reverse
    half: str  # tune | held-out: the ranking was tuned on one half; the other is reported beside it


def facts() -> list[Fact]:
    """50 names x 20 relations, each value unique within its relation, in a shuffled order."""
    rng = random.Random("recall-facts")
    pairs = []
    for relation in RELATIONS:
        values = [v.strip() for v in relation.values]
        assert len(set(values)) >= len(NAMES), (relation.slug, len(set(values)))
        chosen = rng.sample(sorted(set(values)), len(NAMES))
        pairs += [(name, relation, value) for name, value in zip(NAMES, chosen, strict=True)]
    rng.shuffle(pairs)
    return [Fact(i + 1, name, relation, value) for i, (name, relation, value) in enumerate(pairs)]


def questions(all_facts: list[Fact], per_kind: int = 50) -> list[Question]:
    """`per_kind` targeted and `per_kind` reverse questions about distinct facts; alternate ones
    form the tuning half, the rest the held-out half."""
    rng = random.Random("recall-questions")
    picked = rng.sample(all_facts, 2 * per_kind)
    out = []
    for i, fact in enumerate(picked):
        kind = "targeted" if i < per_kind else "reverse"
        template = fact.relation.question if kind == "targeted" else fact.relation.reverse
        text = template.format(name=fact.name, value=_words(fact.value).strip())
        out.append(Question(text, fact, kind, "tune" if i % 2 == 0 else "held-out"))
    return out


def bank_order(all_facts: list[Fact], asked: list[Question]) -> list[Fact]:
    """The facts, the questions' answers first: the first n of this order make a bank of n notes
    in which the questions about those answers can be asked."""
    answers = list({q.answer.index: q.answer for q in asked}.values())
    first = {fact.index for fact in answers}
    return answers + [fact for fact in all_facts if fact.index not in first]
