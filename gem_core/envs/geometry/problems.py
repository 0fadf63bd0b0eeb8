"""The geometry problems: one maker per question kind draws a figure and states its exact answer;
``make_problem`` gives problem ``i`` of a level from a seed (see ``gem_core.envs.geometry``)."""

from __future__ import annotations

import cmath
import functools
import math
import random
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

from gem_core.envs.geometry.figures import DEGREE, IMAGE_SIZE, Figure, Point

LEVELS = ("easy", "hard", "mixed")


# ---- points ----------------------------------------------------------------------------------------
def _polar(r: float, degrees: float) -> Point:
    return cmath.rect(r, math.radians(degrees))


def _triangle(a: float, b: float, base: float = 6.0) -> tuple[Point, Point, Point]:
    """Vertices A, B, C of a triangle with angle ``a`` at A and ``b`` at B (degrees), AB on the x axis."""
    c = 180 - a - b
    ac = base * math.sin(math.radians(b)) / math.sin(math.radians(c))
    return 0j, complex(base, 0), _polar(ac, a)


def _name_all(fig: Figure, names: str, points: Sequence[Point]) -> None:
    center = sum(points) / len(points)
    for label, p in zip(names, points):
        fig.name(label, p, center)


# ---- answers as LaTeX ------------------------------------------------------------------------------
def _number(value: Fraction | int) -> str:
    value = Fraction(value)
    if value.denominator == 1:
        return str(value.numerator)
    sign = "-" if value < 0 else ""
    return f"{sign}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"


def _times(value: Fraction | int, symbol: str) -> str:
    """``value`` times ``symbol`` (``\\pi`` or ``\\sqrt{3}``): ``25\\pi``, ``\\frac{25}{4}\\pi``, ``\\pi``."""
    return symbol if value == 1 else _number(value) + symbol


def _expression(k: int, c: int) -> str:
    """``kx + c`` as written on a figure: ``2x + 10``, ``3x - 5``, ``x``."""
    head = "x" if k == 1 else f"{k}x"
    return head if c == 0 else f"{head} {'+' if c > 0 else '-'} {abs(c)}"


# ---- the problems ----------------------------------------------------------------------------------


# the givens as a sentence (for ``describe=True``), and ``facts`` for checks: ``{"angle": (V, P, Q)}``
# says that x is the angle PVQ of the named points, plus the given values by name.
Made = tuple[str, str, str, dict[str, Any]]
FIND_ANGLE = "Find x (in degrees)."


def angle_sum(rng: random.Random, fig: Figure) -> Made:
    a = rng.randint(30, 100)
    b = rng.randint(30, min(100, 150 - a))
    A, B, C = _triangle(a, b)
    fig.polygon([A, B, C])
    _name_all(fig, "ABC", [A, B, C])
    fig.angle(A, B, C, f"{a}{DEGREE}")
    fig.angle(B, C, A, f"{b}{DEGREE}")
    fig.angle(C, A, B, f"x{DEGREE}")
    givens = f"In triangle ABC, angle A = {a} degrees, angle B = {b} degrees and angle C = x degrees."
    return FIND_ANGLE, _number(180 - a - b), givens, {"angle": ("C", "A", "B"), "A": a, "B": b}


