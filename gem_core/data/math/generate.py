"""Generate the offline math sets (``python gem_core/data/math/generate.py``), deterministically.

Five files of 60 problems each, every answer computed exactly with ``fractions.Fraction``:

  arithmetic.jsonl        integer expressions with order of operations and parentheses
  fractions.jsonl         sums, differences, products and quotients of fractions (lowest terms)
  linear_equations.jsonl  one linear equation in x, integer or fractional solution
  percentages.jsonl       percent of, percent change, reverse percentages
  word_problems.jsonl     multi-step grade-school word problems (GSM8K-style templates)

Each record is ``{"id", "category", "problem", "answer"}`` with the answer as LaTeX math-verify parses.
"""

from __future__ import annotations

import json
import random
import sys
from fractions import Fraction
from pathlib import Path

PER_FILE = 60
NAMES = ["Maya", "Tom", "Aisha", "Leo", "Sofia", "Ravi", "Emma", "Kenji", "Lucia", "Omar", "Nora", "Felix"]


def latex_number(value: Fraction) -> str:
    """An exact number as LaTeX: an integer, a terminating decimal, or ``\\frac{p}{q}``."""
    if value.denominator == 1:
        return str(value.numerator)
    sign = "-" if value < 0 else ""
    return f"{sign}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"


def decimal_number(value: Fraction) -> str:
    """A number with a terminating decimal expansion, written as a decimal (``12.5``)."""
    if value.denominator == 1:
        return str(value.numerator)
    for digits in range(1, 7):
        scaled = value * 10**digits
        if scaled.denominator == 1:
            text = f"{abs(scaled.numerator):0{digits + 1}d}"
            sign = "-" if value < 0 else ""
            return f"{sign}{text[:-digits]}.{text[-digits:]}"
    raise ValueError(f"{value} has no short decimal expansion")


