"""How the reference GEM's Crosswords and WordSearch lay words on a square grid (TextArena's method).

The grid is ``round(1.5 * longest word)`` cells a side, ``"."`` where no letter is. Words go in the
given order (longest first): the first one centred; each later one at a random position where it
crosses a placed word of the other direction on a shared letter (and fits), else at the first position
in reading order where it fits. A word that fits nowhere is left out.
"""

from __future__ import annotations

from typing import Any

EMPTY = "."
Grid = list[list[str]]
Placement = tuple[int, int, str]  # row, column, "across" | "down"


def lay_out(
    words: list[str], directions: dict[str, str], rng: Any, check_crossings: bool
) -> tuple[Grid, dict[str, Placement]]:
    """The grid and where each placed word starts. ``check_crossings`` (Crosswords) drops crossings that
    do not fit before shuffling them; WordSearch shuffles them all (the draws differ, the rule does not)."""
    size = round(max(len(w) for w in words) * 1.5)
    grid = [[EMPTY] * size for _ in range(size)]
    placed: dict[str, Placement] = {}
    for word in words:
        direction = directions[word]
        if not placed:
            row, col = (
                (size // 2, (size - len(word)) // 2)
                if direction == "across"
                else ((size - len(word)) // 2, size // 2)
            )
            candidates = [(row, col, direction)]
        else:
            candidates = _crossings(word, direction, grid, placed, check_crossings)
            rng.shuffle(candidates)
        spot = next((c for c in candidates if _fits(grid, word, c)), None)
        if spot is None:
            spot = next(
                (
                    (r, c, direction)
                    for r in range(size)
                    for c in range(size)
                    if _fits(grid, word, (r, c, direction))
                ),
                None,
            )
        if spot is not None:
            _write(grid, word, spot)
            placed[word] = spot
    return grid, placed


def cells(word: str, spot: Placement) -> list[tuple[int, int]]:
    row, col, direction = spot
    return [(row, col + i) if direction == "across" else (row + i, col) for i in range(len(word))]


def _fits(grid: Grid, word: str, spot: Placement) -> bool:
    row, col, direction = spot
    if (col if direction == "across" else row) + len(word) > len(grid):
        return False
    return all(grid[r][c] in (EMPTY, letter) for (r, c), letter in zip(cells(word, spot), word))


def _write(grid: Grid, word: str, spot: Placement) -> None:
    for (r, c), letter in zip(cells(word, spot), word):
        grid[r][c] = letter


def _crossings(
    word: str, direction: str, grid: Grid, placed: dict[str, Placement], check: bool
) -> list[Placement]:
    """Start positions where ``word`` (going ``direction``) shares a letter with a placed word going the other way."""
    found = []
    for other, (o_row, o_col, o_direction) in placed.items():
        if o_direction == direction:
            continue
        for i, letter in enumerate(word):
            for j, other_letter in enumerate(other):
                if letter != other_letter:
                    continue
                spot = (
                    (o_row - i, o_col + j, direction)
                    if o_direction == "across"
                    else (o_row + j, o_col - i, direction)
                )
                if (
                    0 <= spot[0] < len(grid)
                    and 0 <= spot[1] < len(grid)
                    and (not check or _fits(grid, word, spot))
                ):
                    found.append(spot)
    return found
