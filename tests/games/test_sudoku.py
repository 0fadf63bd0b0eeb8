"""Sudoku: generated puzzles, the reward table, penalties and the constraint solver."""

import time

import pytest

from gem_core import make
from gem_core.envs.games.sudoku import SudokuEnv, count_solutions, parse_move
from gem_core.parsing import extract_boxed


def play(env, seed):
    env.reset(seed=seed)
    rewards, info, done, start = [], {}, False, time.perf_counter()
    while not done:
        _, reward, terminated, truncated, info = env.step(env.solve_action())
        rewards.append(reward)
        done = terminated or truncated
    return rewards, info, time.perf_counter() - start


def is_valid_solution(grid, box):
    n = len(grid)
    digits = set(range(1, n + 1))
    rows = [set(row) for row in grid]
    cols = [{grid[r][c] for r in range(n)} for c in range(n)]
    boxes = [
        {grid[r][c] for r in range(br, br + box) for c in range(bc, bc + box)}
        for br in range(0, n, box)
        for bc in range(0, n, box)
    ]
    return all(group == digits for group in rows + cols + boxes)


def empty_cells(env):
    return [(r, c) for r in range(env.size) for c in range(env.size) if not env.board[r][c]]


@pytest.mark.parametrize(("variant", "seeds", "empty"), [("easy", 50, 6), ("hard", 10, 31)])
def test_solver_wins_every_seeded_episode_with_the_table_return(variant, seeds, empty):
    env = make(f"game:Sudoku-v1-{variant}")
    for seed in range(seeds):
        rewards, info, seconds = play(env, seed)
        assert info["success"], seed
        # table: +0.5 / E for each of the E cells, +1.0 more for the last one
        assert rewards == pytest.approx([0.5 / empty] * (empty - 1) + [0.5 / empty + 1.0])
        assert sum(rewards) == pytest.approx(1.5)
        assert seconds < 10.0  # a hang guard, not a speed claim (games_step_cost.txt)


@pytest.mark.parametrize(("size", "clues", "seeds"), [(4, 10, 50), (9, 50, 20)])
def test_puzzles_have_the_requested_clues_and_one_solution(size, clues, seeds):
    env = SudokuEnv(size=size, clues=clues, max_turns=50)
    boards = set()
    for seed in range(seeds):
        env.reset(seed=seed)
        givens = [(r, c) for r in range(size) for c in range(size) if env.board[r][c]]
        assert len(givens) == clues
        assert all(env.board[r][c] == env.solution[r][c] for r, c in givens)
        assert is_valid_solution(env.solution, env.box)
        assert count_solutions(env.board, env.box) == 1
        boards.add(str(env.board))
    assert len(boards) == seeds


def test_count_solutions():
    assert count_solutions([[0] * 4 for _ in range(4)], 2, limit=1000) == 288  # all 4x4 sudokus
    bad = [[1, 1, 0, 0], [0] * 4, [0] * 4, [0] * 4]
    assert count_solutions(bad, 2) == 0


def test_rule_breaking_and_wrong_digits_are_rejected_with_reasons():
    env = SudokuEnv(size=9, clues=50, max_turns=50)
    env.reset(seed=1)
    r, c = empty_cells(env)[0]
    before = [row[:] for row in env.board]
    in_row = next(v for v in env.board[r] if v)
    obs, reward, _, _, info = env.step(f"\\boxed{{{r + 1} {c + 1} {in_row}}}")
    assert reward == -0.1 and info["invalid_move"]
    assert f"row {r + 1} already has a {in_row}" in obs
    column = {env.board[i][c] for i in range(9)} - {0} - set(env.board[r])
    if column:
        digit = column.pop()
        obs, reward, _, _, info = env.step(f"\\boxed{{{r + 1} {c + 1} {digit}}}")
        assert reward == -0.1 and f"column {c + 1} already has a {digit}" in obs
    # A digit that breaks no rule yet but is not the unique solution's.
    for r, c in empty_cells(env):
        legal = [d for d in range(1, 10) if d != env.solution[r][c] and not env._conflict(r, c, d)]
        if legal:
            obs, reward, _, _, info = env.step(f"\\boxed{{{r + 1} {c + 1} {legal[0]}}}")
            assert reward == -0.1 and info["invalid_move"] and "not part of the solution" in obs
            break
    else:
        pytest.fail("no cell had a legal wrong digit")
    assert env.board == before


@pytest.mark.parametrize(
    ("move", "reason"),
    [
        ("10 1 1", "off the board"),
        ("1 0 1", "off the board"),
        ("1 1 0", "not a digit"),
        ("1 1 10", "not a digit"),
        ("1 2", "not a move"),
        ("one two three", "not a move"),
        ("1 2 3 4", "not a move"),
    ],
)
def test_unreadable_or_out_of_range_moves(move, reason):
    env = SudokuEnv(size=9, clues=50, max_turns=50)
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step(f"\\boxed{{{move}}}")
    assert reward == -0.1 and info["invalid_move"] and not terminated
    assert reason in obs


