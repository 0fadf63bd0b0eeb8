"""Tower of Hanoi as the reference GEM (``gem-llm`` 0.1.0, Apache-2.0) plays it.

Move ``num_disks`` disks from tower A to tower C. Move: ``\\boxed{A C}`` (source and target tower;
``A``/``B``/``C`` in either case, an optional comma between).

| event                                  | reward | episode |
|----------------------------------------|--------|---------|
| the last disk arrives on C             | 1.0    | ends (terminated) |
| another legal move                     | 0.0    | goes on |
| from an empty tower, big on small      | 0.0    | goes on |
| unreadable move                        | -0.1   | ends (terminated) |
| turns run out                          | (disks on C) / num_disks | ends (terminated and truncated) |

``-random``: (num_disks, max_turns) drawn from (3, 10), (4, 20), (5, 35).

Reference behaviour kept as is (bugs): a move from a tower to itself (``\\boxed{A A}``) is legal and
counts as a move; the easy id gives 10 turns for a puzzle that needs 7, the hard one 35 for 31.
"""

from __future__ import annotations

import re
from typing import Any

from gem_core.envs.games.reference.base import (
    INTERNAL_STEP_REWARD,
    INVALID_ACTION_REWARD,
    MAX_TURNS_TEXT,
    SUCCESS_REWARD,
    ReferenceGame,
    last_match,
)

# The reference's pattern, ``\s*,?\s*`` between the towers, backtracks quadratically on a long run of
# spaces; ``\s*(?:,\s*)?`` matches the same texts in linear time.
_MOVE = re.compile(r"\\boxed{([ABCabc])\s*(?:,\s*)?([ABCabc])}")


class TowerofHanoiEnv(ReferenceGame):
    def __init__(self, num_disks: int | None = 3, max_turns: int | None = 100):
        self.num_disks, self.max_turns = num_disks, max_turns
        self._is_random = num_disks is None or max_turns is None

    def _draw_settings(self) -> None:
        if self._is_random:
            self.num_disks, self.max_turns = self.rng.choice([(3, 10), (4, 20), (5, 35)])

    def _new_game(self) -> None:
        self.board = {"A": list(range(self.num_disks, 0, -1)), "B": [], "C": []}

    def _instructions(self) -> str:
        return (
            f"You are playing Tower of Hanoi with {self.num_disks} disks.\n"
            "You have to move the disks from tower A to tower C.\n"
            "To move a disk, type the source tower and the target tower (e.g., '\\boxed{A C}').\n"
            "Note that you can only move the top disk of a tower, and that a bigger disk cannot be placed on "
            "a smaller disk.\n"
            "As you play, the history of your moves will be displayed.\n"
        )

    def get_task_suffix(self) -> str:
        board = "".join(f"{tower}: {disks}\n" for tower, disks in self.board.items())
        return f"Here is the current state of the tower of hanoi:\n{board}\nEnter your move."

    def _parse(self, action: str) -> tuple[str, str] | None:
        match = last_match(_MOVE, action)
        return None if match is None else (match.group(1).upper(), match.group(2).upper())

    def _format_error_text(self) -> str:
        return "You did not provide a valid action."

    def _play(self, move: tuple[str, str]) -> tuple[str, float, bool]:
        src, dst = move
        if not self.board[src]:
            return (
                f"At turn {self.turn_count}, you tried to move from tower {src}, which is empty.",
                INVALID_ACTION_REWARD,
                False,
            )
        if self.board[dst] and self.board[src][-1] > self.board[dst][-1]:
            return (
                f"At turn {self.turn_count}, you tried to move from tower {src} to tower {dst}, but the top disk "
                f"on tower {src} is larger than the top disk on tower {dst}.",
                INVALID_ACTION_REWARD,
                False,
            )
        disk = self.board[src].pop()
        self.board[dst].append(disk)
        if self.board["C"] == list(range(self.num_disks, 0, -1)):
            return "Congratulations! You solved the Tower of Hanoi Puzzle", SUCCESS_REWARD, True
        return (
            f"At turn {self.turn_count}, you moved disk {disk} from tower {src} to tower {dst}.",
            INTERNAL_STEP_REWARD,
            False,
        )

    def _out_of_turns(self, move: Any, reward: float) -> tuple[str, float]:
        return MAX_TURNS_TEXT, len(self.board["C"]) / self.num_disks

    def state_key(self) -> tuple:
        """The disks on each peg, bottom to top."""
        return tuple((peg, tuple(disks)) for peg, disks in sorted(self.board.items()))

    def _example(self, rng: Any) -> str:
        src, dst = rng.sample("ABC", 2)
        return f"\\boxed{{{src} {dst}}}"
