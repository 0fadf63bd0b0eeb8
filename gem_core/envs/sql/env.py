"""SqlEnv: answer a question about a SQLite database, querying it read-only as many turns as needed.

| event                                                              | reward |
|--------------------------------------------------------------------|--------|
| ``\\boxed{answer}`` that matches the gold query's result (ends)    | 1.0    |
| ``\\boxed{answer}`` that does not (ends)                           | 0.0    |
| a ```sql query that runs (its result table is shown)               | 0.0    |
| a query that fails (syntax, unknown column...: the error is shown) | 0.0    |
| a query the connection refuses (a write, ATTACH, PRAGMA, extension) or that a budget cuts off (steps, time, rows, value size) | -0.1 |
| neither a query nor an answer                                      | -0.1   |
| the last turn (``max_turns``) used without an answer (truncated)   | 0.0    |

A reply's answer is the last ``\\boxed{}`` outside its SQL block; a reply that has one is graded (any
query in it is not run). The query is the last ```sql (or untagged) fenced block. Results show at
most ``max_rows_shown`` rows and say how many were cut. ``info``: ``success`` on the last step,
``format_error``, ``invalid_move`` (refused or cut off), ``sql_error``.

Each question is a template filled from a database generated from a seed (``questions.py``); the
question space is ``len(templates) * num_databases``, indexed so that ``reset(index=i)`` poses
question ``i`` (as the dataset envs do), and ``reset(seed)`` draws one. A template whose answer
cannot be made well posed on a database (ties for "the most") is skipped for the next index, and
the skipped indices are in ``info["skipped_items"]``.
"""

from __future__ import annotations

import functools
import random
import re
from typing import Any

from gem_core.core import Env, StepResult
from gem_core.envs.sql import flights, library, shop
from gem_core.envs.sql.database import (
    DEFAULT_MAX_ROWS,
    DEFAULT_MAX_STEPS,
    DEFAULT_TIMEOUT,
    format_table,
    run_query,
    schema_text,
)
from gem_core.envs.sql.questions import (
    LEVELS,
    MAX_ANSWER_CHARS,
    Question,
    Schema,
    answer_matches,
    format_answer,
    make_question,
)
from gem_core.parsing import extract_boxed, extract_last_code_block, preview

SCHEMAS: dict[str, Schema] = {s.name: s for s in (shop.SCHEMA, library.SCHEMA, flights.SCHEMA)}
PENALTY = -0.1
MAX_SKIPPED = 50
_TABLE = re.compile(r"CREATE TABLE (\w+)")


@functools.lru_cache(maxsize=64)
def database(schema: str, seed: int) -> bytes:
    """The database of ``schema`` generated from ``seed`` (cached; bytes are immutable and shared)."""
    return SCHEMAS[schema].database(seed)


def find_query(action: str) -> tuple[str | None, str | None]:
    """``(query, answer)`` of a reply: its last ```sql (or untagged) block and the last ``\\boxed{}``
    outside that block."""
    query = extract_last_code_block(action, language="sql")
    rest = action.replace(query, " ", 1) if query else action
    return (query.strip() or None) if query else None, extract_boxed(rest)


