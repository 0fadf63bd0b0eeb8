"""The geometry envs: generated problems with figures, and image math datasets such as Geometry3K."""

from __future__ import annotations

from typing import Any

from gem_core.envs import grading
from gem_core.envs.dataset import DatasetEnv
from gem_core.envs.geometry.figures import DEGREE, IMAGE_SIZE
from gem_core.envs.geometry.problems import LEVELS, make_problem
from gem_core.envs.math import GRADE_TIMEOUT, INSTRUCTION, MathEnv, require_math_verify
from gem_core.envs.math import WARMUP as MATH_WARMUP
from gem_core.extras import require
from gem_core.observation import MultimodalObservation, png_bytes


def require_pillow() -> None:
    require("PIL", package="pillow", extra="vision", needed_by="math envs with figures")


class _Problems:
    """Problem ``i`` of a level, generated (and drawn) on demand."""

    def __init__(self, level: str, seed: int, image_size: int, size: int = 2**31):
        self.level, self.seed, self.image_size, self.size = level, seed, image_size, size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> dict[str, Any]:
        return make_problem(self.level, self.seed, index, self.image_size)


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
        require_pillow()
        require_math_verify()
        DatasetEnv.__init__(self, _Problems(level, problem_seed, image_size))
        self.question_key, self.answer_key = "problem", "answer"
        self.instruction, self.grade_timeout = instruction, grade_timeout
        self.describe = describe
        grading.warm_up(MATH_WARMUP)

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
        require_pillow()
        super().__init__(*args, **kwargs)
        if image_key not in self.examples[0]:
            raise KeyError(f"the examples have no {image_key!r} field (they have {sorted(self.examples[0])})")
        self.image_key = image_key