def test_filled_cells_cannot_be_changed():
    env = SudokuEnv(size=4, clues=10, max_turns=15)
    env.reset(seed=0)
    r, c = next((r, c) for r in range(4) for c in range(4) if env.board[r][c])
    obs, reward, _, _, info = env.step(f"\\boxed{{{r + 1} {c + 1} {env.board[r][c]}}}")  # a given
    assert reward == -0.1 and info["invalid_move"] and "already holds" in obs
    action = env.solve_action()
    assert env.step(action)[1] == pytest.approx(0.5 / 6)
    obs, reward, _, _, info = env.step(action)  # the same move again
    assert reward == -0.1 and info["invalid_move"] and "already holds" in obs


@pytest.mark.parametrize(
    "text", ["2 3 4", " 2 , 3 , 4 ", "(2, 3, 4)", "R2C3=4", "r2 c3 4", "row 2 col 3 value 4"]
)
def test_moves_are_read_tolerantly(text):
    assert parse_move(text) == (2, 3, 4)


def test_format_penalty():
    env = SudokuEnv(size=4, clues=10, max_turns=15)
    env.reset(seed=0)
    obs, reward, terminated, _, info = env.step("1 1 1")
    assert reward == -0.1 and info["format_error"] and not terminated and "14 turns left" in obs


def test_partial_credit_when_turns_run_out():
    env = SudokuEnv(size=4, clues=10, max_turns=4)
    env.reset(seed=0)
    env.step(env.solve_action())
    env.step(env.solve_action())
    env.step("no move")
    _, reward, terminated, truncated, info = env.step("\\boxed{9 9 9}")
    assert truncated and not terminated and info["success"] is False
    assert reward == pytest.approx(-0.1 + 0.5 * 2 / 6)


def test_rules_prompt_shows_the_board():
    env = make("game:Sudoku-v1-easy")
    obs, _ = env.reset(seed=0)
    assert "4x4" in obs and "\\boxed{" in obs and "15 turns left" in obs
    assert obs.count(".") >= 6 and " 1 | " in obs and " 4 | " in obs


def test_determinism():
    a, b = SudokuEnv(size=9, clues=50), SudokuEnv(size=9, clues=50)
    assert a.reset(seed=7) == b.reset(seed=7)
    assert a.reset(seed=7) != b.reset(seed=8)


def test_listed_empty_cells_are_the_boards_empty_cells_after_every_move():
    """``list_empty_cells``: each board shown is followed by its empty cells' rows and columns, which the
    solver's move (the first empty cell) removes; off by default."""
    plain = make("game:Sudoku-v1-easy")
    assert "Empty cells" not in plain.reset(seed=3)[0]
    env = make("game:Sudoku-v1-easy", list_empty_cells=True)
    observation, _ = env.reset(seed=3)
    done = False
    while not done:
        game = env.unwrapped
        listed = observation.split("Empty cells (row column): ", 1)[1].split(".", 1)[0]
        assert listed == ", ".join(f"{r + 1} {c + 1}" for r, c in empty_cells(game))
        move = game.solve_action()
        assert move.startswith("\\boxed{" + listed.split(",")[0])  # the first one listed
        observation, _, terminated, truncated, info = env.step(move)
        done = terminated or truncated
    assert info["success"] and "Empty cells (row column): none." in observation


def test_listed_missing_digits_are_what_each_row_lacks_after_every_move():
    """``list_missing_digits``: each board shown is followed by the digits each unfinished row lacks, kept
    up to date by the moves the game accepts (a rejected one changes nothing); off by default."""
    assert "Digits each row lacks" not in make("game:Sudoku-v1-easy", list_empty_cells=True).reset(seed=5)[0]
    env = make("game:Sudoku-v1-easy", list_missing_digits=True)
    observation, _ = env.reset(seed=5)
    assert "Empty cells" not in observation
    game, done, moves = env.unwrapped, False, 0
    while not done:
        listed = observation.split("Digits each row lacks: ", 1)[1].split(".\n", 1)[0]
        expected = [
            f"row {r + 1}: " + " ".join(str(d) for d in range(1, 5) if d not in row)
            for r, row in enumerate(game.board)
            if 0 in row
        ]
        assert listed == "; ".join(expected)
        r, c, _ = parse_move(extract_boxed(game.solve_action()))
        wrong = next(d for d in range(1, 5) if d != game.solution[r - 1][c - 1])
        if moves % 2 == 0:  # a wrong digit first: rejected, the list stays
            observation, *_ = env.step(f"\\boxed{{{r} {c} {wrong}}}")
            assert f"Digits each row lacks: {listed}." in observation
        observation, _, terminated, truncated, info = env.step(game.solve_action())
        done, moves = terminated or truncated, moves + 1
    assert info["success"] and "Digits each row lacks: none." in observation
