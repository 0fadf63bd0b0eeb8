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

Modules: ``figures`` (drawing, rendering), ``problems`` (one maker per question kind, ``make_problem``)
and ``env`` (the envs); every name is importable from ``gem_core.envs.geometry`` itself.
"""

from gem_core.envs.geometry.env import GeometryFiguresEnv, VisualMathEnv
from gem_core.envs.geometry.figures import DEGREE, IMAGE_SIZE, Figure, Point
from gem_core.envs.geometry.problems import (
    EASY,
    FIND_ANGLE,
    HARD,
    LEVELS,
    POLYGON_NAMES,
    REGULAR,
    RELATIONS,
    SECTOR_ANGLES,
    TRIPLES,
    Made,
    angle_algebra,
    angle_sum,
    circle_derived,
    circle_measure,
    exterior_angle,
    inscribed_angle,
    isosceles_base_angle,
    make_problem,
    parallel_algebra,
    parallel_angle,
    polygon_angle_sum,
    polygon_area,
    rectangle_measure,
    regular_polygon_angle,
    right_hypotenuse,
    right_triangle_side,
)
from gem_core.registry import register

__all__ = [
    "DEGREE",
    "EASY",
    "FIND_ANGLE",
    "HARD",
    "IMAGE_SIZE",
    "LEVELS",
    "POLYGON_NAMES",
    "REGULAR",
    "RELATIONS",
    "SECTOR_ANGLES",
    "TRIPLES",
    "Figure",
    "GeometryFiguresEnv",
    "Made",
    "Point",
    "VisualMathEnv",
    "angle_algebra",
    "angle_sum",
    "circle_derived",
    "circle_measure",
    "exterior_angle",
    "inscribed_angle",
    "isosceles_base_angle",
    "make_problem",
    "parallel_algebra",
    "parallel_angle",
    "polygon_angle_sum",
    "polygon_area",
    "rectangle_measure",
    "regular_polygon_angle",
    "right_hypotenuse",
    "right_triangle_side",
]


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
