"""Geometry with figures: a problem drawn as an image, the answer in ``\\boxed{}``, graded by math-verify.

The observation is a ``MultimodalObservation`` (``gem_core.observation``): the question text and one
PNG figure. As in Geometry3K, the givens (lengths, angles, equal-side ticks, parallel arrows, right
angle marks) are written on the figure, and the text only says what to find ("Find x."), so the
figure is needed; ``describe=True`` also states the givens in the text (for text-only baselines).

Problems are generated on demand from a seed (``reset(index=i)`` always gives problem ``i``) and
drawn with Pillow, so the same seed gives byte-identical PNGs. Every answer is exact by construction:
the figure is drawn from the answer's own quantities (an angle marked x is the angle between the
drawn rays), and answers are integers, fractions, multiples of pi (``25\\pi``) or of a square root
(``5\\sqrt{2}``). Figures are not to scale in absolute size, but their angles and length ratios are.

| level  | question kinds                                                                          |
|--------|-----------------------------------------------------------------------------------------|
| easy   | triangle angle sum, isosceles base angle, Pythagorean hypotenuse (integer triples),     |
|        | circle area / circumference from the radius, rectangle area / perimeter, polygon angle  |
|        | sum, parallel lines cut by a transversal (corresponding, alternate, co-interior angles) |
| hard   | exterior angle, angles given as expressions in x, a missing leg or a 45-45-90 / 30-60-90 |
|        | side, circle area from the diameter or circumference, sector area and arc length,       |
|        | isosceles triangle and trapezoid areas, regular polygon angles, inscribed angles,       |
|        | parallel-line angles given as expressions in x                                          |

| event                                              | reward |
|----------------------------------------------------|--------|
| boxed answer equivalent to the reference           | 1.0    |
| wrong answer, or grading timed out / failed        | 0.0    |
| no ``\\boxed{}`` in the reply (``format_error``)   | 0.0    |

Ids: ``math:GeometryFigures-v0-easy``, ``math:GeometryFigures-v0-hard``, ``math:GeometryFigures-v0``
(either level, drawn per problem). The reference GEM's ``math:Geometry3K`` (Hub dataset
``axon-rl/geometry3k``, images in its ``images`` column) loads through ``datasets`` when online, or
from a local copy: ``make("math:Geometry3K", data_files="geometry3k.parquet")``.
"""

from __future__ import annotations

import cmath
import functools
import io
import math
import random
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

from gem_core.envs.dataset import DatasetEnv
from gem_core.envs.math import GRADE_TIMEOUT, INSTRUCTION, MathEnv
from gem_core.observation import MultimodalObservation, png_bytes
from gem_core.registry import register

LEVELS = ("easy", "hard", "mixed")
IMAGE_SIZE = 384  # pixels, square
DEGREE = "°"

Point = complex  # plane coordinates, y up


