#!/usr/bin/env python3
"""Deterministically generates the long-context test document for infinipot.

Writes data/long_document.txt (an invented town chronicle, about 16K SmolLM2 tokens),
data/question.txt and data/answer.txt. The answer is stated exactly once, in one
"needle" sentence placed in the middle of the document; no other sentence mentions
the needle's subject (a clock), so a model that answers correctly must have read it.

The text is generated from templates with a built-in PRNG (xorshift64*), so the output
is byte-identical on every machine and Python version. Everything here is our own
work; the output is dedicated to the public domain (CC0), like the script.

Usage: scripts/make-document.py [--out DIR] [--years N] [--check]
  --check  regenerate in memory and fail if the files in DIR differ.
"""
import argparse
import os
import sys

TOWN = "Harrowmere"
FIRST_YEAR = 1801
NEEDLE_NAME = "Tobias Wrenfield"
QUESTION = "What was the name of the clockmaker? Answer with the name only."


class Rng:
    """xorshift64* -- small, fast, and fully specified here (no stdlib dependence)."""

    def __init__(self, seed):
        self.s = (seed or 1) & 0xFFFFFFFFFFFFFFFF

    def next(self):
        x = self.s
        x ^= (x >> 12)
        x ^= (x << 25) & 0xFFFFFFFFFFFFFFFF
        x ^= (x >> 27)
        self.s = x
        return (x * 0x2545F4914F6CDD1D) & 0xFFFFFFFFFFFFFFFF

    def below(self, n):
        return (self.next() >> 11) % n

    def between(self, lo, hi):  # inclusive
        return lo + self.below(hi - lo + 1)

    def pick(self, seq):
        return seq[self.below(len(seq))]

    def chance(self, p_percent):
        return self.below(100) < p_percent


MEN = ["Abel", "Albert", "Amos", "Arthur", "Benjamin", "Caleb", "Cyrus", "Daniel", "Edgar",
       "Edmund", "Elias", "Ezra", "Frederick", "George", "Henry", "Hugh", "Isaac", "Jacob",
       "James", "Jonah", "Josiah", "Matthew", "Nathaniel", "Oliver", "Peter", "Philip",
       "Reuben", "Samuel", "Silas", "Thomas", "Walter", "William"]
WOMEN = ["Agnes", "Alice", "Anne", "Beatrice", "Bridget", "Charlotte", "Clara", "Dorothy",
         "Edith", "Eleanor", "Eliza", "Emma", "Florence", "Grace", "Hannah", "Harriet",
         "Isabel", "Jane", "Judith", "Lydia", "Margaret", "Martha", "Miriam", "Patience",
         "Rachel", "Rose", "Ruth", "Sarah", "Susannah"]
FIRST = MEN + WOMEN
LAST = ["Ashdown", "Barrow", "Blackwood", "Brackley", "Carrow", "Colby", "Dunmore", "Elmsworth",
        "Fairleigh", "Fenwick", "Garland", "Greaves", "Hallam", "Hartwell", "Holloway",
        "Kettering", "Langford", "Lowther", "Marsh", "Merriwether", "Norbury", "Oakes",
        "Pendle", "Pritchard", "Radcliffe", "Redmayne", "Selby", "Shawcross", "Stanhope",
        "Thorne", "Tilbury", "Underhill", "Vane", "Waddington", "Whitlock", "Yardley"]
TRADES = ["baker", "blacksmith", "cooper", "weaver", "miller", "chandler", "saddler", "tanner",
          "shipwright", "rope maker", "brewer", "butcher", "cobbler", "carpenter", "potter",
          "glazier", "fishmonger", "wheelwright", "thatcher", "stonemason"]
STREETS = ["Mill Lane", "Harbour Street", "Chapel Row", "Market Square", "Tanners' Walk",
           "Fisher Lane", "Hill Road", "Bridge Street", "Orchard Lane", "Quay Street",
           "Rope Walk", "Salt Lane", "Granary Court", "North Gate", "Willow Row"]
VILLAGES = ["Ebbsfold", "Cranmoor", "Little Dunstead", "Wexley", "Hobb's End", "Saltcombe",
            "Marrowby", "Fennick", "Oldbridge", "Stavely"]
