"""Words the database generators draw from: people, places, dates (no commas, colons or semicolons in
any of them, so list and pair answers split cleanly)."""

from __future__ import annotations

import random

FIRST_NAMES = [
    "Ada",
    "Alan",
    "Amira",
    "Ana",
    "Ben",
    "Bo",
    "Carla",
    "Chen",
    "Dana",
    "David",
    "Elena",
    "Emeka",
    "Eva",
    "Farid",
    "Grace",
    "Hana",
    "Ivan",
    "Jack",
    "Jin",
    "Julia",
    "Kofi",
    "Lara",
    "Leo",
    "Lina",
    "Marco",
    "Maya",
    "Nadia",
    "Noah",
    "Omar",
    "Paula",
    "Priya",
    "Rosa",
    "Sam",
    "Sara",
    "Tariq",
    "Tom",
    "Uma",
    "Victor",
    "Wei",
    "Yara",
    "Zoe",
]
LAST_NAMES = [
    "Abe",
    "Baker",
    "Costa",
    "Diaz",
    "Evans",
    "Fischer",
    "Garcia",
    "Haddad",
    "Ito",
    "Jensen",
    "Kim",
    "Lopez",
    "Mensah",
    "Novak",
    "Okafor",
    "Patel",
    "Quinn",
    "Rossi",
    "Silva",
    "Tanaka",
    "Ueda",
    "Varga",
    "Wong",
    "Xu",
    "Yilmaz",
    "Zhang",
    "Moreau",
    "Berg",
    "Cruz",
    "Dubois",
]
CITIES = (
    "Lisbon",
    "Oslo",
    "Nairobi",
    "Lima",
    "Osaka",
    "Denver",
    "Porto",
    "Krakow",
    "Accra",
    "Hanoi",
    "Perth",
    "Quito",
)
COUNTRIES = ("Brazil", "Canada", "Egypt", "France", "India", "Japan", "Kenya", "Mexico", "Norway", "Peru")


def people(rng: random.Random, count: int) -> list[str]:
    """``count`` distinct full names."""
    names = [f"{first} {last}" for first in FIRST_NAMES for last in LAST_NAMES]
    return rng.sample(names, count)


def date(rng: random.Random, first_year: int, last_year: int) -> str:
    """A date ``YYYY-MM-DD`` in the given years."""
    return f"{rng.randint(first_year, last_year):04d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"


def distinct_phrases(rng: random.Random, count: int, *parts: tuple[str, ...]) -> list[str]:
    """``count`` distinct phrases, each one word from every part in order."""
    chosen: set[str] = set()
    while len(chosen) < count:
        chosen.add(" ".join(rng.choice(words) for words in parts))
    phrases = sorted(chosen)  # a set's order varies between processes; sorted, then shuffled, does not
    rng.shuffle(phrases)
    return phrases
