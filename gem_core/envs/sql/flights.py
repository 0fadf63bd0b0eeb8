"""The flights schema: airports, airlines, flights, passengers and bookings."""

from __future__ import annotations

import random
from typing import Any

from gem_core.envs.sql.questions import Schema, Template
from gem_core.envs.sql.vocabulary import COUNTRIES, people

DDL = """
CREATE TABLE airports (code TEXT PRIMARY KEY, city TEXT NOT NULL, country TEXT NOT NULL);
CREATE TABLE airlines (code TEXT PRIMARY KEY, name TEXT NOT NULL, country TEXT NOT NULL);
CREATE TABLE flights (id INTEGER PRIMARY KEY, flight_number TEXT NOT NULL UNIQUE, airline_code TEXT NOT NULL REFERENCES airlines(code), origin TEXT NOT NULL REFERENCES airports(code), destination TEXT NOT NULL REFERENCES airports(code), departure_date TEXT NOT NULL, duration_minutes INTEGER NOT NULL, price REAL NOT NULL);
CREATE TABLE passengers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, nationality TEXT NOT NULL);
CREATE TABLE bookings (id INTEGER PRIMARY KEY, flight_id INTEGER NOT NULL REFERENCES flights(id), passenger_id INTEGER NOT NULL REFERENCES passengers(id), seat_class TEXT NOT NULL);
"""

AIRPORTS = (
    ("AMS", "Amsterdam", "Netherlands"),
    ("ATH", "Athens", "Greece"),
    ("BCN", "Barcelona", "Spain"),
    ("CAI", "Cairo", "Egypt"),
    ("DEL", "Delhi", "India"),
    ("GRU", "Sao Paulo", "Brazil"),
    ("HND", "Tokyo", "Japan"),
    ("LIM", "Lima", "Peru"),
    ("MAD", "Madrid", "Spain"),
    ("MEX", "Mexico City", "Mexico"),
    ("NBO", "Nairobi", "Kenya"),
    ("OSL", "Oslo", "Norway"),
    ("YUL", "Montreal", "Canada"),
    ("YVR", "Vancouver", "Canada"),
)
AIRLINES = (
    ("AQ", "Aquila Air", "Spain"),
    ("BZ", "Breeze Lines", "Canada"),
    ("CN", "Condor Wings", "Peru"),
    ("FJ", "Fjord Air", "Norway"),
    ("KS", "Kestrel Airways", "Kenya"),
    ("LT", "Lotus Air", "India"),
    ("NV", "Nova Jet", "Brazil"),
    ("SK", "Sakura Sky", "Japan"),
)
SEAT_CLASSES = ("economy", "economy", "economy", "business", "first")


def generate(rng: random.Random) -> dict[str, list[tuple[Any, ...]]]:
    airports = sorted(rng.sample(AIRPORTS, rng.randint(9, 12)))
    airlines = sorted(rng.sample(AIRLINES, rng.randint(4, 6)))
    flights, numbers = [], set()
    for i in range(rng.randint(40, 60)):
        airline = rng.choice(airlines)[0]
        origin, destination = (a[0] for a in rng.sample(airports, 2))
        number = f"{airline}{rng.randint(100, 999)}"
        while number in numbers:
            number = f"{airline}{rng.randint(100, 999)}"
        numbers.add(number)
        day = f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        flights.append(
            (
                i + 1,
                number,
                airline,
                origin,
                destination,
                day,
                rng.randint(45, 900),
                round(rng.uniform(40, 1500), 2),
            )
        )
    passengers = [
        (i + 1, name, rng.choice(COUNTRIES)) for i, name in enumerate(people(rng, rng.randint(40, 60)))
    ]
    bookings = [
        (i + 1, rng.randint(1, len(flights)), rng.randint(1, len(passengers)), rng.choice(SEAT_CLASSES))
        for i in range(rng.randint(120, 180))
    ]
    return {
        "airports": airports,
        "airlines": airlines,
        "flights": flights,
        "passengers": passengers,
        "bookings": bookings,
    }


ORIGIN = "SELECT DISTINCT origin FROM flights ORDER BY 1"
CITY = "SELECT DISTINCT a.city FROM airports a JOIN flights f ON f.origin = a.code ORDER BY 1"
AIRLINE = "SELECT name FROM airlines ORDER BY 1"
SEAT_CLASS = "SELECT DISTINCT seat_class FROM bookings ORDER BY 1"