PORTS = ["Bristol", "Lisbon", "Bordeaux", "Bergen", "Cork", "Hamburg", "Antwerp", "Plymouth",
         "Riga", "Cadiz", "Leith", "Danzig"]
CARGO = [("casks", "wine"), ("sacks", "salt"), ("loads", "timber"), ("barrels", "tar"),
         ("bales", "hemp"), ("bales", "wool"), ("tons", "coal"), ("bales", "flax"),
         ("bundles", "iron bars"), ("crates", "oranges"), ("hogsheads", "tobacco"),
         ("tons", "slate")]
SHIPS = ["Good Intent", "Mary Ellen", "Swift Return", "Hopewell", "Three Brothers", "Providence",
         "Sea Lark", "Dove", "Fair Wind", "Endeavour", "Charity", "Morning Star", "Kittiwake",
         "Betsy Jane", "Resolute", "Peregrine"]
CROPS = ["barley", "wheat", "oat", "turnip", "potato", "apple"]
ANIMALS = ["ox", "pig", "ram", "bull", "sow", "goose"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]
BUILDINGS = ["warehouse", "bakehouse", "malt house", "smithy", "granary", "boathouse",
             "cottage row", "inn", "chapel", "school room", "almshouse", "market hall"]
STORMS = ["a great gale", "a storm from the north-east", "a violent hailstorm",
          "a spring tide driven by the wind", "a thunderstorm"]
ORDINAL = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", 6: "sixth",
           7: "seventh", 8: "eighth", 9: "ninth", 10: "tenth"}


def suffix_of(n):
    if 10 <= n % 100 <= 20:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def date(r):
    d = r.between(1, 28)
    return f"the {d}{suffix_of(d)} of {r.pick(MONTHS)}"


def person(r, first=FIRST):
    return f"{r.pick(first)} {r.pick(LAST)}"


def num(n):
    return f"{n:,}"


class Town:
    def __init__(self, r):
        self.r = r
        self.population = 1240
        self.mayor = person(r, MEN)
        self.harvest = {c: r.between(800, 2400) for c in CROPS}
        self.pupils = 31
        self.schoolmaster = person(r, MEN)
        self.boats = 22


