"""The library schema: authors, books, members and loans."""

from __future__ import annotations

import random
from typing import Any

from gem_core.envs.sql.questions import Schema, Template
from gem_core.envs.sql.vocabulary import CITIES, COUNTRIES, date, distinct_phrases, people

DDL = """
CREATE TABLE authors (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT NOT NULL, birth_year INTEGER NOT NULL);
CREATE TABLE books (id INTEGER PRIMARY KEY, title TEXT NOT NULL, author_id INTEGER NOT NULL REFERENCES authors(id), genre TEXT NOT NULL, published_year INTEGER NOT NULL, pages INTEGER NOT NULL);
CREATE TABLE members (id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT NOT NULL, joined_date TEXT NOT NULL);
CREATE TABLE loans (id INTEGER PRIMARY KEY, book_id INTEGER NOT NULL REFERENCES books(id), member_id INTEGER NOT NULL REFERENCES members(id), loan_date TEXT NOT NULL, return_date TEXT);
"""

GENRES = ("fantasy", "history", "mystery", "poetry", "romance", "science")
TITLE_FIRST = (
    "The Silent",
    "The Last",
    "A Distant",
    "The Hidden",
    "The Broken",
    "A Quiet",
    "The Golden",
    "The Lost",
)
TITLE_SECOND = (
    "River",
    "Garden",
    "Kingdom",
    "Letter",
    "Harbor",
    "Winter",
    "Mirror",
    "Island",
    "Orchard",
    "Lantern",
)


def generate(rng: random.Random) -> dict[str, list[tuple[Any, ...]]]:
    names = people(rng, 60)
    authors = [
        (i + 1, name, rng.choice(COUNTRIES[:7]), rng.randint(1900, 1990)) for i, name in enumerate(names[:14])
    ]
    books = [
        (
            i + 1,
            title,
            rng.randint(1, len(authors)),
            rng.choice(GENRES),
            rng.randint(1950, 2023),
            rng.randint(90, 900),
        )
        for i, title in enumerate(distinct_phrases(rng, rng.randint(40, 60), TITLE_FIRST, TITLE_SECOND))
    ]
    members = [
        (i + 1, name, rng.choice(CITIES[:6]), date(rng, 2015, 2023)) for i, name in enumerate(names[14:])
    ]
    loans = []
    for i in range(rng.randint(100, 160)):
        loan_date = date(rng, 2020, 2024)
        returned = rng.random() < 0.8
        return_date = (
            f"{loan_date[:8]}{min(28, int(loan_date[8:]) + rng.randint(1, 20)):02d}" if returned else None
        )
        loans.append(
            (i + 1, rng.randint(1, len(books)), rng.randint(1, len(members)), loan_date, return_date)
        )
    return {"authors": authors, "books": books, "members": members, "loans": loans}


GENRE = "SELECT DISTINCT genre FROM books ORDER BY 1"
TITLE = "SELECT title FROM books ORDER BY 1"
AUTHOR = "SELECT name FROM authors ORDER BY 1"
MEMBER = "SELECT name FROM members ORDER BY 1"
COUNTRY = "SELECT DISTINCT country FROM authors ORDER BY 1"
BOOK_YEAR = "SELECT DISTINCT published_year FROM books ORDER BY 1"
LOAN_YEAR = "SELECT DISTINCT substr(loan_date, 1, 4) FROM loans ORDER BY 1"