def isosceles_base_angle(rng: random.Random, fig: Figure) -> Made:
    apex = 2 * rng.randint(10, 70)
    A = 4j
    B, C = A + _polar(4, -90 - apex / 2), A + _polar(4, -90 + apex / 2)
    fig.polygon([A, B, C])
    _name_all(fig, "ABC", [A, B, C])
    fig.ticks(A, B)
    fig.ticks(A, C)
    fig.angle(A, B, C, f"{apex}{DEGREE}")
    fig.angle(B, C, A, f"x{DEGREE}")
    givens = f"In triangle ABC, AB = AC, angle A = {apex} degrees and angle B = x degrees."
    return FIND_ANGLE, _number((180 - apex) // 2), givens, {"angle": ("B", "C", "A"), "A": apex}


TRIPLES = ((3, 4, 5), (5, 12, 13), (8, 15, 17), (7, 24, 25), (20, 21, 29), (9, 40, 41))


def _right_triangle(
    fig: Figure, leg_a: float, leg_b: float, rng: random.Random
) -> tuple[Point, Point, Point]:
    """A right triangle ABC with the right angle at C, legs CB = ``leg_a`` and CA = ``leg_b``, drawn at
    a random rotation."""
    turn = cmath.exp(1j * math.radians(rng.choice((0, 0, 15, 90, 180, 200, 270))))
    C, B, A = 0j, complex(leg_a, 0) * turn, complex(0, leg_b) * turn
    fig.polygon([A, B, C])
    _name_all(fig, "ABC", [A, B, C])
    fig.angle(C, A, B, right=True)
    return A, B, C


def right_hypotenuse(rng: random.Random, fig: Figure) -> Made:
    a, b, c = rng.choice(TRIPLES)
    k = rng.randint(1, 3) if c < 20 else 1
    a, b, c = (k * a, k * b, k * c) if rng.random() < 0.5 else (k * b, k * a, k * c)
    A, B, C = _right_triangle(fig, a, b, rng)
    fig.side(C, B, str(a), A)
    fig.side(C, A, str(b), B)
    fig.side(A, B, "x", C)
    givens = f"Triangle ABC has a right angle at C, BC = {a}, AC = {b} and AB = x."
    return "Find x.", _number(c), givens, {"length": ("A", "B"), "unit": ("B", "C", a)}


def circle_measure(rng: random.Random, fig: Figure) -> Made:
    r = rng.randint(2, 12)
    O = 0j  # noqa: E741 (the centre, named as on the figure)
    P = _polar(r, rng.choice((0, 20, 35, 150, 210, 320)))
    fig.circle(O, r)
    fig.dot(O)
    fig.segment(O, P)
    fig.name("O", O, P)
    fig.name("P", P, O)
    fig.side(O, P, str(r), O - 1j * (P - O))
    if rng.random() < 0.5:
        question = "Find the area of circle O. Give the exact answer in terms of \\pi."
        answer = _times(r * r, "\\pi")
    else:
        question = "Find the circumference of circle O. Give the exact answer in terms of \\pi."
        answer = _times(2 * r, "\\pi")
    return question, answer, f"Circle O has radius OP = {r}.", {"r": r}


def rectangle_measure(rng: random.Random, fig: Figure) -> Made:
    w, h = rng.randint(2, 15), rng.randint(2, 15)
    A, B, C, D = 0j, complex(w, 0), complex(w, h), complex(0, h)
    fig.polygon([A, B, C, D])
    _name_all(fig, "ABCD", [A, B, C, D])
    for v, p, q in ((A, B, D), (B, C, A), (C, D, B), (D, A, C)):
        fig.angle(v, p, q, right=True)
    fig.side(A, B, str(w), C)
    fig.side(B, C, str(h), A)
    if rng.random() < 0.5:
        question, answer = "Find the area of rectangle ABCD.", w * h
    else:
        question, answer = "Find the perimeter of rectangle ABCD.", 2 * (w + h)
    return question, _number(answer), f"ABCD is a rectangle with AB = {w} and BC = {h}.", {"w": w, "h": h}


def _regular_polygon(fig: Figure, n: int, rng: random.Random) -> list[Point]:
    start = rng.choice((90, 90 + 180 / n, -90))
    vertices = [_polar(3, start + 360 * k / n) for k in range(n)]
    fig.polygon(vertices)
    _name_all(fig, "ABCDEFGHIJKLMNOPQRST"[:n], vertices)
    return vertices


POLYGON_NAMES = {5: "pentagon", 6: "hexagon", 7: "heptagon", 8: "octagon", 9: "nonagon", 10: "decagon"}


def polygon_angle_sum(rng: random.Random, fig: Figure) -> Made:
    n = rng.randint(5, 10)
    _regular_polygon(fig, n, rng)
    name = "ABCDEFGHIJ"[:n]
    question = f"Find the sum of the interior angles of {POLYGON_NAMES[n]} {name}, in degrees."
    return question, _number((n - 2) * 180), f"{name} is a {POLYGON_NAMES[n]} ({n} sides).", {"n": n}


def _parallel_lines(rng: random.Random, fig: Figure) -> tuple[int, list[list[str]]]:
    """Lines AB and CD (parallel, marked) cut by the transversal EF at P and Q. Returns the angle
    theta between the transversal and the lines, and the rays around P and around Q (counterclockwise
    from the right): region k at a point lies between its rays k and k + 1, and measures theta when k
    is even, 180 - theta when k is odd."""
    theta = rng.choice([t for t in range(35, 146) if abs(t - 90) >= 12])
    height = 3.0
    P = complex(rng.uniform(-0.5, 0.5), height)
    Q = P - height * _polar(1 / math.sin(math.radians(theta)), theta)
    E, F = P + _polar(1.6, theta), Q - _polar(1.6, theta)
    left, right = min(Q.real, P.real) - 2.5, max(Q.real, P.real) + 2.5
    A, B, C, D = complex(left, height), complex(right, height), complex(left, 0), complex(right, 0)
    for p, q in ((A, B), (C, D), (E, F)):
        fig.segment(p, q)
    fig.arrows(A, B, at=0.12)  # clear of the crossings, which are at least 2.5 units from the ends
    fig.arrows(C, D, at=0.12)
    middle = (A + D) / 2
    for label, p in zip("ABCDEF", (A, B, C, D, E, F)):
        fig.name(label, p, middle)
    fig.points.update(P=P, Q=Q)  # labelled by _name_crossings once the marked angles are known
    return theta, [["B", "E", "A", "Q"], ["D", "P", "C", "F"]]


def _name_crossings(fig: Figure, theta: int, at_p: int, at_q: int) -> None:
    """Label P and Q inside the angle vertically opposite the marked one, where there is room."""
    rays = [0, theta, 180, theta + 180, 360]
    for label, region in (("P", at_p), ("Q", at_q)):
        opposite = (region + 2) % 4
        middle = (rays[opposite] + rays[opposite + 1]) / 2
        fig.name(label, fig.points[label], fig.points[label] - _polar(1, middle))


def _region_value(theta: int, region: int) -> int:
    return theta if region % 2 == 0 else 180 - theta


RELATIONS = {  # (region at P, region at Q) -> what the two angles are to each other
    **{(k, k): "corresponding" for k in range(4)},
    (3, 1): "alternate interior",
    (2, 0): "alternate interior",
    (0, 2): "alternate exterior",
    (1, 3): "alternate exterior",
    (3, 0): "co-interior",
    (2, 1): "co-interior",
}


def parallel_angle(rng: random.Random, fig: Figure) -> Made:
    theta, rays = _parallel_lines(rng, fig)
    at_p, at_q = rng.choice(sorted(RELATIONS))
    _name_crossings(fig, theta, at_p, at_q)
    value = _region_value(theta, at_p)
    p_rays, q_rays = rays
    P, Q = fig.points["P"], fig.points["Q"]
    fig.angle(P, fig.points[p_rays[at_p]], fig.points[p_rays[(at_p + 1) % 4]], f"{value}{DEGREE}")
    fig.angle(Q, fig.points[q_rays[at_q]], fig.points[q_rays[(at_q + 1) % 4]], f"x{DEGREE}")
    target = ("Q", q_rays[at_q], q_rays[(at_q + 1) % 4])
    givens = (
        f"Lines AB and CD are parallel; the transversal EF meets them at P and Q. Angle "
        f"{p_rays[at_p]}P{p_rays[(at_p + 1) % 4]} = {value} degrees and angle {target[1]}Q{target[2]} = x degrees."
    )
    facts = {"angle": target, "relation": RELATIONS[at_p, at_q], "given": value}
    return "Lines AB and CD are parallel. " + FIND_ANGLE, _number(_region_value(theta, at_q)), givens, facts


# hard ---------------------------------------------------------------------------------------------
def exterior_angle(rng: random.Random, fig: Figure) -> Made:
    a = rng.randint(30, 90)
    b = rng.randint(30, min(90, 150 - a))
    A, B, C = _triangle(a, b)
    D = C + (C - B) * 0.6
    fig.polygon([A, B, C])
    fig.segment(C, D)
    _name_all(fig, "ABC", [A, B, C])
    fig.name("D", D, C)
    if rng.random() < 0.5:  # find the exterior angle from the two remote interior angles
        fig.angle(A, B, C, f"{a}{DEGREE}")
        fig.angle(B, C, A, f"{b}{DEGREE}")
        fig.angle(C, A, D, f"x{DEGREE}")
        givens = (
            f"In triangle ABC, angle A = {a} and angle B = {b} degrees; BC is extended to D; angle ACD = x."
        )
        return FIND_ANGLE, _number(a + b), givens, {"angle": ("C", "A", "D"), "A": a, "B": b}
    fig.angle(C, A, D, f"{a + b}{DEGREE}")
    fig.angle(B, C, A, f"{b}{DEGREE}")
    fig.angle(A, B, C, f"x{DEGREE}")
    givens = (
        f"In triangle ABC, BC is extended to D, angle ACD = {a + b} and angle B = {b} degrees; angle A = x."
    )
    return FIND_ANGLE, _number(a), givens, {"angle": ("A", "B", "C"), "ACD": a + b, "B": b}


def angle_algebra(rng: random.Random, fig: Figure) -> Made:
    """Three angles of a triangle written as ``k x + c``; find x."""
    while True:
        x = rng.randint(8, 40)
        ks = [rng.randint(1, 3) for _ in range(3)]
        angles = [rng.randint(30, 90), rng.randint(30, 90)]
        angles.append(180 - sum(angles))
        if 25 <= angles[2] <= 120:
            break
    cs = [angle - k * x for angle, k in zip(angles, ks)]
    A, B, C = _triangle(angles[0], angles[1])
    fig.polygon([A, B, C])
    _name_all(fig, "ABC", [A, B, C])
    labels = [f"({_expression(k, c)}){DEGREE}" for k, c in zip(ks, cs)]
    fig.angle(A, B, C, labels[0])
    fig.angle(B, C, A, labels[1])
    fig.angle(C, A, B, labels[2])
    givens = "In triangle ABC, angle A = {}, angle B = {} and angle C = {}.".format(*labels)
    expressions = {"CAB": (ks[0], cs[0]), "ABC": (ks[1], cs[1]), "BCA": (ks[2], cs[2])}
    return "Find x.", _number(x), givens, {"expressions": expressions}


def right_triangle_side(rng: random.Random, fig: Figure) -> Made:
    kind = rng.choice(("leg", "leg", "45", "30-60"))
    if kind == "leg":
        a, b, c = rng.choice(TRIPLES)
        a, b = (a, b) if rng.random() < 0.5 else (b, a)
        A, B, C = _right_triangle(fig, a, b, rng)
        fig.side(C, B, str(a), A)
        fig.side(A, B, str(c), C)
        fig.side(C, A, "x", B)
        givens = f"Triangle ABC has a right angle at C, BC = {a}, AB = {c} and AC = x."
        return "Find x.", _number(b), givens, {"length": ("A", "C"), "unit": ("B", "C", a)}
    s = rng.randint(2, 12)
    if kind == "45":
        A, B, C = _right_triangle(fig, s, s, rng)
        fig.angle(B, C, A, f"45{DEGREE}")
        fig.side(C, B, str(s), A)
        fig.side(A, B, "x", C)
        givens = f"Triangle ABC has a right angle at C, angle B = 45 degrees, BC = {s} and AB = x."
        answer = _times(s, "\\sqrt{2}")
        facts = {"length": ("A", "B"), "unit": ("B", "C", s)}
    else:  # 30-60-90: the leg CB (opposite the 30 degree angle at A) is s, so AB = 2s, AC = s sqrt 3
        A, B, C = _right_triangle(fig, s, s * math.sqrt(3), rng)
        fig.angle(A, B, C, f"30{DEGREE}")
        fig.side(C, B, str(s), A)
        fig.side(C, A, "x", B)
        givens = f"Triangle ABC has a right angle at C, angle A = 30 degrees, BC = {s} and AC = x."
        answer = _times(s, "\\sqrt{3}")
        facts = {"length": ("A", "C"), "unit": ("B", "C", s)}
    return "Find x. Give the exact answer in simplest radical form.", answer, givens, facts


SECTOR_ANGLES = (30, 45, 60, 72, 90, 120, 135, 150, 240, 270)


def circle_derived(rng: random.Random, fig: Figure) -> Made:
    kind = rng.choice(("diameter", "circumference", "sector", "arc"))
    r = Fraction(rng.randint(2, 12), 2 if kind == "diameter" else 1)
    O = 0j  # noqa: E741 (the centre, named as on the figure)
    radius = float(r)
    fig.circle(O, radius)
    fig.dot(O)
    exact = " Give the exact answer in terms of \\pi."
    if kind in ("diameter", "circumference"):
        fig.name("O", O, O + 1j)
    if kind == "diameter":
        A, B = _polar(radius, 200), _polar(radius, 20)
        fig.segment(A, B)
        fig.name("A", A, O)
        fig.name("B", B, O)
        fig.side(A, B, _number(2 * r), O - 1j)
        return (
            "Find the area of circle O." + exact,
            _times(r * r, "\\pi"),
            f"AB = {_number(2 * r)} is a diameter of circle O.",
            {"r": r},
        )
    if kind == "circumference":
        fig.segment(O, _polar(radius, 30))
        fig.side(O, _polar(radius, 30), "r", O - 1j)
        fig.shapes.append(("text", (O - radius * 1j, f"C = {_times(2 * r, 'π')}", -1j, 8)))
        question = "The circumference of circle O is shown. Find its area." + exact
        return question, _times(r * r, "\\pi"), f"Circle O has circumference {_times(2 * r, 'pi')}.", {"r": r}
    angle = rng.choice(SECTOR_ANGLES)
    start = rng.choice((0, 15, 30, 200))
    A, B = _polar(radius, start), _polar(radius, start + angle)
    fig.name("O", O, _polar(1, start + angle / 2))
    fig.segment(O, A)
    fig.segment(O, B)
    fig.name("A", A, O)
    fig.name("B", B, O)
    fig.side(O, A, str(r), B)
    fig.angle(O, A, B, f"{angle}{DEGREE}", ccw=True)
    if kind == "sector":
        question = f"Find the area of the sector AOB with the {angle}{DEGREE} angle." + exact
        answer = _times(Fraction(angle, 360) * r * r, "\\pi")
    else:
        question = f"Find the length of the arc AB subtended by the {angle}{DEGREE} angle." + exact
        answer = _times(Fraction(angle, 360) * 2 * r, "\\pi")
    givens = f"Circle O has radius OA = {r}; angle AOB = {angle} degrees."
    return question, answer, givens, {"r": r, "ccw_angle": ("O", "A", "B"), "degrees": angle}


def polygon_area(rng: random.Random, fig: Figure) -> Made:
    if rng.random() < 0.5:  # isosceles triangle: the height from the Pythagorean triple
        a, h, c = rng.choice(TRIPLES[:4])
        B, C, A = complex(-a, 0), complex(a, 0), complex(0, h)
        M = 0j
        fig.polygon([A, B, C])
        fig.segment(A, M, dashed=True)
        _name_all(fig, "ABC", [A, B, C])
        fig.points["M"] = M
        fig.angle(M, C, A, right=True)
        fig.ticks(A, B)
        fig.ticks(A, C)
        fig.side(A, B, str(c), C)
        fig.side(B, C, str(2 * a), A)
        givens = f"In triangle ABC, AB = AC = {c} and BC = {2 * a}; the dashed segment is the height from A."
        return "Find the area of triangle ABC.", _number(a * h), givens, {"base": 2 * a, "side": c}
    top, bottom, h = rng.randint(2, 10), rng.randint(4, 16), rng.randint(2, 10)
    if top == bottom:
        bottom += 1
    shift = (bottom - top) / 2 + rng.choice((-1, 0, 1))
    A, B = 0j, complex(bottom, 0)
    C, D = complex(shift + top, h), complex(shift, h)
    H = complex(shift, 0)
    fig.polygon([A, B, C, D])
    fig.segment(D, H, dashed=True)
    _name_all(fig, "ABCD", [A, B, C, D])
    fig.angle(H, B, D, right=True)
    fig.arrows(A, B, at=0.75)
    fig.arrows(D, C, at=0.75)
    fig.side(A, B, str(bottom), D)
    fig.side(D, C, str(top), A)
    fig.side(D, H, str(h), B)
    givens = f"ABCD is a trapezoid with AB parallel to DC, AB = {bottom}, DC = {top} and height {h}."
    return "Find the area of trapezoid ABCD.", _number(Fraction((top + bottom) * h, 2)), givens, {"h": h}


REGULAR = {5: "pentagon", 6: "hexagon", 8: "octagon", 9: "nonagon", 10: "decagon", 12: "dodecagon"}


def regular_polygon_angle(rng: random.Random, fig: Figure) -> Made:
    n = rng.choice(sorted(REGULAR))
    vertices = _regular_polygon(fig, n, rng)
    for p, q in zip(vertices, [*vertices[1:], vertices[0]]):
        fig.ticks(p, q)
    names = "ABCDEFGHIJKL"
    if rng.random() < 0.6:
        fig.angle(vertices[1], vertices[0], vertices[2], f"x{DEGREE}")
        givens = f"{names[:n]} is a regular {REGULAR[n]}; x is angle ABC."
        facts = {"angle": ("B", "A", "C"), "n": n}
        return (
            f"{names[:n]} is a regular {REGULAR[n]}. {FIND_ANGLE}",
            _number(Fraction((n - 2) * 180, n)),
            givens,
            facts,
        )
    X = vertices[1] + (vertices[1] - vertices[0]) * 0.7
    fig.segment(vertices[1], X)
    fig.name("X", X, vertices[1])
    fig.angle(vertices[1], X, vertices[2], f"x{DEGREE}")
    givens = f"{names[:n]} is a regular {REGULAR[n]}; AB is extended to X; x is angle XBC."
    facts = {"angle": ("B", "X", "C"), "n": n}
    return f"{names[:n]} is a regular {REGULAR[n]}. {FIND_ANGLE}", _number(Fraction(360, n)), givens, facts


def inscribed_angle(rng: random.Random, fig: Figure) -> Made:
    central = 2 * rng.randint(20, 80)
    start = rng.uniform(-120, -60) - central / 2
    O = 0j  # noqa: E741 (the centre, named as on the figure)
    A, B = _polar(3, start), _polar(3, start + central)
    C = _polar(3, start + central + rng.uniform(60, 360 - central - 60))
    fig.circle(O, 3)
    fig.dot(O)
    for p, q in ((O, A), (O, B), (C, A), (C, B)):
        fig.segment(p, q)
    fig.name("O", O, O + A + B)
    for label, p in zip("ABC", (A, B, C)):
        fig.name(label, p, O)
    if rng.random() < 0.5:
        fig.angle(O, A, B, f"{central}{DEGREE}")
        fig.angle(C, A, B, f"x{DEGREE}")
        givens = f"A, B, C lie on circle O; angle AOB = {central} degrees and angle ACB = x."
        return FIND_ANGLE, _number(central // 2), givens, {"angle": ("C", "A", "B"), "AOB": central}
    fig.angle(C, A, B, f"{central // 2}{DEGREE}")
    fig.angle(O, A, B, f"x{DEGREE}")
    givens = f"A, B, C lie on circle O; angle ACB = {central // 2} degrees and angle AOB = x."
    return FIND_ANGLE, _number(central), givens, {"angle": ("O", "A", "B"), "ACB": central // 2}


def parallel_algebra(rng: random.Random, fig: Figure) -> Made:
    theta, rays = _parallel_lines(rng, fig)
    at_p, at_q = rng.choice(sorted(RELATIONS))
    _name_crossings(fig, theta, at_p, at_q)
    values = _region_value(theta, at_p), _region_value(theta, at_q)
    while True:
        x = rng.randint(5, 30)
        kp, kq = rng.sample((1, 2, 3, 4), 2)
        cp, cq = values[0] - kp * x, values[1] - kq * x
        if abs(cp) <= 120 and abs(cq) <= 120:
            break
    p_rays, q_rays = rays
    P, Q = fig.points["P"], fig.points["Q"]
    p_label, q_label = f"({_expression(kp, cp)}){DEGREE}", f"({_expression(kq, cq)}){DEGREE}"
    fig.angle(P, fig.points[p_rays[at_p]], fig.points[p_rays[(at_p + 1) % 4]], p_label)
    fig.angle(Q, fig.points[q_rays[at_q]], fig.points[q_rays[(at_q + 1) % 4]], q_label)
    givens = (
        f"Lines AB and CD are parallel; the transversal EF meets them at P and Q. Angle "
        f"{p_rays[at_p]}P{p_rays[(at_p + 1) % 4]} = {p_label} and angle {q_rays[at_q]}Q{q_rays[(at_q + 1) % 4]} = {q_label}."
    )
    facts = {
        "relation": RELATIONS[at_p, at_q],
        "expressions": {  # angle name (the vertex in the middle) -> (k, c) of its label k x + c
            f"{p_rays[at_p]}P{p_rays[(at_p + 1) % 4]}": (kp, cp),
            f"{q_rays[at_q]}Q{q_rays[(at_q + 1) % 4]}": (kq, cq),
        },
    }
    return "Lines AB and CD are parallel. Find x.", _number(x), givens, facts


EASY: tuple[Callable[[random.Random, Figure], Made], ...] = (
    angle_sum,
    isosceles_base_angle,
    right_hypotenuse,
    circle_measure,
    rectangle_measure,
    polygon_angle_sum,
    parallel_angle,
)
HARD: tuple[Callable[[random.Random, Figure], Made], ...] = (
    exterior_angle,
    angle_algebra,
    right_triangle_side,
    circle_derived,
    polygon_area,
    regular_polygon_angle,
    inscribed_angle,
    parallel_algebra,
)


@functools.lru_cache(maxsize=512)
def make_problem(level: str, seed: int, index: int, image_size: int = IMAGE_SIZE) -> dict[str, Any]:
    """Problem ``index`` of ``level`` (``easy``, ``hard`` or ``mixed``) in the family ``seed``."""
    if level not in LEVELS:
        raise ValueError(f"level is one of {LEVELS}, got {level!r}")
    rng = random.Random(f"geometry:{seed}:{level}:{index}")
    chosen = rng.choice(("easy", "hard")) if level == "mixed" else level
    maker = rng.choice(EASY if chosen == "easy" else HARD)
    fig = Figure()
    question, answer, givens, facts = maker(rng, fig)
    return {
        "problem": question,
        "answer": answer,
        "givens": givens,
        "kind": maker.__name__,
        "level": chosen,
        "facts": facts,
        "points": dict(fig.points),
        "images": (fig.render(image_size),),
    }
