"""The building blocks of the terminal tasks: word lists to draw file contents from, and the task record."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

WORDS = [
    "apple",
    "river",
    "stone",
    "cloud",
    "maple",
    "tiger",
    "ocean",
    "lemon",
    "pixel",
    "rocket",
    "amber",
    "cedar",
    "delta",
    "ember",
    "falcon",
    "glacier",
    "harbor",
    "island",
    "jasper",
    "kernel",
    "lantern",
    "meadow",
    "nectar",
    "orbit",
    "prism",
    "quartz",
    "raven",
    "saffron",
    "timber",
    "umbra",
    "velvet",
    "willow",
    "xenon",
    "yarrow",
    "zephyr",
]
FIRST_NAMES = [
    "ada",
    "alan",
    "barbara",
    "claude",
    "donald",
    "edsger",
    "frances",
    "grace",
    "john",
    "ken",
    "linus",
    "margaret",
    "niklaus",
]


def task(
    name: str,
    category: str,
    instruction: str,
    files: dict[str, str],
    checks: list[dict[str, Any]],
    solution: list[str],
) -> dict[str, Any]:
    """A task record in the format of ``gem_core.envs.terminal.tasks`` (guards are marked later)."""
    return {
        "name": name,
        "category": category,
        "instruction": instruction,
        "files": files,
        "checks": checks,
        "solution": solution,
    }


def lines(items: Iterable[object]) -> str:
    """The items as lines of text, each ending in a newline."""
    return "".join(f"{item}\n" for item in items)
