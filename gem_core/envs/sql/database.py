"""SQLite databases for the SQL envs: built from a schema and rows, queried read-only under budgets.

``build_database(ddl, rows)`` returns the database as bytes (``Connection.serialize``); every query
opens its own in-memory connection from those bytes (``run_query``), so envs share nothing, keep no
connection in their state (snapshots and pickles stay plain data) and can step in any thread.

A query's connection refuses everything but reading:

* ``PRAGMA query_only`` and an authorizer that allows only ``SELECT``, reading tables, recursive
  CTEs and functions outside ``DENIED_FUNCTIONS`` (``load_extension``; ``random``/``randomblob``,
  which would make episodes irreproducible; ``printf``, whose work one instruction can make huge): writes, ``ATTACH``, ``PRAGMA``, DDL and transactions are
  refused before they run; extension loading is off (the ``sqlite3`` default) and denied again;
* budgets: a progress handler stops the query after ``max_steps`` virtual-machine instructions (a
  deterministic count) or ``timeout`` seconds of wall time (a backstop under load); more than
  ``max_rows`` result rows stop it too; ``SQLITE_LIMIT_LENGTH`` caps any string, blob or row at
  ``MAX_VALUE_BYTES``, so no single instruction can build a huge value; the SQL text is capped at
  ``MAX_SQL_CHARS``.

A query is a recursive CTE bomb or a huge cross join, and it costs a few milliseconds: it is cut
off and reported (``QueryResult.over_budget``), never a hang.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_SQL_CHARS = 5_000
MAX_VALUE_BYTES = 2_048
PROGRESS_EVERY = 1_000  # instructions between two calls of the progress handler
DEFAULT_MAX_STEPS = 1_000_000
DEFAULT_MAX_ROWS = 1_000
DEFAULT_TIMEOUT = 2.0
MAX_TABLE_CHARS = 6_000  # a result table in an observation, at most
# printf/format: a huge width or precision costs seconds inside one instruction, out of the progress
# handler's reach.
DENIED_FUNCTIONS = frozenset({"load_extension", "random", "randomblob", "printf", "format"})
_ALLOWED_ACTIONS = frozenset({sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE})
_LIMITS = (
    (sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES),
    (sqlite3.SQLITE_LIMIT_SQL_LENGTH, MAX_SQL_CHARS * 4),
    (sqlite3.SQLITE_LIMIT_ATTACHED, 0),
    (sqlite3.SQLITE_LIMIT_COLUMN, 100),
    (sqlite3.SQLITE_LIMIT_EXPR_DEPTH, 100),
    (sqlite3.SQLITE_LIMIT_COMPOUND_SELECT, 50),
    (sqlite3.SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 1_000),
    (sqlite3.SQLITE_LIMIT_FUNCTION_ARG, 16),
)


@dataclass
class QueryResult:
    """What a query gave: its columns and rows, or why it gave none.

    ``error`` is set for any failure; ``refused`` when the connection refused the statement (a write,
    ``ATTACH``, ``PRAGMA``, a denied function) and ``over_budget`` when a budget stopped it.
    """

    columns: list[str] = field(default_factory=list)
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    error: str | None = None
    refused: bool = False
    over_budget: bool = False

    @property
    def penalised(self) -> bool:
        return self.refused or self.over_budget


def build_database(ddl: str, rows: dict[str, Sequence[tuple[Any, ...]]]) -> bytes:
    """A database with the tables of ``ddl`` filled with ``rows`` (table -> rows), as bytes."""
    connection = sqlite3.connect(":memory:")
    try:
        connection.executescript(ddl)
        for table, table_rows in rows.items():
            if table_rows:
                marks = ", ".join("?" * len(table_rows[0]))
                connection.executemany(f"INSERT INTO {table} VALUES ({marks})", table_rows)
        connection.commit()
        return connection.serialize()
    finally:
        connection.close()


def _authorize(
    action: int, arg1: str | None, arg2: str | None, database: str | None, trigger: str | None
) -> int:
    if action in _ALLOWED_ACTIONS:
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() not in DENIED_FUNCTIONS:
        return sqlite3.SQLITE_OK
    return sqlite3.SQLITE_DENY


def _read_only_connection(database: bytes) -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    connection.deserialize(database)
    connection.execute("PRAGMA query_only = ON")
    for limit, value in _LIMITS:
        connection.setlimit(limit, value)
    connection.set_authorizer(_authorize)
    return connection


def run_query(
    database: bytes,
    sql: str,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_rows: int = DEFAULT_MAX_ROWS,
    timeout: float = DEFAULT_TIMEOUT,
) -> QueryResult:
    """Run one read-only statement against ``database`` (bytes from ``build_database``) under the
    budgets; never raises for any ``sql`` string."""
    if len(sql) > MAX_SQL_CHARS:
        return QueryResult(error=f"the query is {len(sql)} characters long; the limit is {MAX_SQL_CHARS}")
    connection = _read_only_connection(database)
    calls, deadline = 0, time.monotonic() + timeout
    budget_calls = max(1, max_steps // PROGRESS_EVERY)
    stopped: list[str] = []

    def progress() -> int:
        nonlocal calls
        calls += 1
        if calls > budget_calls:
            stopped.append(f"it ran past the budget of {max_steps:,} steps")
        elif time.monotonic() > deadline:
            stopped.append(f"it ran past the time limit of {timeout:g} s")
        return 1 if stopped else 0

    connection.set_progress_handler(progress, PROGRESS_EVERY)
    try:
        cursor = connection.execute(sql)
        columns = [d[0] for d in cursor.description or ()]
        rows: list[tuple[Any, ...]] = []
        while batch := cursor.fetchmany(256):
            rows.extend(batch)
            if len(rows) > max_rows:
                return QueryResult(
                    columns, error=f"it returned more than {max_rows:,} rows", over_budget=True
                )
        return QueryResult(columns, rows)
    except sqlite3.Error as exc:
        message = str(exc) or type(exc).__name__
        if stopped:
            return QueryResult(error=stopped[0], over_budget=True)
        if "too big" in message:
            return QueryResult(
                error=f"{message} (values are limited to {MAX_VALUE_BYTES} bytes)", over_budget=True
            )
        refused = any(word in message for word in ("not authorized", "authorization denied", "readonly"))
        return QueryResult(error=message, refused=refused)
    except (ValueError, UnicodeError, OverflowError, MemoryError) as exc:  # NUL bytes, lone surrogates
        return QueryResult(error=f"{type(exc).__name__}: {exc}")
    finally:
        connection.close()


def format_value(value: Any, limit: int = 60) -> str:
    """One cell as text: NULL, numbers as SQLite prints them, blobs in hex, long text clipped."""
    if value is None:
        text = "NULL"
    elif isinstance(value, bytes):
        text = "x'" + value[: limit // 2].hex() + ("...'" if len(value) > limit // 2 else "'")
    elif isinstance(value, float):
        text = repr(round(value, 6))
    else:
        text = str(value)
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def format_table(columns: Sequence[str], rows: Sequence[tuple[Any, ...]], max_rows: int) -> str:
    """A result as a Markdown table of at most ``max_rows`` rows and ``MAX_TABLE_CHARS`` characters,
    saying how many rows there are and how many were cut."""
    if not columns:
        return "The statement returned no columns."
    shown = rows[:max_rows]
    lines = [
        "| " + " | ".join(format_value(c, 40) for c in columns) + " |",
        "|" + "---|" * len(columns),
        *("| " + " | ".join(format_value(v) for v in row) + " |" for row in shown),
    ]
    kept, size = [], 0
    for line in lines:
        size += len(line) + 1
        if size > MAX_TABLE_CHARS:
            break
        kept.append(line)
    shown_rows = max(0, len(kept) - 2)
    if shown_rows < len(rows):
        kept.append(f"(showing the first {shown_rows} of {len(rows)} rows; the rest is cut)")
    else:
        kept.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(kept)


def schema_text(database: bytes) -> str:
    """The ``CREATE TABLE`` statements of ``database``, one per table."""
    connection = sqlite3.connect(":memory:")
    try:
        connection.deserialize(database)
        found = connection.execute("SELECT sql FROM sqlite_master WHERE type = 'table' ORDER BY rowid")
        return ";\n".join(sql for (sql,) in found) + ";"
    finally:
        connection.close()


def query_all(database: bytes, sql: str) -> list[tuple[Any, ...]]:
    """The rows of a trusted query (a gold query, a parameter's candidates); raises on error."""
    connection = sqlite3.connect(":memory:")
    try:
        connection.deserialize(database)
        return connection.execute(sql).fetchall()
    finally:
        connection.close()