TEMPLATES = (
    # ---- easy: one table
    Template(
        "easy",
        "How many flights depart from the airport {origin}?",
        "SELECT COUNT(*) FROM flights WHERE origin = {origin}",
        {"origin": ORIGIN},
    ),
    Template(
        "easy",
        "Which flights (flight numbers) depart on {day}?",
        "SELECT flight_number FROM flights WHERE departure_date = {day}",
        {"day": "SELECT DISTINCT departure_date FROM flights ORDER BY 1"},
        answer="list",
    ),
    Template(
        "easy",
        "What is the lowest price of a flight departing from {origin}?",
        "SELECT MIN(price) FROM flights WHERE origin = {origin}",
        {"origin": ORIGIN},
    ),
    Template(
        "easy",
        "What are the flight numbers of the {n} longest flights, the longest first (ties broken by flight number, A to Z)?",
        "SELECT flight_number FROM flights ORDER BY duration_minutes DESC, flight_number LIMIT {n}",
        {"n": "SELECT column1 FROM (VALUES (2), (3), (4), (5))"},
        answer="list",
        ordered=True,
    ),
    Template(
        "easy",
        "How many passengers have the nationality '{nationality}'?",
        "SELECT COUNT(*) FROM passengers WHERE nationality = {nationality}",
        {"nationality": "SELECT DISTINCT nationality FROM passengers ORDER BY 1"},
    ),
    # ---- medium: joins
    Template(
        "medium",
        "To which cities can you fly directly from {city}?",
        "SELECT DISTINCT d.city FROM flights f JOIN airports o ON o.code = f.origin JOIN airports d ON d.code = f.destination WHERE o.city = {city}",
        {"city": CITY},
        answer="list",
    ),
    Template(
        "medium",
        "How many bookings were made on flights operated by {airline}?",
        "SELECT COUNT(*) FROM bookings b JOIN flights f ON f.id = b.flight_id JOIN airlines a ON a.code = f.airline_code WHERE a.name = {airline}",
        {"airline": AIRLINE},
    ),
    Template(
        "medium",
        "Which passengers are booked on flight {flight}?",
        "SELECT p.name FROM passengers p JOIN bookings b ON b.passenger_id = p.id JOIN flights f ON f.id = b.flight_id WHERE f.flight_number = {flight}",
        {"flight": "SELECT flight_number FROM flights ORDER BY 1"},
        answer="list",
    ),
    Template(
        "medium",
        "Which airlines (names) operate flights departing from {city}?",
        "SELECT DISTINCT a.name FROM airlines a JOIN flights f ON f.airline_code = a.code JOIN airports o ON o.code = f.origin WHERE o.city = {city}",
        {"city": CITY},
        answer="list",
    ),
    Template(
        "medium",
        "How many bookings in {seat_class} class does {passenger} have?",
        "SELECT COUNT(*) FROM bookings b JOIN passengers p ON p.id = b.passenger_id WHERE p.name = {passenger} AND b.seat_class = {seat_class}",
        {"passenger": "SELECT name FROM passengers ORDER BY 1", "seat_class": SEAT_CLASS},
    ),
    # ---- hard: aggregates with grouping
    Template(
        "hard",
        "For each airline (name), how many flights depart from {city}? List only the airlines that have at least one.",
        "SELECT a.name, COUNT(*) FROM flights f JOIN airlines a ON a.code = f.airline_code JOIN airports o ON o.code = f.origin "
        "WHERE o.city = {city} GROUP BY a.code",
        {"city": CITY},
        answer="pairs",
    ),
    Template(
        "hard",
        "Which airline (name) has the highest average price among its flights departing in month {month} of 2024?",
        "SELECT a.name FROM airlines a JOIN flights f ON f.airline_code = a.code WHERE substr(f.departure_date, 6, 2) = {month} "
        "GROUP BY a.code HAVING AVG(f.price) = (SELECT MAX(p) FROM (SELECT AVG(price) AS p FROM flights "
        "WHERE substr(departure_date, 6, 2) = {month} GROUP BY airline_code))",
        {"month": "SELECT DISTINCT substr(departure_date, 6, 2) FROM flights ORDER BY 1"},
    ),
    Template(
        "hard",
        "What is the average duration in minutes of the flights arriving in {country}, rounded to 2 decimal places?",
        "SELECT ROUND(AVG(f.duration_minutes), 2) FROM flights f JOIN airports d ON d.code = f.destination WHERE d.country = {country}",
        {"country": "SELECT DISTINCT country FROM airports ORDER BY 1"},
    ),
    Template(
        "hard",
        "Which passengers have more than {n} bookings?",
        "SELECT p.name FROM passengers p JOIN bookings b ON b.passenger_id = p.id GROUP BY p.id HAVING COUNT(*) > {n}",
        {"n": "SELECT column1 FROM (VALUES (3), (4), (5), (6))"},
        answer="list",
    ),
    Template(
        "hard",
        "Which destination city received the most bookings in {seat_class} class?",
        "SELECT d.city FROM bookings b JOIN flights f ON f.id = b.flight_id JOIN airports d ON d.code = f.destination "
        "WHERE b.seat_class = {seat_class} GROUP BY d.city HAVING COUNT(*) = (SELECT MAX(n) FROM (SELECT COUNT(*) AS n "
        "FROM bookings b2 JOIN flights f2 ON f2.id = b2.flight_id JOIN airports d2 ON d2.code = f2.destination "
        "WHERE b2.seat_class = {seat_class} GROUP BY d2.city))",
        {"seat_class": SEAT_CLASS},
    ),
)

SCHEMA = Schema("flights", DDL, generate, TEMPLATES)
