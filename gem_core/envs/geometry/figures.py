"""The figures of the geometry problems: drawing primitives in plane coordinates, rendered with Pillow
(the same figure gives byte-identical PNGs)."""

from __future__ import annotations

import cmath
import io
import math
from collections.abc import Sequence
from typing import Any

IMAGE_SIZE = 384  # pixels, square
DEGREE = "°"

Point = complex  # plane coordinates, y up


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