# ---- arithmetic ---------------------------------------------------------------------------------
def arithmetic(rng: random.Random) -> tuple[str, Fraction]:
    shape = rng.randrange(4)
    a, b, c, d = (rng.randint(2, 30) for _ in range(4))
    if shape == 0:  # a + b * c - d
        return f"{a} + {b} \\times {c} - {d}", Fraction(a + b * c - d)
    if shape == 1:  # (a + b) * c - d * e
        e = rng.randint(2, 9)
        return f"({a} + {b}) \\times {c} - {d} \\times {e}", Fraction((a + b) * c - d * e)
    if shape == 2:  # a * b / c + d with exact division
        c = rng.choice([2, 3, 4, 5, 6])
        b = c * rng.randint(1, 8)
        return f"{a} \\times {b} \\div {c} + {d}", Fraction(a * b // c + d)
    base, exp = rng.randint(2, 6), rng.randint(2, 3)  # a^n - b * (c - d)
    return f"{base}^{{{exp}}} - {b} \\times ({c} - {d})", Fraction(base**exp - b * (c - d))


def arithmetic_problem(rng: random.Random) -> tuple[str, str]:
    expression, value = arithmetic(rng)
    return f"Compute ${expression}$.", latex_number(value)


# ---- fractions ----------------------------------------------------------------------------------
def fraction_problem(rng: random.Random) -> tuple[str, str]:
    def draw() -> Fraction:
        q = rng.randint(2, 12)
        return Fraction(rng.randint(1, 2 * q - 1), q)

    x, y = draw(), draw()
    while x.denominator == 1 or y.denominator == 1:
        x, y = draw(), draw()
    op = rng.choice(["+", "-", "\\times", "\\div"])
    value = {"+": x + y, "-": x - y, "\\times": x * y, "\\div": x / y}[op]
    text = f"\\frac{{{x.numerator}}}{{{x.denominator}}} {op} \\frac{{{y.numerator}}}{{{y.denominator}}}"
    return f"Compute ${text}$. Give the answer as a fraction in lowest terms.", latex_number(value)


# ---- linear equations ---------------------------------------------------------------------------
def linear_equation_problem(rng: random.Random) -> tuple[str, str]:
    x = Fraction(rng.randint(-12, 12), rng.choice([1, 1, 1, 2, 3]))
    a = rng.choice([n for n in range(-9, 10) if n not in (0,)])
    c = rng.choice([n for n in range(-9, 10) if n not in (0, a)])
    b = rng.randint(-20, 20)
    d = a * x + b - c * x  # a x + b = c x + d
    if d.denominator != 1:  # keep the printed coefficients integers
        return linear_equation_problem(rng)

    def side(coef: int, const: Fraction) -> str:
        term = {1: "x", -1: "-x"}.get(coef, f"{coef}x")
        if const == 0:
            return term
        return f"{term} {'+' if const > 0 else '-'} {abs(const)}"

    return f"Solve for $x$: ${side(a, Fraction(b))} = {side(c, d)}$.", latex_number(x)


# ---- percentages --------------------------------------------------------------------------------
def percentage_problem(rng: random.Random) -> tuple[str, str]:
    kind = rng.randrange(4)
    if kind == 0:
        p, n = rng.choice([5, 10, 12, 15, 20, 25, 30, 35, 40, 45, 60, 75, 80]), rng.randint(2, 60) * 20
        return f"What is {p}% of {n}?", decimal_number(Fraction(p * n, 100))
    if kind == 1:
        whole = rng.choice([20, 25, 40, 50, 80, 120, 200, 250, 400, 500])
        part = Fraction(whole * rng.randint(1, 19), 20)
        return (
            f"What percent of {whole} is {decimal_number(part)}? Answer with the number, without the % sign.",
            decimal_number(part / whole * 100),
        )
    if kind == 2:
        price, p = rng.randint(4, 60) * 5, rng.choice([10, 15, 20, 25, 30, 40])
        up = rng.random() < 0.5
        change = "increased" if up else "decreased"
        new = Fraction(price * (100 + p if up else 100 - p), 100)
        return (
            f"A price of {price} dollars is {change} by {p}%. What is the new price in dollars?",
            decimal_number(new),
        )
    original, p = rng.randint(4, 50) * 4, rng.choice([10, 20, 25, 30, 40, 50])
    sale = Fraction(original * (100 - p), 100)
    return (
        f"After a {p}% discount, a jacket costs {decimal_number(sale)} dollars. "
        "What was its original price in dollars?",
        decimal_number(Fraction(original)),
    )


# ---- word problems ------------------------------------------------------------------------------
def word_problem(rng: random.Random) -> tuple[str, str]:
    name = rng.choice(NAMES)
    kind = rng.randrange(8)
    if kind == 0:
        packs, per, given = rng.randint(3, 9), rng.randint(6, 24), rng.randint(2, 20)
        return (
            f"{name} buys {packs} packs of pencils with {per} pencils in each pack. {name} gives "
            f"{given} pencils to friends. How many pencils does {name} have left?",
            str(packs * per - given),
        )
    if kind == 1:
        v1, t1, v2, t2 = (
            rng.randint(4, 12) * 10,
            rng.randint(1, 5),
            rng.randint(4, 12) * 10,
            rng.randint(1, 4),
        )
        return (
            f"A train travels at {v1} km per hour for {t1} hours and then at {v2} km per hour for "
            f"{t2} hours. How many kilometres does it travel in total?",
            str(v1 * t1 + v2 * t2),
        )
    if kind == 2:
        wage, hours, days = rng.randint(10, 30), rng.randint(3, 8), rng.randint(3, 6)
        spent = rng.randint(1, wage * hours * days // 10) * 10 // 2
        return (
            f"{name} earns {wage} dollars per hour and works {hours} hours a day for {days} days. "
            f"{name} then spends {spent} dollars. How many dollars does {name} have left from these earnings?",
            str(wage * hours * days - spent),
        )
    if kind == 3:
        child, ratio, years = rng.randint(3, 15), rng.randint(2, 4), rng.randint(2, 10)
        total = ratio * child + child + 2 * years
        return (
            f"{name} is {ratio} times as old as {name}'s brother. In {years} years the sum of their ages "
            f"will be {total}. How old is {name} now?",
            str(ratio * child),
        )
    if kind == 4:
        per_box, boxes, price, unsold = (
            rng.randint(4, 12),
            rng.randint(6, 20),
            rng.randint(3, 9),
            rng.randint(1, 5),
        )
        return (
            f"A baker makes {per_box * boxes} cookies and packs them into boxes of {per_box}. Each box "
            f"sells for {price} dollars. How many dollars does the baker make by selling all but {unsold} "
            "of the boxes?",
            str((boxes - unsold) * price),
        )
    if kind == 5:
        scores = [rng.randint(60, 95) for _ in range(4)]
        target = rng.randint(70, 90)
        needed = 5 * target - sum(scores)
        if not 0 <= needed <= 100:
            return word_problem(rng)
        return (
            f"{name}'s scores on four tests are {', '.join(map(str, scores[:3]))} and {scores[3]}. What "
            f"score does {name} need on the fifth test for an average of {target} over all five tests?",
            str(needed),
        )
    if kind == 6:
        length, width, cost = rng.randint(3, 20), rng.randint(3, 15), rng.randint(2, 12)
        return (
            f"A rectangular garden is {length} metres long and {width} metres wide. Fencing costs {cost} "
            "dollars per metre. How many dollars does it cost to fence the whole garden?",
            str(2 * (length + width) * cost),
        )
    start, shares = rng.randint(4, 20) * 12, rng.choice([2, 3, 4, 6])
    eaten = rng.randint(1, start // shares - 1)
    return (
        f"{name} has {start} marbles and shares them equally among {shares} friends. Each friend then "
        f"loses {eaten} marbles. How many marbles do the friends have left altogether?",
        str(start - shares * eaten),
    )


SETS = {
    "arithmetic": arithmetic_problem,
    "fractions": fraction_problem,
    "linear_equations": linear_equation_problem,
    "percentages": percentage_problem,
    "word_problems": word_problem,
}


def generate(category: str, count: int = PER_FILE, seed: int = 0) -> list[dict[str, str]]:
    rng = random.Random(f"{category}:{seed}")
    records, seen = [], set()
    while len(records) < count:
        problem, answer = SETS[category](rng)
        if problem in seen:
            continue
        seen.add(problem)
        records.append(
            {
                "id": f"{category}-{len(records):03d}",
                "category": category,
                "problem": problem,
                "answer": answer,
            }
        )
    return records


def write_all(directory: Path) -> None:
    for category in SETS:
        with open(directory / f"{category}.jsonl", "w", encoding="utf-8") as f:
            for record in generate(category):
                f.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    write_all(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent)