TEMPLATES = (
    # ---- easy: one table
    Template(
        "easy",
        "How many books in the genre '{genre}' were published after {year}?",
        "SELECT COUNT(*) FROM books WHERE genre = {genre} AND published_year > {year}",
        {"genre": GENRE, "year": BOOK_YEAR},
    ),
    Template(
        "easy",
        "How many pages does the book '{title}' have?",
        "SELECT pages FROM books WHERE title = {title}",
        {"title": TITLE},
    ),
    Template(
        "easy",
        "Which books of the genre '{genre}' have more than {pages} pages?",
        "SELECT title FROM books WHERE genre = {genre} AND pages > {pages}",
        {"genre": GENRE, "pages": "SELECT DISTINCT pages FROM books ORDER BY 1"},
        answer="list",
    ),
    Template(
        "easy",
        "Which authors come from {country}?",
        "SELECT name FROM authors WHERE country = {country}",
        {"country": COUNTRY},
        answer="list",
    ),
    Template(
        "easy",
        "What are the titles of the {n} oldest books, the oldest first (ties broken by title, A to Z)?",
        "SELECT title FROM books ORDER BY published_year, title LIMIT {n}",
        {"n": "SELECT column1 FROM (VALUES (2), (3), (4), (5))"},
        answer="list",
        ordered=True,
    ),
    Template(
        "easy",
        "How many of the loans made in {year} have not been returned?",
        "SELECT COUNT(*) FROM loans WHERE substr(loan_date, 1, 4) = {year} AND return_date IS NULL",
        {"year": LOAN_YEAR},
    ),
    # ---- medium: joins
    Template(
        "medium",
        "Which books were written by {author}?",
        "SELECT b.title FROM books b JOIN authors a ON a.id = b.author_id WHERE a.name = {author}",
        {"author": AUTHOR},
        answer="list",
    ),
    Template(
        "medium",
        "How many times has the book '{title}' been borrowed?",
        "SELECT COUNT(*) FROM loans l JOIN books b ON b.id = l.book_id WHERE b.title = {title}",
        {"title": TITLE},
    ),
    Template(
        "medium",
        "Which members have borrowed a book written by {author}?",
        "SELECT DISTINCT m.name FROM members m JOIN loans l ON l.member_id = m.id JOIN books b ON b.id = l.book_id "
        "JOIN authors a ON a.id = b.author_id WHERE a.name = {author}",
        {"author": AUTHOR},
        answer="list",
    ),
    Template(
        "medium",
        "Which books has {member} borrowed?",
        "SELECT DISTINCT b.title FROM books b JOIN loans l ON l.book_id = b.id JOIN members m ON m.id = l.member_id WHERE m.name = {member}",
        {"member": MEMBER},
        answer="list",
    ),
    Template(
        "medium",
        "Who wrote the book '{title}'?",
        "SELECT a.name FROM authors a JOIN books b ON b.author_id = a.id WHERE b.title = {title}",
        {"title": TITLE},
    ),
    # ---- hard: aggregates with grouping
    Template(
        "hard",
        "For each genre, how many books were published before {year}? List only the genres that have at least one.",
        "SELECT genre, COUNT(*) FROM books WHERE published_year < {year} GROUP BY genre",
        {"year": BOOK_YEAR},
        answer="pairs",
    ),
    Template(
        "hard",
        "Which author has written the most books in the genre '{genre}'?",
        "SELECT a.name FROM authors a JOIN books b ON b.author_id = a.id WHERE b.genre = {genre} GROUP BY a.id "
        "HAVING COUNT(*) = (SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM books WHERE genre = {genre} GROUP BY author_id))",
        {"genre": GENRE},
    ),
    Template(
        "hard",
        "What is the average number of pages of the books by authors from {country}, rounded to 2 decimal places?",
        "SELECT ROUND(AVG(b.pages), 2) FROM books b JOIN authors a ON a.id = b.author_id WHERE a.country = {country}",
        {"country": COUNTRY},
    ),
    Template(
        "hard",
        "Which members from {city} have borrowed books more than {n} times?",
        "SELECT m.name FROM members m JOIN loans l ON l.member_id = m.id WHERE m.city = {city} GROUP BY m.id HAVING COUNT(*) > {n}",
        {
            "city": "SELECT DISTINCT city FROM members ORDER BY 1",
            "n": "SELECT column1 FROM (VALUES (1), (2), (3))",
        },
        answer="list",
    ),
    Template(
        "hard",
        "Which genre was borrowed most often in {year}?",
        "SELECT b.genre FROM loans l JOIN books b ON b.id = l.book_id WHERE substr(l.loan_date, 1, 4) = {year} "
        "GROUP BY b.genre HAVING COUNT(*) = (SELECT MAX(n) FROM (SELECT COUNT(*) AS n FROM loans l2 "
        "JOIN books b2 ON b2.id = l2.book_id WHERE substr(l2.loan_date, 1, 4) = {year} GROUP BY b2.genre))",
        {"year": LOAN_YEAR},
    ),
)

SCHEMA = Schema("library", DDL, generate, TEMPLATES)