def year_entry(t, year):
    r = t.r
    s = []
    # population, every year, drifting
    growth = r.between(-25, 60)
    t.population += growth
    s.append(f"At the reckoning made at Candlemas the parish counted {num(t.population)} "
             f"souls, {num(abs(growth))} {'more' if growth >= 0 else 'fewer'} than the year before.")
    if year % 3 == 0 or r.chance(15):
        votes_for, votes_against = r.between(90, 260), r.between(20, 180)
        if r.chance(55):
            t.mayor = person(r, MEN)
            s.append(f"{t.mayor} was chosen as mayor of {TOWN} by {votes_for} votes "
                     f"against {votes_against}.")
        else:
            s.append(f"The mayor, {t.mayor}, was returned to office for another term, "
                     f"having received {votes_for} votes.")
    crop = r.pick(CROPS)
    old = t.harvest[crop]
    new = max(200, old + r.between(-400, 450))
    t.harvest[crop] = new
    unit = "bushels" if crop in ("barley", "wheat", "oat") else "sacks"
    s.append(f"The {crop} harvest came to {num(new)} {unit}, "
             f"{'up' if new >= old else 'down'} from {num(old)} the year before, "
             f"and the price at market was {r.between(3, 14)} shillings the {unit[:-1]}.")
    for _ in range(r.between(1, 2)):
        unit, cargo = r.pick(CARGO)
        s.append(f"The {r.pick(SHIPS)}, under Captain {person(r, MEN)}, came into the harbour "
                 f"from {r.pick(PORTS)} on {date(r)} with {num(r.between(40, 900))} "
                 f"{unit} of {cargo}.")
    if r.chance(60):
        trade = r.pick(TRADES)
        s.append(f"A new {r.pick(BUILDINGS)} was raised on {r.pick(STREETS)} by the {trade} "
                 f"{person(r, MEN)}, at a cost of {num(r.between(40, 1500))} pounds.")
    if r.chance(45):
        s.append(f"On {date(r)} {r.pick(STORMS)} struck the town, and {r.between(2, 40)} roofs "
                 f"on {r.pick(STREETS)} were damaged.")
    if r.chance(70):
        s.append(f"{person(r, MEN)}, the {r.pick(TRADES)}, married {person(r, WOMEN)} of "
                 f"{r.pick(VILLAGES)} on {date(r)}.")
    if r.chance(50):
        animal = r.pick(ANIMALS)
        s.append(f"At the {r.pick(MONTHS)} fair, {person(r)} of {r.pick(VILLAGES)} won the prize "
                 f"for the heaviest {animal}, which weighed {num(r.between(90, 1900))} pounds.")
    if r.chance(35):
        t.pupils = max(12, t.pupils + r.between(-6, 9))
        if r.chance(30):
            t.schoolmaster = person(r, MEN)
            s.append(f"{t.schoolmaster} became master of the parish school, where he taught "
                     f"{t.pupils} pupils reading, writing and sums.")
        else:
            s.append(f"The school had {t.pupils} pupils, who were taught reading, "
                     f"writing and sums by {t.schoolmaster}.")
    if r.chance(40):
        lost = r.between(0, 3)
        t.boats = max(8, t.boats + r.between(-2, 4) - lost)
        s.append(f"The fishing fleet numbered {t.boats} boats"
                 + (f", and {lost} {'was' if lost == 1 else 'were'} lost at sea with "
                    f"{r.between(2, 11)} men" if lost else ", and none was lost at sea that year")
                 + ".")
    if r.chance(25):
        s.append(f"The {ORDINAL[r.between(1, 10)]} well on {r.pick(STREETS)} ran dry in "
                 f"{r.pick(MONTHS)} and was dug {r.between(4, 20)} feet deeper.")
    if r.chance(30):
        s.append(f"{person(r)}, who kept the {r.pick(['Anchor', 'Plough', 'Swan', 'Crown', 'Wheatsheaf'])} "
                 f"inn, was fined {r.between(2, 30)} shillings for selling short measures of ale.")
    # shuffle all but the first sentence so entries do not all read alike
    body = s[1:]
    for i in range(len(body) - 1, 0, -1):
        j = r.below(i + 1)
        body[i], body[j] = body[j], body[i]
    return [s[0]] + body


NEEDLE = ("In the spring of that year a clockmaker from Wexley installed the great clock in "
          "the tower of Saint Aldric's church, and its bell was first rung on Whit Sunday. "
          "The name of the clockmaker was {name}.")


def generate(years):
    r = Rng(0x5EED_0F_4A77)
    t = Town(r)
    out = [f"THE CHRONICLE OF {TOWN.upper()}",
           "",
           f"Being a record of the town of {TOWN}, its harbour and its parish, kept year by year "
           f"by the clerks of the parish from {FIRST_YEAR} to {FIRST_YEAR + years - 1}.",
           ""]
    needle_year = FIRST_YEAR + years // 2
    for k in range(years):
        year = FIRST_YEAR + k
        sents = year_entry(t, year)
        if year == needle_year:
            sents.insert(len(sents) // 2, NEEDLE.format(name=NEEDLE_NAME))
        out.append(f"The Year {year}")
        out.append("")
        out.append(" ".join(sents))
        out.append("")
    out.append(f"Here ends the chronicle of {TOWN}.")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--out", default=os.path.join(root, "data"))
    ap.add_argument("--years", type=int, default=70)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    files = {"long_document.txt": generate(a.years),
             "question.txt": QUESTION + "\n",
             "answer.txt": NEEDLE_NAME + "\n"}
    doc = files["long_document.txt"]
    assert doc.count(NEEDLE_NAME) == 1, "answer must be stated exactly once"
    assert doc.lower().count("clock") == NEEDLE.lower().count("clock"), "clock outside needle"
    if a.check:
        bad = [n for n, txt in files.items()
               if not os.path.exists(os.path.join(a.out, n))
               or open(os.path.join(a.out, n), encoding="utf-8").read() != txt]
        if bad:
            print("differs: " + ", ".join(bad), file=sys.stderr)
            return 1
        print("data is up to date")
        return 0
    os.makedirs(a.out, exist_ok=True)
    for n, txt in files.items():
        with open(os.path.join(a.out, n), "w", encoding="utf-8", newline="\n") as f:
            f.write(txt)
        print(os.path.join(a.out, n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
