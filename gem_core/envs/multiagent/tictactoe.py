"""Tic-tac-toe for two agents, ``x`` and ``o`` (x moves first), and a minimax player.

A move is a free cell's number inside ``\\boxed{}`` (cells 1-9, left to right, top to bottom, shown
on the board). Each agent's observation shows the board and whose turn it is.

| event                                               | reward                                |
|-----------------------------------------------------|---------------------------------------|
| three in a row (the game ends)                      | +1 to the winner, -1 to the loser     |
| a full board without a line (the game ends)         | 0 to both                             |
| no ``\\boxed{}``, not a cell, or an occupied cell   | -0.1, and the same agent moves again  |
| a third invalid move in one game (the game ends)    | -1 to that agent (it forfeits), +1 to |
|                                                     | the other                             |

``minimax_policy`` reads only the observation text (the board and which mark it plays) and plays
perfectly: it never loses; ``solve_action`` is the same player on the env's board. Ids:
``multiagent:TicTacToe-v0`` (you are x against minimax as o), ``multiagent:TicTacToe-v0-random``
(against uniformly random moves).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from gem_core.envs.multiagent.core import MultiAgentEnv, MultiStepResult
from gem_core.envs.multiagent.single_agent import SingleAgentView
from gem_core.parsing import extract_boxed, preview

LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
INVALID_MOVE_PENALTY = -0.1
MAX_INVALID_MOVES = 3
_ROW = re.compile(r"^ (\S) \| (\S) \| (\S)$", re.MULTILINE)
_MARK = re.compile(r"You play (X|O)\.")


def winner(board: str) -> str | None:
    """``"x"``/``"o"`` if that mark has a line on ``board`` (9 chars of ``x``, ``o``, ``.``)."""
    for a, b, c in LINES:
        if board[a] != "." and board[a] == board[b] == board[c]:
            return board[a]
    return None


def render(board: str) -> str:
    cells = [str(i + 1) if mark == "." else mark.upper() for i, mark in enumerate(board)]
    rows = [f" {cells[r]} | {cells[r + 1]} | {cells[r + 2]}" for r in (0, 3, 6)]
    return "\n---+---+---\n".join(rows)


class TicTacToeEnv(MultiAgentEnv):
    turn_order = "sequential"

    def __init__(self):
        self.agents = ["x", "o"]
        self.board = "." * 9
        self.invalid = {"x": 0, "o": 0}

    def _reset(self) -> tuple[dict[str, str], dict[str, dict]]:
        self.board = "." * 9
        self.invalid = {"x": 0, "o": 0}
        return self._observations("New game."), {agent: {} for agent in self.agents}

    def _observations(self, event: str) -> dict[str, str]:
        board = render(self.board)
        observations = {}
        for agent in self.agents:
            if self.current_agent is None:
                status = "The game is over."
            elif self.current_agent == agent:
                status = "Your move: reply with the number of a free cell in \\boxed{}, e.g. \\boxed{5}."
            else:
                status = f"Waiting for {self.current_agent.upper()} to move."
            observations[agent] = f"{event}\nYou play {agent.upper()}.\n{board}\n{status}"
        return observations

    def _step(self, actions: dict[str, str]) -> MultiStepResult:
        agent = self.current_agent
        other = "o" if agent == "x" else "x"
        rewards = dict.fromkeys(self.agents, 0.0)
        done = False
        infos: dict[str, dict[str, Any]] = {a: {} for a in self.agents}
        move = extract_boxed(actions[agent])
        cell = int(move) - 1 if move is not None and move.strip() in list("123456789") else None
        if cell is None or self.board[cell] != ".":
            self.invalid[agent] += 1
            why = "is not a free cell" if cell is not None or move is not None else "has no \\boxed{} move"
            event = (
                f"{agent.upper()}'s move {preview(move if move is not None else actions[agent], 40)!r} {why}."
            )
            rewards[agent] = INVALID_MOVE_PENALTY
            infos[agent]["invalid_move"] = True
            if self.invalid[agent] >= MAX_INVALID_MOVES:
                event += f" That is {MAX_INVALID_MOVES} invalid moves: {agent.upper()} forfeits."
                rewards[agent], rewards[other], done = -1.0, 1.0, True
                infos[other]["success"] = True
        else:
            self.board = self.board[:cell] + agent + self.board[cell + 1 :]
            event = f"{agent.upper()} took cell {cell + 1}."
            if winner(self.board) == agent:
                event += f" {agent.upper()} wins!"
                rewards[agent], rewards[other], done = 1.0, -1.0, True
                infos[agent]["success"] = True
            elif "." not in self.board:
                event += " The board is full: a draw."
                done = True
            else:
                self.current_agent = other
        if done:
            self.current_agent = None
            for a in self.agents:
                infos[a].setdefault("success", False)
        terminations = dict.fromkeys(self.agents, done)
        return self._observations(event), rewards, terminations, dict.fromkeys(self.agents, False), infos

    def sample_legal_action(self, agent: str) -> str | None:
        free = [i + 1 for i, mark in enumerate(self.board) if mark == "."]
        return f"\\boxed{{{self.action_rng.choice(free)}}}" if free else None

    def solve_action(self, agent: str) -> str | None:
        """Minimax's move for ``agent`` on the board it is shown; None when it is not ``agent``'s turn."""
        if self.current_agent != agent:  # None once the game is over
            return None
        return f"\\boxed{{{_minimax(self.board, agent)[1] + 1}}}"

    def _random_action(self, agent: str) -> str:
        free = [i + 1 for i, mark in enumerate(self.board) if mark == "."] or [5]
        return f"\\boxed{{{self.action_rng.choice(free)}}}"


@functools.cache
def _minimax(board: str, me: str) -> tuple[int, int]:
    """``(value for me, best cell)`` with ``me`` to move; value +1 win, 0 draw, -1 loss."""
    other = "o" if me == "x" else "x"
    best = (-2, -1)
    for cell in range(9):
        if board[cell] != ".":
            continue
        after = board[:cell] + me + board[cell + 1 :]
        if winner(after) == me:
            value = 1
        elif "." not in after:
            value = 0
        else:
            value = -_minimax(after, other)[0]
        if value > best[0]:
            best = (value, cell)
    return best


def read_board(observation: str) -> tuple[str, str] | None:
    """``(board, my mark)`` from a tic-tac-toe observation; None if it shows no board."""
    rows = _ROW.findall(observation)
    mark = _MARK.search(observation)
    if len(rows) < 3 or mark is None:
        return None
    cells = [c for row in rows[-3:] for c in row]
    board = "".join(c.lower() if c in "XO" else "." for c in cells)
    return board, mark.group(1).lower()


def minimax_policy(observation: str) -> str:
    """A perfect player that reads the board from its observation."""
    found = read_board(observation)
    if found is None or "." not in found[0]:
        return "\\boxed{5}"
    board, me = found
    return f"\\boxed{{{_minimax(board, me)[1] + 1}}}"


def tictactoe(opponent: str = "minimax", play_as: str = "x") -> SingleAgentView:
    """One side of tic-tac-toe as an Env; the other side is ``"minimax"`` or ``"random"``."""
    if opponent not in ("minimax", "random") or play_as not in ("x", "o"):
        raise ValueError("opponent is 'minimax' or 'random'; play_as is 'x' or 'o'")
    other = "o" if play_as == "x" else "x"
    return SingleAgentView(
        TicTacToeEnv(), play_as, {other: minimax_policy if opponent == "minimax" else "random"}
    )