# ---- figures ---------------------------------------------------------------------------------------
class Figure:
    """Drawing primitives in plane coordinates, rendered to fit a square canvas (y up, uniform scale).

    ``points`` holds the named points (for labels, and for checking a figure against its answer).
    """

    INK, LABEL, MARGIN = (0, 0, 0), (20, 40, 150), 44

    def __init__(self) -> None:
        self.shapes: list[tuple[str, tuple[Any, ...]]] = []
        self.extent: list[Point] = []
        self.points: dict[str, Point] = {}

    def segment(self, p: Point, q: Point, dashed: bool = False) -> None:
        self.shapes.append(("segment", (p, q, dashed)))
        self.extent += [p, q]

    def polygon(self, vertices: Sequence[Point]) -> None:
        for p, q in zip(vertices, [*vertices[1:], vertices[0]]):
            self.segment(p, q)

    def circle(self, center: Point, radius: float) -> None:
        self.shapes.append(("circle", (center, radius)))
        self.extent += [center + radius * d for d in (1, 1j, -1, -1j)]

    def dot(self, p: Point) -> None:
        self.shapes.append(("dot", (p,)))

    def name(self, label: str, p: Point, away_from: Point) -> None:
        """Label the point ``p`` on the side away from ``away_from``."""
        self.points[label] = p
        self.shapes.append(("text", (p, label, _unit(p - away_from), 10)))

    def side(self, p: Point, q: Point, label: str, away_from: Point) -> None:
        """Label the segment ``pq`` at its middle, on the side away from ``away_from``."""
        normal = _unit((q - p) * 1j)
        if ((away_from - p) * normal.conjugate()).real > 0:
            normal = -normal
        self.shapes.append(("text", ((p + q) / 2, label, normal, 10)))

    def angle(
        self,
        vertex: Point,
        a: Point,
        b: Point,
        label: str | None = None,
        right: bool = False,
        ccw: bool = False,
    ) -> None:
        """Mark the angle between the rays ``vertex->a`` and ``vertex->b``: an arc over the smaller angle
        (``ccw``: counterclockwise from ``a`` to ``b``, which may be reflex), or a square if ``right``."""
        self.shapes.append(("angle", (vertex, a, b, label, right, ccw)))

    def ticks(self, p: Point, q: Point, count: int = 1) -> None:
        """Equal-length marks across the middle of ``pq``."""
        self.shapes.append(("ticks", (p, q, count)))

    def arrows(self, p: Point, q: Point, count: int = 1, at: float = 0.3) -> None:
        """Parallel-line marks (chevrons pointing from ``p`` to ``q``) at the fraction ``at`` of ``pq``."""
        self.shapes.append(("arrows", (p, q, count, at)))

    def render(self, size: int = IMAGE_SIZE) -> bytes:
        from PIL import Image, ImageDraw, ImageFont

        xs, ys = [p.real for p in self.extent], [p.imag for p in self.extent]
        span = max(max(xs) - min(xs), max(ys) - min(ys), 1e-9)
        scale = (size - 2 * self.MARGIN) / span
        cx, cy = (max(xs) + min(xs)) / 2, (max(ys) + min(ys)) / 2

        def px(p: Point) -> complex:  # pixel coordinates as a complex number (y down)
            return complex(size / 2 + (p.real - cx) * scale, size / 2 - (p.imag - cy) * scale)

        image = Image.new("RGB", (size, size), "white")
        draw = ImageDraw.Draw(image)
        font = ImageFont.load_default(size=17)

        def xy(z: complex) -> tuple[float, float]:
            return (round(z.real, 2), round(z.imag, 2))

        def line(a: complex, b: complex, width: int = 2) -> None:
            draw.line([xy(a), xy(b)], fill=self.INK, width=width)

        def text(anchor: complex, label: str, direction: complex, gap: float) -> None:
            left, top, right, bottom = draw.textbbox((0, 0), label, font=font, anchor="mm")
            w, h = right - left, bottom - top
            reach = gap + 0.5 * (abs(direction.real) * w + abs(direction.imag) * h) + 2
            draw.text(xy(anchor + direction * reach), label, font=font, fill=self.LABEL, anchor="mm")

        for kind, args in self.shapes:
            if kind == "segment":
                a, b, dashed = px(args[0]), px(args[1]), args[2]
                if not dashed:
                    line(a, b)
                    continue
                length, step = abs(b - a), 9.0
                for k in range(int(length // step) + 1):
                    start = a + (b - a) * (k * step / length)
                    stop = a + (b - a) * (min(k * step + 5.0, length) / length)
                    line(start, stop, 1)
            elif kind == "circle":
                c, r = px(args[0]), args[1] * scale
                draw.ellipse([xy(c - complex(r, r)), xy(c + complex(r, r))], outline=self.INK, width=2)
            elif kind == "dot":
                c = px(args[0])
                draw.ellipse([xy(c - (3 + 3j)), xy(c + (3 + 3j))], fill=self.INK)
            elif kind == "text":
                p, label, direction, gap = args
                text(px(p), label, complex(direction.real, -direction.imag), gap)
            elif kind == "angle":
                vertex, a, b, label, right, ccw = args
                v = px(vertex)
                ua, ub = _unit(px(a) - v), _unit(px(b) - v)
                if right:
                    r = 12.0
                    draw.line([xy(v + r * ua), xy(v + r * (ua + ub)), xy(v + r * ub)], fill=self.INK, width=1)
                    continue
                r = 24.0
                # Pillow sweeps clockwise on screen, which is counterclockwise in the plane reversed.
                start, end = math.degrees(cmath.phase(ua)), math.degrees(cmath.phase(ub))
                if ccw or (end - start) % 360 > 180:
                    start, end = end, start
                draw.arc([xy(v - complex(r, r)), xy(v + complex(r, r))], start, end, fill=self.INK, width=1)
                if label:
                    sweep = (end - start) % 360
                    middle = math.radians(start + sweep / 2)
                    # A narrow angle's label goes further out, clear of the two rays.
                    text(v, label, cmath.exp(1j * middle), r + 2 + max(0.0, 45 - sweep) * 0.6)
            elif kind == "ticks":
                a, b, count = px(args[0]), px(args[1]), args[2]
                u = _unit(b - a)
                for k in range(count):
                    m = (a + b) / 2 + u * 5 * (k - (count - 1) / 2)
                    line(m - 7j * u, m + 7j * u)
            elif kind == "arrows":
                a, b, count, at = px(args[0]), px(args[1]), args[2], args[3]
                u = _unit(b - a)
                for k in range(count):
                    tip = a + (b - a) * at + u * 7 * k
                    for side in (1, -1):
                        line(tip, tip - 8 * u * cmath.exp(1j * side * math.radians(35)))
        buffer = io.BytesIO()
        image.save(buffer, format="PNG", compress_level=6)
        return buffer.getvalue()


def _unit(z: complex) -> complex:
    return z / abs(z) if abs(z) > 1e-12 else 0j


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
# A problem maker draws on a Figure and returns (question, answer, givens, facts): the answer in LaTeX,
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


class _Problems:
    """Problem ``i`` of a level, generated (and drawn) on demand."""

    def __init__(self, level: str, seed: int, image_size: int, size: int = 2**31):
        self.level, self.seed, self.image_size, self.size = level, seed, image_size, size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> dict[str, Any]:
        return make_problem(self.level, self.seed, index, self.image_size)


# ---- the envs --------------------------------------------------------------------------------------
class _VisualMath(MathEnv):
    """Shared by both envs: a ``MultimodalObservation`` prompt; degree signs are read as degrees."""

    image_key = "images"

    def _prompt(self, example: Any) -> MultimodalObservation:
        images = example[self.image_key]
        if images is None:
            images = []
        elif not isinstance(images, (list, tuple)):
            images = [images]
        # Geometry3K marks the figure with an <image> tag: the chat form places the image itself.
        text = str(example[self.question_key]).replace("<image>", "").strip()
        return MultimodalObservation(
            f"{text}\n{self.instruction}".strip(), tuple(png_bytes(im) for im in images)
        )

    def _grade(self, action: str) -> tuple[float, str, dict[str, Any]]:
        return super()._grade(action.replace(DEGREE, "^{\\circ}"))


class GeometryFiguresEnv(_VisualMath):
    """Generated geometry problems with one figure each (see the module docstring)."""

    def __init__(
        self,
        level: str = "mixed",
        problem_seed: int = 0,
        describe: bool = False,
        image_size: int = IMAGE_SIZE,
        instruction: str = INSTRUCTION,
        grade_timeout: float = GRADE_TIMEOUT,
    ):
        if level not in LEVELS:
            raise ValueError(f"level is one of {LEVELS}, got {level!r}")
        DatasetEnv.__init__(self, _Problems(level, problem_seed, image_size))
        self.question_key, self.answer_key = "problem", "answer"
        self.instruction, self.grade_timeout = instruction, grade_timeout
        self.describe = describe

    def _prompt(self, example: Any) -> MultimodalObservation:
        obs = super()._prompt(example)
        if not self.describe:
            return obs
        return MultimodalObservation(f"{example['givens']}\n{obs.text}", obs.images)

    def _random_answer(self) -> str:
        return f"The answer is \\boxed{{{self.action_rng.randint(1, 180)}}}."


class VisualMathEnv(_VisualMath):
    """Math problems with images from a dataset (``math:Geometry3K``): ``image_key`` holds one image
    or a list (PIL images, ``datasets`` image dicts, encoded bytes or paths)."""

    def __init__(self, *args: Any, image_key: str = "images", **kwargs: Any):
        super().__init__(*args, **kwargs)
        if image_key not in self.examples[0]:
            raise KeyError(f"the examples have no {image_key!r} field (they have {sorted(self.examples[0])})")
        self.image_key = image_key


def _register() -> None:
    for suffix, level in (("-easy", "easy"), ("-hard", "hard"), ("", "mixed")):
        register(
            f"math:GeometryFigures-v0{suffix}",
            "gem_core.envs.geometry:GeometryFiguresEnv",
            description=f"generated geometry problems with a figure ({level}); image observations",
            multi_turn=False,
            level=level,
        )
    register(
        "math:Geometry3K",
        "gem_core.envs.geometry:VisualMathEnv",
        description="axon-rl/geometry3k (train): geometry problems with figures; image observations",
        multi_turn=False,
        data_source="hub",
        dataset_name="axon-rl/geometry3k",
        split="train",
        image_key="images",
    )


_register()
