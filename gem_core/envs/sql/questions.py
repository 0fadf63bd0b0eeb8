"""Schemas, question templates, the questions they generate, and how an answer is graded.

A ``Schema`` is a ``CREATE TABLE`` script, a generator of rows from a ``random.Random`` (one database
per seed) and its ``Template``s. A template is a question with ``{placeholders}``, the gold SQL with
the same placeholders, and for each placeholder a query that lists its candidate values in the
database at hand; ``make_question`` draws the values, fills both, runs the gold query and keeps the
question only when its answer is well posed (no NULL, 1 row for a single value, 1 to
``MAX_ANSWER_ROWS`` rows for a list), redrawing otherwise.

Answers come in three shapes, which the question states:

* ``value``: one value, ``\\boxed{42}``;
* ``list``: values separated by commas (or semicolons or new lines), ``\\boxed{Ann Lee, Bo Chen}``,
  compared as a multiset unless the question asks for an order;
* ``pairs``: ``name: number`` pairs separated by semicolons, ``\\boxed{alpha: 3; beta: 5}``.

A value matches when both read as numbers that agree (within 0.005 for a gold value with decimals,
which questions ask to round to 2 places; exactly otherwise; ``$``, thousands commas and a trailing
``%`` are ignored), or when the texts agree ignoring case, surrounding quotes and repeated spaces.
Every step is a split or a regular expression without backtracking: linear in the answer's length,
which is capped at ``MAX_ANSWER_CHARS``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gem_core.envs.sql.database import build_database, query_all

LEVELS = ("easy", "medium", "hard")
LEVEL_MEANING = {
    "easy": "one table: filters, counts, ordering",
    "medium": "joins of two to four tables",
    "hard": "aggregates with grouping: GROUP BY, HAVING, nested aggregates",
}
ANSWER_SHAPES = ("value", "list", "pairs")
MAX_ANSWER_ROWS = 10
MAX_ANSWER_CHARS = 2_000
MAX_DRAWS = 40  # parameter draws per question before the template is given up for this database

HOW_TO_ANSWER = {
    "value": "Answer with a single value, e.g. \\boxed{42}.",
    "list": "Answer with all the values, separated by commas, e.g. \\boxed{Ann Lee, Bo Chen}.",
    "pairs": "Answer with `name: number` pairs separated by semicolons, e.g. \\boxed{alpha: 3; beta: 5}.",
}


@dataclass(frozen=True)
class Template:
    level: str
    question: str  # with {name} placeholders
    sql: str  # the gold query, with the same {name} placeholders (filled with SQL literals)
    params: dict[str, str] = field(default_factory=dict)  # name -> query listing candidate values
    answer: str = "value"
    ordered: bool = False

    def __post_init__(self) -> None:
        if self.level not in LEVELS or self.answer not in ANSWER_SHAPES:
            raise ValueError(f"bad template {self.question!r}: level {self.level!r}, answer {self.answer!r}")


@dataclass(frozen=True)
class Schema:
    name: str
    ddl: str
    generate: Callable[[random.Random], dict[str, list[tuple[Any, ...]]]]
    templates: tuple[Template, ...]

    def database(self, seed: int) -> bytes:
        return build_database(self.ddl, self.generate(random.Random(f"sql:{self.name}:{seed}")))


@dataclass(frozen=True)
class Question:
    """One posed question: where it comes from, its text, its gold query and answer."""

    schema: str
    db_seed: int
    level: str
    text: str
    sql: str
    answer: str
    ordered: bool
    gold: tuple[tuple[Any, ...], ...]

    def prompt_line(self) -> str:
        order = " Give them in the order the question asks for." if self.ordered else ""
        return f"{self.text}\n{HOW_TO_ANSWER[self.answer]}{order}"


def sql_literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def _well_posed(template: Template, gold: Sequence[tuple[Any, ...]]) -> bool:
    if any(v is None for row in gold for v in row):
        return False
    if template.answer == "value":
        return len(gold) == 1 and len(gold[0]) == 1
    width = 1 if template.answer == "list" else 2
    return 1 <= len(gold) <= MAX_ANSWER_ROWS and all(len(row) == width for row in gold)


def make_question(
    schema: Schema, template: Template, database: bytes, db_seed: int, rng: random.Random
) -> Question | None:
    """Fill ``template`` with values drawn from ``rng`` until its answer is well posed; None if no draw is."""
    candidates = {name: [row[0] for row in query_all(database, sql)] for name, sql in template.params.items()}
    if any(not values for values in candidates.values()):
        return None
    for _ in range(MAX_DRAWS):
        values = {name: rng.choice(options) for name, options in candidates.items()}
        sql = template.sql.format(**{k: sql_literal(v) for k, v in values.items()})
        gold = tuple(query_all(database, sql))
        if _well_posed(template, gold):
            text = template.question.format(**values)
            return Question(
                schema.name, db_seed, template.level, text, sql, template.answer, template.ordered, gold
            )
        if not candidates:
            return None
    return None


# ---- grading ----------------------------------------------------------------------------------
_NUMBER = re.compile(r"[-+]?\$?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?%?")
_QUOTES = "\"'`*"


def _clean(text: str) -> str:
    text = " ".join(text.split()).strip(_QUOTES + " ")
    return text[:-1] if text.endswith(".") and not _NUMBER.fullmatch(text) else text


def _number(text: str) -> float | None:
    if not _NUMBER.fullmatch(text):
        return None
    return float(text.replace("$", "").replace(",", "").rstrip("%"))


def _gold_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return _number(str(value)) if isinstance(value, str) else None


def value_matches(text: str, gold: Any) -> bool:
    text = _clean(text)
    expected = _gold_number(gold)
    if expected is not None:
        got = _number(text)
        if got is None:
            return False
        has_decimals = isinstance(gold, float) and not float(gold).is_integer()
        return abs(got - expected) <= (0.005 + 1e-9 if has_decimals else 1e-9)
    return bool(text) and text.casefold() == " ".join(str(gold).split()).casefold()


_AND = re.compile(r"(?:^|\s)and(?:\s|$)", re.IGNORECASE)


def split_items(text: str, words: bool = False) -> list[str]:
    """A list answer's items: split on semicolons or new lines when there are any, else on commas;
    with ``words``, on the word "and" too ("A, B and C"; no generated value holds it)."""
    separators = ";\n"
    if any(s in text for s in separators):
        items = text.replace("\n", ";").split(";")
    else:
        items = text.split(",")
    if words:
        items = [part for item in items for part in _AND.split(item)]
    return [item for item in (i.strip() for i in items) if item]


def split_pair(text: str) -> tuple[str, str] | None:
    """``name: number`` (or ``=``, ``|``, ``,`` as the separator), split at its last separator."""
    for separator in (":", "=", "|", ","):
        name, found, number = text.rpartition(separator)
        if found:
            return name, number
    return None


def answer_matches(answer: str, question: Question) -> bool:
    """Whether ``answer`` (the content of ``\\boxed{}``) is the question's gold answer."""
    if question.answer == "value":
        return value_matches(answer, question.gold[0][0])
    items = split_items(answer, words=question.answer == "list")
    if len(items) != len(question.gold):
        return False
    if question.answer == "list":
        rows: list[tuple[str, ...]] = [(item,) for item in items]
    else:
        pairs = [split_pair(item) for item in items]
        if any(p is None for p in pairs):
            return False
        rows = pairs  # type: ignore[assignment]
    if question.ordered:
        return all(_row_matches(r, g) for r, g in zip(rows, question.gold))
    unmatched = list(question.gold)
    for row in rows:
        for i, gold in enumerate(unmatched):
            if _row_matches(row, gold):
                del unmatched[i]
                break
        else:
            return False
    return True


def _row_matches(row: Sequence[str], gold: Sequence[Any]) -> bool:
    return len(row) == len(gold) and all(value_matches(r, g) for r, g in zip(row, gold))


def format_answer(question_answer: str, columns_rows: Sequence[Sequence[Any]]) -> str:
    """Rows of a result written as an answer of the given shape (what the scripted solver sends)."""

    def text(value: Any) -> str:
        return repr(round(value, 6)) if isinstance(value, float) else str(value)

    if question_answer == "value":
        return text(columns_rows[0][0])
    if question_answer == "list":
        return ", ".join(text(row[0]) for row in columns_rows)
    return "; ".join(f"{text(row[0])}: {text(row[1])}" for row in columns_rows)
