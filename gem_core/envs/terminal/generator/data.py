"""The terminal tasks of the category "data": sums, groups and joins over CSV-like files."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from gem_core.envs.terminal.generator.parts import FIRST_NAMES, WORDS, lines, task


def draw_sales(rng: random.Random) -> list[tuple[str, str, int]]:
    """The rows (region, product, amount) of the sales.csv that SumColumn and GroupBySum share."""
    regions = ["north", "south", "east", "west"]
    return [(rng.choice(regions), rng.choice(WORDS), rng.randint(5, 500)) for _ in range(30)]


def sales_csv(sales: list[tuple[str, str, int]]) -> str:
    return "region,product,amount\n" + lines(f"{r},{p},{a}" for r, p, a in sales)


def sum_column(sales: list[tuple[str, str, int]]) -> dict[str, Any]:
    return task(
        "SumColumn",
        "data",
        "sales.csv has the header region,product,amount. Write the sum of the amount column "
        "(an integer, digits only) to total.txt.",
        {"sales.csv": sales_csv(sales)},
        [
            {
                "type": "file_equals",
                "path": "total.txt",
                "content": str(sum(a for _, _, a in sales)),
                "strip": True,
            }
        ],
        ["awk -F, 'NR > 1 {s += $3} END {print s}' sales.csv > total.txt"],
    )


def group_by_sum(sales: list[tuple[str, str, int]]) -> dict[str, Any]:
    by_region = Counter()
    for r, _, a in sales:
        by_region[r] += a
    return task(
        "GroupBySum",
        "data",
        "sales.csv has the header region,product,amount. Write one line 'region,total' per region "
        "with the sum of its amounts, sorted by region name, to totals.csv (no header).",
        {"sales.csv": sales_csv(sales)},
        [
            {
                "type": "file_equals",
                "path": "totals.csv",
                "content": lines(f"{r},{by_region[r]}" for r in sorted(by_region)),
            }
        ],
        [
            "tail -n +2 sales.csv | awk -F, '{s[$1] += $3} END {for (r in s) print r \",\" s[r]}' "
            "| sort > totals.csv"
        ],
    )


def join_tables(rng: random.Random) -> dict[str, Any]:
    customers = {i: name for i, name in enumerate(rng.sample(FIRST_NAMES, 5), start=1)}
    orders = [(100 + k, rng.randint(1, 5), rng.randint(10, 90)) for k in range(20)]
    spent = Counter()
    for _, cid, amount in orders:
        spent[customers[cid]] += amount
    return task(
        "JoinTables",
        "data",
        "customers.csv has the header id,name and orders.csv the header id,customer_id,amount. Write "
        "one line 'name,total' per customer with the sum of their order amounts, sorted by name, to "
        "spent.csv (no header).",
        {
            "customers.csv": "id,name\n" + lines(f"{i},{n}" for i, n in customers.items()),
            "orders.csv": "id,customer_id,amount\n" + lines(f"{o},{c},{a}" for o, c, a in orders),
        },
        [
            {
                "type": "file_equals",
                "path": "spent.csv",
                "content": lines(f"{n},{spent[n]}" for n in sorted(spent)),
            }
        ],
        [
            "awk -F, 'FNR == 1 {next} NR == FNR {name[$1] = $2; next} {s[name[$2]] += $3} "
            'END {for (n in s) print n "," s[n]}\' customers.csv orders.csv | sort > spent.csv'
        ],
    )


def hottest_city(rng: random.Random) -> dict[str, Any]:
    temperatures = {
        f"{city}": [rng.randint(-5, 35) for _ in range(7)] for city in ("oslo", "lima", "rome", "kyiv")
    }
    hottest = max(temperatures, key=lambda c: max(temperatures[c]))
    assert len({max(t) for t in temperatures.values()}) == len(temperatures), "no ties"
    return task(
        "HottestCity",
        "data",
        "readings/ has one file per city (named CITY.txt) with one temperature per line. Write the name "
        "of the city with the highest single reading (just the name) to hottest.txt, and create "
        "report.txt with one line 'CITY MAX' per city, sorted by city name.",
        {f"readings/{c}.txt": lines(t) for c, t in temperatures.items()},
        [
            {"type": "file_equals", "path": "hottest.txt", "content": hottest, "strip": True},
            {
                "type": "file_equals",
                "path": "report.txt",
                "content": lines(f"{c} {max(temperatures[c])}" for c in sorted(temperatures)),
            },
        ],
        [
            'for f in readings/*.txt; do c=$(basename "$f" .txt); echo "$c $(sort -n "$f" | tail -n 1)"; '
            "done | sort > report.txt",
            "sort -k2,2n report.txt | tail -n 1 | cut -d' ' -f1 > hottest.txt",
        ],
    )
