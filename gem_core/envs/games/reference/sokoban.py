"""Sokoban as the reference GEM (``gem-llm`` 0.1.0, Apache-2.0) plays it.

Push all ``num_boxes`` boxes onto targets in a ``dim_room`` room. Move: ``\\boxed{up}``, ``down``,
``left`` or ``right`` (any case). Board: ``#`` wall, ``_`` floor, ``O`` target, ``X`` box, ``√`` box
on a target, ``P`` player. The room is held as the reference holds it: ``room_fixed`` (0 wall,
1 floor, 2 target) and ``room_state`` (the same plus 3 box on target, 4 box, 5 player).

| event                                       | reward | episode |
|---------------------------------------------|--------|---------|
| the move that puts the last box on target   | 1.0    | ends (terminated) |
| another move (or push)                      | 0.0    | goes on |
| into a wall, or a box against a wall or box | 0.0    | goes on |
| unreadable move                             | -0.1   | ends (terminated) |
| turns run out                               | (boxes shown on target) / num_boxes | ends (terminated and truncated) |

``-random``: (dim_room, num_boxes, max_turns) drawn from ((6, 6), 2, 20), ((8, 8), 5, 50).

Levels: the reference makes them with its own generator (a random-walk room, then a depth-first
reverse play), seeded with the reset seed and separate from the stream the rest of the game draws
from. Here the level comes from ``gem_core``'s own reverse-play generator
(``gem_core.envs.games.sokoban``) with the same room size, box count and turn budget, so a seed gives
a different level than the reference's (the rules text and everything after the level are the same);
``set_room`` loads any level, e.g. the reference's, and ``tests/compat`` aligns the two that way.

Reference behaviour kept as is (bugs): every box starts drawn as ``X``, even one standing on a
target, and such a box does not count as placed until it is pushed off and back on.
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
    rows_key,
)
from gem_core.envs.games.sokoban import SokobanEnv as LevelGenerator

_MOVE = re.compile(r"\\boxed\{(up|down|left|right)\}", re.IGNORECASE)
DIRECTIONS = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
WALL, FLOOR, TARGET, BOX_ON_TARGET, BOX, PLAYER = range(6)
SYMBOLS = {WALL: "#", FLOOR: "_", TARGET: "O", BOX_ON_TARGET: "√", BOX: "X", PLAYER: "P"}


class SokobanEnv(ReferenceGame):
    def __init__(
        self,
        dim_room: tuple[int, int] | None = (6, 6),
        max_turns: int | None = 100,
        num_boxes: int | None = 3,
    ):
        self.dim_room, self.max_turns, self.num_boxes = dim_room, max_turns, num_boxes
        self._is_random = dim_room is None or max_turns is None or num_boxes is None

    def _draw_settings(self) -> None:
        if self._is_random:
            self.dim_room, self.num_boxes, self.max_turns = self.rng.choice(
                [((6, 6), 2, 20), ((8, 8), 5, 50)]
            )

    def _new_game(self) -> None:
        # The reference draws the rules' example from the shared stream and the level from its own.
        self._rules_example = self._example(self.rng)
        rows, cols = self.dim_room
        level = LevelGenerator(rows=rows, cols=cols, num_boxes=self.num_boxes, max_turns=self.max_turns)
        level.reset(seed=self.rng.getrandbits(63))
        fixed = [
            [
                (TARGET if (r, c) in level.targets else FLOOR) if (r, c) in level.floor else WALL
                for c in range(cols)
            ]
            for r in range(rows)
        ]
        state = [row[:] for row in fixed]
        for r, c in level.boxes:
            state[r][c] = BOX
        state[level.player[0]][level.player[1]] = PLAYER
        self.set_room(fixed, state)

    def set_room(self, room_fixed: list[list[int]], room_state: list[list[int]]) -> None:
        """Play this level next: the reference's two grids (e.g. ``reference_env.room_state.tolist()``)."""
        self.room_fixed = [list(map(int, row)) for row in room_fixed]
        self.room_state = [list(map(int, row)) for row in room_state]
        self.dim_room = (len(self.room_state), len(self.room_state[0]))
        self.player_position = next(
            (r, c) for r, row in enumerate(self.room_state) for c, v in enumerate(row) if v == PLAYER
        )

    def _instructions(self) -> str:
        direction = self._rules_example[len("\\boxed{") : -1]
        return (
            "You are solving the Sokoban puzzle. You are the player and you need to push all boxes to targets.\n"
            "When you are right next to a box, you can push it by moving in the same direction.\n"
            "You cannot push a box through a wall or another box, and you cannot pull a box.\n"
            f"you have to complete the puzzle within {self.max_turns} turns.\n"
            "On the board, objects are represented as:\n"
            "- The player (you) appears as 'P'\n"
            "- Walls are represented with '#'\n"
            "- Boxes are marked as 'X'\n"
            "- Empty goals are shown with 'O'\n"
            "- Boxes on goals are visualized with '√'\n"
            "- Empty floor is shown as '_'\n\n"
            "To submit your move, type the command in \\boxed{}.\n"
            f"For example: {self._rules_example} to move {direction}.\n"
            "Use logic and deduction to push all boxes onto the target positions!"
        )

    def get_task_suffix(self) -> str:
        board = "".join(" ".join(SYMBOLS[v] for v in row) + "\n" for row in self.room_state)
        return f"Here is the current board layout:\n{board}\nEnter your move."

    def _parse(self, action: str) -> str | None:
        match = last_match(_MOVE, action)
        return None if match is None else match.group(1).lower()

    def _format_error_text(self) -> str:
        return f"At turn {self.turn_count}, your submitted action is not valid."

    def _cell(self, r: int, c: int) -> int | None:
        rows, cols = self.dim_room
        return self.room_state[r][c] if 0 <= r < rows and 0 <= c < cols else None

    def _play(self, move: str) -> tuple[str, float, bool]:
        (r, c), (dr, dc) = self.player_position, DIRECTIONS[move]
        ahead, behind = self._cell(r + dr, c + dc), self._cell(r + 2 * dr, c + 2 * dc)
        pushes = ahead in (BOX, BOX_ON_TARGET)
        if ahead in (None, WALL) or (pushes and behind not in (FLOOR, TARGET)):
            return (
                f"At turn {self.turn_count}, you cannot move {move} - you would collide with wall or other boxes!",
                INVALID_ACTION_REWARD,
                False,
            )
        if pushes:
            self.room_state[r + 2 * dr][c + 2 * dc] = (
                BOX_ON_TARGET if self.room_fixed[r + 2 * dr][c + 2 * dc] == TARGET else BOX
            )
        self.room_state[r][c] = self.room_fixed[r][c]
        self.room_state[r + dr][c + dc] = PLAYER
        self.player_position = (r + dr, c + dc)
        if self._boxes_on_target() == self.num_boxes:
            return "Congratulations! You have solved the Sokoban puzzle!", SUCCESS_REWARD, True
        pushed = "pushed a box while you " if pushes else ""
        return f"At turn {self.turn_count}, you {pushed}moved {move}.", INTERNAL_STEP_REWARD, False

    def _boxes_on_target(self) -> int:
        return sum(row.count(BOX_ON_TARGET) for row in self.room_state)

    def _out_of_turns(self, move: Any, reward: float) -> tuple[str, float]:
        return MAX_TURNS_TEXT, SUCCESS_REWARD * (self._boxes_on_target() / self.num_boxes)

    def state_key(self) -> tuple:
        """The room's walls and targets and its boxes and player."""
        return (rows_key(self.room_fixed), rows_key(self.room_state))

    def _example(self, rng: Any) -> str:
        return f"\\boxed{{{rng.choice(list(DIRECTIONS))}}}"