class SqlEnv(Env[str]):
    """Question answering over generated SQLite databases (see the module docstring)."""

    _static_attributes = ("templates",)

    def __init__(
        self,
        schemas: tuple[str, ...] | list[str] = tuple(SCHEMAS),
        levels: tuple[str, ...] | list[str] = LEVELS,
        max_turns: int = 6,
        num_databases: int = 1_000,
        max_rows_shown: int = 20,
        max_steps: int = DEFAULT_MAX_STEPS,
        max_rows: int = DEFAULT_MAX_ROWS,
        query_timeout: float = DEFAULT_TIMEOUT,
    ):
        unknown = [s for s in schemas if s not in SCHEMAS] + [lv for lv in levels if lv not in LEVELS]
        if unknown:
            raise ValueError(
                f"unknown schema or level {unknown[0]!r}: schemas {list(SCHEMAS)}, levels {list(LEVELS)}"
            )
        if max_turns < 1 or num_databases < 1 or max_rows_shown < 1:
            raise ValueError("max_turns, num_databases and max_rows_shown must be at least 1")
        # (schema, position of the template in its schema): a question's identity whichever id poses it
        self.templates = [
            (name, i) for name in schemas for i, t in enumerate(SCHEMAS[name].templates) if t.level in levels
        ]
        if not self.templates:
            raise ValueError(f"no template of the levels {list(levels)} in the schemas {list(schemas)}")
        self.max_turns, self.num_databases, self.max_rows_shown = max_turns, num_databases, max_rows_shown
        self.budget = {"max_steps": max_steps, "max_rows": max_rows, "timeout": query_timeout}
        self.question: Question | None = None
        self.turn = 0
        self.last_query: str | None = None
        self.last_rows: list[tuple[Any, ...]] | None = None

    @property
    def num_questions(self) -> int:
        return len(self.templates) * self.num_databases

    def question_at(self, index: int) -> Question | None:
        """Question ``index`` (templates vary fastest, then databases), or None if not well posed."""
        name, position = self.templates[index % len(self.templates)]
        db_seed = index // len(self.templates)
        schema = SCHEMAS[name]
        rng = random.Random(f"sql-question:{name}:{db_seed}:{position}")
        return make_question(schema, schema.templates[position], database(name, db_seed), db_seed, rng)

    # ---- the Env API ---------------------------------------------------------------------------
    def reset(
        self, seed: int | None = None, index: int | None = None, **kwargs: Any
    ) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        if index is None:
            index = self.rng.randrange(self.num_questions)
        elif not 0 <= index < self.num_questions:
            raise IndexError(f"index {index} is outside 0..{self.num_questions - 1}")
        skipped = []
        while (question := self.question_at(index)) is None:
            skipped.append(index)
            if len(skipped) >= MAX_SKIPPED:
                raise RuntimeError(
                    f"{len(skipped)} questions in a row are not well posed from index {skipped[0]}"
                )
            index = (index + 1) % self.num_questions
        self.question, self.turn, self.last_query, self.last_rows = question, 0, None, None
        info: dict[str, Any] = {"index": index, "schema": question.schema, "level": question.level}
        if skipped:
            info["skipped_items"] = skipped
        return self._prompt(), info

    def step(self, action: str) -> StepResult:
        assert self.question is not None
        self.turn += 1
        query, answer = find_query(action)
        if answer:
            correct = len(answer) <= MAX_ANSWER_CHARS and answer_matches(answer, self.question)
            feedback = "Correct." if correct else f"Incorrect: {preview(answer)} is not the answer."
            return feedback, 1.0 if correct else 0.0, True, False, {"success": correct}
        if query is None:
            feedback = (
                "No query and no answer found: write one SQL query in a ```sql code block, or give your "
                f"answer inside \\boxed{{}}. Your reply was: {preview(action) or '(empty)'}"
            )
            return self._go_on(feedback, PENALTY, {"format_error": True})
        result = run_query(database(self.question.schema, self.question.db_seed), query, **self.budget)
        self.last_query = query
        self.last_rows = None
        if result.refused:
            feedback = (
                f"Refused: {result.error}. The database is read-only: only one SELECT statement a "
                "query (no writes, ATTACH, PRAGMA or extensions)."
            )
            return self._go_on(feedback, PENALTY, {"invalid_move": True, "sql_error": True})
        if result.over_budget:
            return self._go_on(
                f"The query was stopped: {result.error}.", PENALTY, {"invalid_move": True, "sql_error": True}
            )
        if result.error is not None:
            return self._go_on(f"SQL error: {preview(result.error, 300)}", 0.0, {"sql_error": True})
        if len(result.rows) <= self.max_rows_shown:
            self.last_rows = result.rows
        return self._go_on(format_table(result.columns, result.rows, self.max_rows_shown), 0.0, {})

    def sample_random_action(self) -> str:
        assert self.question is not None
        if self.action_rng.random() < 0.5:
            return f"\\boxed{{{self.action_rng.randint(0, 20)}}}"
        table = self.action_rng.choice(_TABLE.findall(SCHEMAS[self.question.schema].ddl))
        query = self.action_rng.choice(("SELECT * FROM {} LIMIT 5", "SELECT COUNT(*) FROM {}")).format(table)
        return f"```sql\n{query}\n```"

    def solve_action(self) -> str:
        """Run the question's query (its template's translation), then answer from the table shown."""
        assert self.question is not None
        if self.last_query != self.question.sql or self.last_rows is None:
            return f"```sql\n{self.question.sql}\n```"
        return f"\\boxed{{{format_answer(self.question.answer, self.last_rows)}}}"

    # ---- helpers -------------------------------------------------------------------------------
    def _go_on(self, feedback: str, reward: float, info: dict[str, Any]) -> StepResult:
        truncated = self.turn >= self.max_turns
        if truncated:
            info["success"] = False
            feedback += "\nNo turns left: the episode is over."
        else:
            left = self.max_turns - self.turn
            feedback += f"\nYou have {left} turn{'s' if left != 1 else ''} left."
        return feedback, float(reward), False, truncated, info

    def _prompt(self) -> str:
        assert self.question is not None
        tables = schema_text(database(self.question.schema, self.question.db_seed))
        return (
            f"Answer a question about a SQLite database ({self.question.schema}). Its tables:\n{tables}\n\n"
            f"Question: {self.question.prompt_line()}\n\n"
            "To look at the data, reply with one SQL query (SQLite, read-only) in a ```sql code block: you "
            f"will see its result (at most {self.max_rows_shown} rows). When you know the answer, reply "
            f"with it inside \\boxed{{}}; that ends the episode. You have {self.max_turns} turns."
        )
