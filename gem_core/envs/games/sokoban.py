"""Sokoban: push every box onto a target. You can push one box at a time and never pull.

Levels are made by reverse play, so each one is solvable within the turn budget: a room of
``rows x cols`` (walls all round, a few random inner walls, the floor kept connected) gets
``num_boxes`` targets with a box on each; then the player walks ``K`` random steps backwards,
*pulling* any box it walks away from, with ``K`` drawn from ``[ceil(max_turns / 2), max_turns]``.
Replaying that walk forwards (each pull becomes a push) solves the level in ``K <= max_turns`` moves.
Of a few such walks the one leaving the most boxes off their targets, then moved the farthest, is kept;
at least one box always starts off target.

A move is ``up``, ``down``, ``left`` or ``right`` (or ``u``/``d``/``l``/``r``). With ``N`` boxes and ``p``
the fraction of boxes on targets:

| event                                             | reward                       |
|---------------------------------------------------|------------------------------|
| push that puts a box on a target                  | +0.5 / N                     |
| push that takes a box off a target                | -0.5 / N                     |
| other legal move                                  |  0.0                         |
| push that puts the last box on target (episode ends) | +0.5 / N + 1.0           |
| walking into a wall, pushing a box into a wall or another box, unknown direction | -0.1 |
| no ``\\boxed{}`` in the reply                     | -0.1                         |
| turns run out                                     | +0.5 * p (partial credit)    |

The box rewards telescope, so a level solved without mistakes returns exactly
``1.0 + 0.5 * (1 - p0)``, ``p0`` being the fraction of boxes on targets at the start.
``solve_action`` plans with weighted A* over (player, boxes) states, lowering the weight down to
exact A* until the plan fits the turns left.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from typing import Any

from gem_core.envs.games.base import INVALID_MOVE_PENALTY, GameEnv
from gem_core.envs.games.ids import register_game

PROGRESS_REWARD = 0.5
PARTIAL_CREDIT = 0.5
SUCCESS_REWARD = 1.0
REVERSE_WALKS = 20  # candidate levels per room; the best is kept
MAX_ROOMS = 1_000
PULL_BIAS = 0.8  # chance that a reverse step prefers a direction that pulls a box
DIRECTIONS = {"up": (-1, 0), "down": (1, 0), "left": (0, -1), "right": (0, 1)}
_ALIASES = {d[0]: d for d in DIRECTIONS}

Cell = tuple[int, int]


def _step(cell: Cell, direction: str, times: int = 1) -> Cell:
    dr, dc = DIRECTIONS[direction]
    return cell[0] + times * dr, cell[1] + times * dc


class SokobanEnv(GameEnv):
    def __init__(
        self,
        rows: int = 8,
        cols: int = 8,
        num_boxes: int = 4,
        max_turns: int = 50,
        reward_type: str = "dense",
    ):
        super().__init__(max_turns, reward_type)
        if rows < 5 or cols < 5:
            raise ValueError("rows and cols must be at least 5 (the outer wall takes two of each)")
        if not 1 <= num_boxes <= (rows - 2) * (cols - 2) // 3:
            raise ValueError("num_boxes must be at least 1 and leave room to move")
        self.rows, self.cols, self.num_boxes = rows, cols, num_boxes
        self.floor: frozenset[Cell] = frozenset()
        self.targets: frozenset[Cell] = frozenset()
        self.boxes: frozenset[Cell] = frozenset()
        self.player: Cell = (1, 1)

    # ---- level generation ----------------------------------------------------------------------
    def _new_game(self) -> str:
        best_score, level = (0, 0), None
        for _ in range(MAX_ROOMS):
            floor = self._random_room()
            targets = self.rng.sample(sorted(floor), self.num_boxes)
            for _ in range(REVERSE_WALKS):
                boxes, player = self._reverse_walk(floor, targets)
                off_target = sum(b not in targets for b in boxes)
                score = (off_target, sum(abs(b[0] - t[0]) + abs(b[1] - t[1]) for b, t in zip(boxes, targets)))
                if off_target and score > best_score:
                    best_score, level = score, (floor, targets, boxes, player)
            if level is not None:
                break
        else:
            raise RuntimeError(
                f"no {self.rows}x{self.cols} level with {self.num_boxes} boxes came out: use a bigger room"
            )
        floor, targets, boxes, self.player = level
        self.floor, self.targets, self.boxes = frozenset(floor), frozenset(targets), frozenset(boxes)
        return (
            "You are playing Sokoban. You are the player and must push every box onto a target. Each turn you "
            "move one step up, down, left or right. Walking into a box pushes it one step the same way, if "
            "the cell behind it is free floor; you cannot pull boxes, push two boxes at once, or walk through "
            "walls. Board symbols: # wall, _ floor, O target, X box, * box on a target, P you, + you standing "
            "on a target.\n"
            "Reply with your move inside \\boxed{}, e.g. \\boxed{left}.\n"
            f"{self.render()}"
        )

    def _random_room(self) -> set[Cell]:
        floor = {(r, c) for r in range(1, self.rows - 1) for c in range(1, self.cols - 1)}
        cells = sorted(floor)
        for _ in range(self.rng.randint(0, len(cells) // 8)):
            wall = self.rng.choice(cells)
            if wall in floor and len(floor) > 3 * self.num_boxes + 2 and _connected(floor - {wall}):
                floor.discard(wall)
        return floor

    def _reverse_walk(self, floor: set[Cell], targets: list[Cell]) -> tuple[list[Cell], Cell]:
        """Walk backwards from the solved position, pulling boxes; return (boxes, player) at the end."""
        boxes = list(targets)
        player = self.rng.choice(sorted(floor - set(boxes)))
        for _ in range(self.rng.randint(math.ceil(self.max_turns / 2), self.max_turns)):
            options = [d for d in DIRECTIONS if _step(player, d) in floor and _step(player, d) not in boxes]
            if not options:
                break
            pulls = [d for d in options if _step(player, d, -1) in boxes]
            direction = self.rng.choice(pulls if pulls and self.rng.random() < PULL_BIAS else options)
            behind = _step(player, direction, -1)
            if behind in boxes:
                boxes[boxes.index(behind)] = player
            player = _step(player, direction)
        return boxes, player

    # ---- playing -------------------------------------------------------------------------------
    def render(self) -> str:
        lines = []
        for r in range(self.rows):
            row = []
            for c in range(self.cols):
                cell = (r, c)
                if cell not in self.floor:
                    row.append("#")
                elif cell == self.player:
                    row.append("+" if cell in self.targets else "P")
                elif cell in self.boxes:
                    row.append("*" if cell in self.targets else "X")
                else:
                    row.append("O" if cell in self.targets else "_")
            lines.append(" ".join(row))
        return "Board:\n" + "\n".join(lines)

    def progress(self) -> float:
        return len(self.boxes & self.targets) / self.num_boxes

    def _play(self, move: str) -> tuple[str, float, bool, dict[str, Any]]:
        word = move.strip().lower()
        direction = _ALIASES.get(word, word)
        if direction not in DIRECTIONS:
            return self._invalid(f"'{move[:40]}' is not a direction: use up, down, left or right.")
        ahead = _step(self.player, direction)
        if ahead not in self.floor:
            return self._invalid(f"Moving {direction} walks into a wall.")
        if ahead not in self.boxes:
            self.player = ahead
            return f"You moved {direction}.\n{self.render()}", 0.0, False, {}
        beyond = _step(ahead, direction)
        if beyond not in self.floor or beyond in self.boxes:
            blocker = "a wall" if beyond not in self.floor else "another box"
            return self._invalid(f"The box {direction} of you cannot move: {blocker} is behind it.")
        before = self.progress()
        self.boxes = (self.boxes - {ahead}) | {beyond}
        self.player = ahead
        reward = PROGRESS_REWARD * (self.progress() - before)
        if self.boxes == self.targets:
            text = f"You pushed the last box onto a target: solved!\n{self.render()}"
            return text, reward + SUCCESS_REWARD, True, {"success": True}
        where = "onto a target" if beyond in self.targets else "off a target" if ahead in self.targets else ""
        text = f"You pushed a box {direction}{' ' + where if where else ''}.\n{self.render()}"
        return text, reward, False, {}

    def _invalid(self, why: str) -> tuple[str, float, bool, dict[str, Any]]:
        return f"Invalid move. {why}\n{self.render()}", INVALID_MOVE_PENALTY, False, {"invalid_move": True}

    def _final_reward(self) -> float:
        return PARTIAL_CREDIT * self.progress()

    def state_key(self) -> tuple:
        """The room (floor and targets), the boxes and the player."""
        return (
            tuple(sorted(self.floor)),
            tuple(sorted(self.targets)),
            tuple(sorted(self.boxes)),
            self.player,
        )

    def _random_move(self) -> str:
        return self.action_rng.choice(sorted(DIRECTIONS))

    def _legal_moves(self) -> list[str]:
        """The directions that move the player (onto free floor, or pushing a box onto free floor)."""

        def moves(direction: str) -> bool:
            dr, dc = DIRECTIONS[direction]
            ahead = (self.player[0] + dr, self.player[1] + dc)
            beyond = (ahead[0] + dr, ahead[1] + dc)
            return ahead in self.floor and (
                ahead not in self.boxes or (beyond in self.floor and beyond not in self.boxes)
            )

        return [d for d in sorted(DIRECTIONS) if moves(d)]

    def solve_action(self) -> str:
        """The next move of a plan that fits the turns left (plans are cached per position)."""
        key = (self.floor, self.targets, self.boxes, self.player)
        plan = _PLANS.get(key)
        turns_left = self.max_turns - self.turn
        if plan is None or len(plan) > turns_left:
            if len(_PLANS) > 10_000:
                _PLANS.clear()
            for weight in SEARCH_WEIGHTS:
                plan = solve(self.floor, self.targets, self.boxes, self.player, weight) or []
                if len(plan) <= turns_left:
                    break
            boxes, player = self.boxes, self.player
            for i, d in enumerate(plan):
                _PLANS[(self.floor, self.targets, boxes, player)] = plan[i:]
                ahead = _step(player, d)
                if ahead in boxes:
                    boxes = (boxes - {ahead}) | {_step(ahead, d)}
                player = ahead
        return f"\\boxed{{{plan[0] if plan else 'up'}}}"


def _connected(floor: set[Cell]) -> bool:
    start = next(iter(floor))
    seen, queue = {start}, deque([start])
    while queue:
        cell = queue.popleft()
        for d in DIRECTIONS:
            nxt = _step(cell, d)
            if nxt in floor and nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return len(seen) == len(floor)


# ---- the scripted player: weighted A* over (player, boxes) ---------------------------------------
SEARCH_WEIGHTS = (2.0, 1.0)  # tried in order until the plan fits the turns left; 1.0 is exact A*

State = tuple[Cell, frozenset[Cell]]


def _push_distances(floor: frozenset[Cell], targets: frozenset[Cell]) -> dict[Cell, int]:
    """Fewest pushes that bring a box from each cell to some target, ignoring other boxes.

    Cells missing from the result are dead: a box there can never reach a target.
    """
    dist = dict.fromkeys(targets, 0)
    queue = deque(targets)
    while queue:
        cell = queue.popleft()
        for d in DIRECTIONS:
            # Pulling the box from ``cell`` one step in ``d`` needs the player two steps that way.
            box, player = _step(cell, d), _step(cell, d, 2)
            if box in floor and player in floor and box not in dist:
                dist[box] = dist[cell] + 1
                queue.append(box)
    return dist


def solve(
    floor: frozenset[Cell], targets: frozenset[Cell], boxes: frozenset[Cell], player: Cell, weight: float
) -> list[str] | None:
    """A move list that puts every box on a target (shortest when ``weight`` is 1); None if there is none."""
    push = _push_distances(floor, targets)

    def h(state: State) -> float:
        player, boxes = state
        if boxes == targets:
            return 0
        reach = min(abs(player[0] - b[0]) + abs(player[1] - b[1]) for b in boxes) - 1
        return sum(push[b] for b in boxes) + reach

    start: State = (player, boxes)
    if any(b not in push for b in boxes):
        return None
    frontier = [(weight * h(start), 0, 0, start)]
    came_from: dict[State, tuple[State, str] | None] = {start: None}
    cost = {start: 0}
    tie = 0
    while frontier:
        _, g, _, state = heapq.heappop(frontier)
        if g > cost[state]:
            continue
        player, boxes = state
        if boxes == targets:
            path = []
            while (step := came_from[state]) is not None:
                state, direction = step
                path.append(direction)
            return path[::-1]
        for d in DIRECTIONS:
            ahead = _step(player, d)
            if ahead not in floor:
                continue
            child_boxes = boxes
            if ahead in boxes:
                beyond = _step(ahead, d)
                if beyond not in push or beyond in boxes:  # a wall, a box, or a dead cell
                    continue
                child_boxes = (boxes - {ahead}) | {beyond}
            child = (ahead, child_boxes)
            if g + 1 < cost.get(child, math.inf):
                cost[child], came_from[child] = g + 1, (state, d)
                tie += 1
                heapq.heappush(frontier, (g + 1 + weight * h(child), g + 1, tie, child))
    return None


_PLANS: dict[tuple[Any, ...], list[str]] = {}  # position -> the rest of a plan through it


register_game(
    "Sokoban",
    SokobanEnv,
    {
        "easy": {"rows": 6, "cols": 6, "num_boxes": 2, "max_turns": 20},
        "hard": {"rows": 8, "cols": 8, "num_boxes": 4, "max_turns": 50},
    },
)
