"""SQL: answer questions about generated SQLite databases by querying them, read-only, under budgets.

Three schemas ship (``shop``: customers, products, orders; ``library``: authors, books, members,
loans; ``flights``: airports, airlines, flights, passengers, bookings), each with question templates
at three levels (``easy``: one table; ``medium``: joins; ``hard``: aggregates with grouping). Each
database is generated from a seed; each question is a template filled from that database, and the
gold answer is its SQL query's result. ``env.py`` has the episode and its rewards, ``database.py``
the read-only connection and its budgets, ``questions.py`` the templates and the grading.

Ids: ``sql:Shop-v0``, ``sql:Library-v0``, ``sql:Flights-v0`` (one schema, every level),
``sql:Mixed-v0`` (every schema and level) and ``sql:Mixed-v0-easy|medium|hard`` (one level).
"""

from gem_core.envs.sql.questions import LEVEL_MEANING, LEVELS
from gem_core.registry import register

ENTRY_POINT = "gem_core.envs.sql.env:SqlEnv"


def _register() -> None:
    for name in ("Shop", "Library", "Flights"):
        register(
            f"sql:{name}-v0",
            ENTRY_POINT,
            description=f"questions over a generated {name.lower()} database, every level",
            schemas=(name.lower(),),
        )
    register(
        "sql:Mixed-v0",
        ENTRY_POINT,
        description="questions over generated shop, library and flights databases",
    )
    for level in LEVELS:
        register(
            f"sql:Mixed-v0-{level}",
            ENTRY_POINT,
            description=f"{level} questions ({LEVEL_MEANING[level]}) over every schema",
            levels=(level,),
        )


_register()
