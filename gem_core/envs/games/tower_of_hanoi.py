"""TowerOfHanoi: move a stack of disks from peg A to peg C, one disk at a time, never a larger disk on a smaller one.

A move names the source and the destination peg, e.g. ``\\boxed{A C}`` (also ``a c``, ``A,C``,
``A->C``, ``A to C``). The board lists each peg bottom to top.

A disk is *in its final position* when it sits on C with exactly the disks larger than it below it
(C's stack, read from the bottom, starts ``n, n-1, ...`` down to that disk). Progress ``p`` is the
fraction of the ``n`` disks in their final position. Rewards (``n`` disks):

| event                                                   | reward                 |
|---------------------------------------------------------|------------------------|
| legal move that puts a disk into its final position     | +0.5 / n               |
| legal move that takes a disk out of its final position  | -0.5 / n               |
| other legal move                                        |  0.0                   |
| the move that completes the tower on C (episode ends)   | +0.5 / n + 1.0         |
| empty source peg, larger disk onto smaller, same peg, unknown peg | -0.1         |
| no ``\\boxed{}`` in the reply                           | -0.1                   |
| turns run out                                           | +0.5 * p (partial credit) |

The progress rewards are potential-based (they telescope), so moving a disk on and off C earns
nothing. A solved game with no mistakes returns exactly 1.5 (0.5 for the disks, 1.0 for the win).
The optimal solution takes ``2**n - 1`` moves (easy: 3 disks, 7 moves in 10 turns; hard: 5 disks,
31 moves in 35 turns); ``solve_action`` plays optimally from any legal position.
"""

from __future__ import annotations

import re
from typing import Any

from gem_core.envs.games.base import INVALID_MOVE_PENALTY, GameEnv
from gem_core.envs.games.ids import register_game

PEGS = "ABC"
SOURCE, TARGET = "A", "C"
PROGRESS_REWARD = 0.5  # paid out, in total, for getting every disk into its final position
PARTIAL_CREDIT = 0.5  # times the progress left on the board when the turns run out
SUCCESS_REWARD = 1.0

_MOVE = re.compile(r"(?:from\s+)?(?:peg\s+)?([abc])\s*(?:,|->|→|-|to|\s)?\s*(?:peg\s+)?([abc])")


class TowerOfHanoiEnv(GameEnv):
    def __init__(self, num_disks: int = 5, max_turns: int = 35, reward_type: str = "dense"):
        super().__init__(max_turns, reward_type)
        if num_disks < 1:
            raise ValueError("num_disks must be at least 1")
        self.num_disks = num_disks
        self.pegs: dict[str, list[int]] = {}

    def _new_game(self) -> str:
        # The puzzle itself is fixed; nothing is drawn from self.rng.
        self.pegs = {"A": list(range(self.num_disks, 0, -1)), "B": [], "C": []}
        optimal = 2**self.num_disks - 1
        return (
            f"You are playing Tower of Hanoi with {self.num_disks} disks, numbered 1 (smallest) to "
            f"{self.num_disks} (largest), on three pegs A, B and C. All disks start on peg A. Move the whole "
            "tower to peg C. Each turn you move the top disk of one peg onto another peg; a larger disk may "
            f"never be placed on a smaller one. The shortest solution takes {optimal} moves.\n"
            "Reply with the source and destination peg inside \\boxed{}, e.g. \\boxed{A C} moves the top "
            "disk of A onto C.\n"
            f"{self.render()}"
        )

    def render(self) -> str:
        """The pegs, each listed bottom to top."""
        lines = [
            f"{peg}: {' '.join(map(str, disks)) if disks else '(empty)'}" for peg, disks in self.pegs.items()
        ]
        return "Pegs (bottom to top):\n" + "\n".join(lines)

    def progress(self) -> float:
        """Fraction of disks in their final position on C."""
        in_place = 0
        for expected, disk in zip(range(self.num_disks, 0, -1), self.pegs[TARGET]):
            if disk != expected:
                break
            in_place += 1
        return in_place / self.num_disks

    def _play(self, move: str) -> tuple[str, float, bool, dict[str, Any]]:
        match = _MOVE.fullmatch(" ".join(move.lower().split()))
        if match is None:
            return self._invalid(f"'{move[:40]}' is not a move: name two pegs, e.g. A C.")
        src, dst = match.group(1).upper(), match.group(2).upper()
        if src == dst:
            return self._invalid(f"Source and destination are both peg {src}.")
        if not self.pegs[src]:
            return self._invalid(f"Peg {src} is empty: there is no disk to move.")
        disk = self.pegs[src][-1]
        if self.pegs[dst] and self.pegs[dst][-1] < disk:
            return self._invalid(
                f"Disk {disk} cannot go onto peg {dst}: its top disk {self.pegs[dst][-1]} is smaller."
            )
        before = self.progress()
        self.pegs[dst].append(self.pegs[src].pop())
        after = self.progress()
        reward = PROGRESS_REWARD * (after - before)
        if after == 1.0:
            text = f"You moved disk {disk} from {src} to {dst} and solved the puzzle!\n{self.render()}"
            return text, reward + SUCCESS_REWARD, True, {"success": True}
        return f"You moved disk {disk} from {src} to {dst}.\n{self.render()}", reward, False, {}

    def _invalid(self, why: str) -> tuple[str, float, bool, dict[str, Any]]:
        return f"Invalid move. {why}\n{self.render()}", INVALID_MOVE_PENALTY, False, {"invalid_move": True}

    def _final_reward(self) -> float:
        return PARTIAL_CREDIT * self.progress()

    def state_key(self) -> tuple:
        """The disks on each peg, bottom to top."""
        return tuple((peg, tuple(disks)) for peg, disks in sorted(self.pegs.items()))

    def _random_move(self) -> str:
        src, dst = self.action_rng.sample(PEGS, 2)
        return f"{src} {dst}"

    def _legal_moves(self) -> list[str]:
        """A top disk onto an empty peg or a larger disk."""
        pegs = self.pegs  # peg -> disks, bottom to top
        return [
            f"{a} {b}"
            for a in PEGS
            for b in PEGS
            if a != b and pegs[a] and (not pegs[b] or pegs[b][-1] > pegs[a][-1])
        ]

    def solve_action(self) -> str:
        """The optimal next move from the position on the board (any legal position, not just the start)."""
        peg_of = {disk: peg for peg, disks in self.pegs.items() for disk in disks}
        move = _next_move(peg_of, self.num_disks, TARGET)
        src, dst = move if move is not None else ("A", "B")
        return f"\\boxed{{{src} {dst}}}"


def _next_move(peg_of: dict[int, str], disk: int, goal: str) -> tuple[str, str] | None:
    """The first move of the shortest way to gather disks 1..disk on ``goal``; None if they already are."""
    if disk == 0:
        return None
    if peg_of[disk] == goal:
        return _next_move(peg_of, disk - 1, goal)
    spare = next(p for p in PEGS if p not in (peg_of[disk], goal))
    return _next_move(peg_of, disk - 1, spare) or (peg_of[disk], goal)


register_game(
    "TowerOfHanoi",
    TowerOfHanoiEnv,
    {
        "easy": {"num_disks": 3, "max_turns": 10},
        "hard": {"num_disks": 5, "max_turns": 35},
    },
    aliases=("TowerofHanoi",),
)
