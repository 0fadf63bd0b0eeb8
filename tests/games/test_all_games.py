"""check_env over every registered ``game:*`` id, and what every game shares."""

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gem_core
from gem_core.parsing import extract_boxed

GAME_IDS = gem_core.list_envs("game:*")
GAMES = sorted({i.split(":")[1].split("-v1")[0] for i in GAME_IDS if "-v1" in i})


def test_every_game_has_all_its_variants():
    """Both versions: the reference's (``-v0``) and gem_core's design (``-v1``)."""
    assert len(GAMES) >= 12
    for name in GAMES:
        for version in ("-v0", "-v1"):
            for suffix in ("", "-easy", "-hard", "-random"):
                assert f"game:{name}{version}{suffix}" in GAME_IDS


@pytest.mark.parametrize("env_id", GAME_IDS)
def test_check_env(env_id):
    gem_core.check_env(gem_core.make(env_id))


@pytest.mark.parametrize("env_id", [f"game:{name}-v1{s}" for name in GAMES for s in ("", "-random")])
def test_every_v1_game_has_a_scripted_solver_and_the_reference_games_none(env_id):
    env = gem_core.make(env_id)
    env.reset(seed=0)
    assert extract_boxed(env.solve_action())  # through RandomDifficulty to the game it drew
    reference = gem_core.make(env_id.replace("-v1", "-v0"))
    reference.reset(seed=0)
    assert reference.solve_action() is None


@pytest.mark.parametrize("env_id", [f"game:{name}-v1-easy" for name in GAMES])
def test_rules_prompt_and_penalties(env_id):
    env = gem_core.make(env_id)
    obs, _ = env.reset(seed=0)
    assert "\\boxed" in obs and "turns left" in obs
    obs, reward, terminated, truncated, info = env.step("no boxed move here")
    assert reward == pytest.approx(-0.1) and info.get("format_error") and not terminated
    assert "\\boxed" in obs
    obs, reward, _, _, info = env.step("\\boxed{\x00 certainly not a move \x00}")
    assert reward == pytest.approx(-0.1) and info.get("invalid_move")


@pytest.mark.parametrize("env_id", [f"game:{name}{v}-easy" for name in GAMES for v in ("-v0", "-v1")])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(st.text(max_size=30), min_size=1, max_size=4))
def test_arbitrary_boxed_moves_never_raise(env_id, texts):
    env = gem_core.make(env_id)
    env.reset(seed=0)
    for text in texts:
        obs, reward, terminated, truncated, info = env.step(f"\\boxed{{{text}}}")
        assert isinstance(obs, str) and obs.strip() and math.isfinite(reward)
        if terminated or truncated:
            break


NASTY_MOVES = [
    "²",
    "٣",
    "Ⅷ",
    "-1",
    "1e9",
    "nan",
    "9" * 1999,
    "",
    "   ",
    "{}",
    "{{1}}",
    "\\boxed{1}",
    "1/0",
    "٣ ٣ ٣",
]


@pytest.mark.parametrize("env_id", [f"game:{name}{v}-easy" for name in GAMES for v in ("-v0", "-v1")])
def test_nasty_moves_never_raise(env_id):
    env = gem_core.make(env_id)
    for move in NASTY_MOVES:
        env.reset(seed=0)
        obs, reward, _, _, _ = env.step(f"\\boxed{{{move}}}")
        assert isinstance(obs, str) and obs.strip() and math.isfinite(reward), move


LEGAL_GAMES = [  # the games that enumerate their legal moves (Env.sample_legal_action)
    "GuessTheNumber", "Hangman", "Wordle", "Mastermind", "Minesweeper", "TowerOfHanoi", "Sudoku",
    "FifteenPuzzle", "Sokoban", "Game2048",
]  # fmt: skip


@pytest.mark.parametrize(
    "env_id", [f"game:{name}-v1{s}" for name in LEGAL_GAMES for s in ("-easy", "-random")]
)
def test_legal_players_never_make_an_invalid_move(env_id):
    env = gem_core.make(env_id)
    for seed in range(5):
        env.reset(seed=seed)
        done, played = False, []
        while not done:
            action = env.sample_legal_action()
            if action is None:  # a Sudoku filled into a dead end: no digit is legal anywhere
                assert env_id.startswith("game:Sudoku")
                break
            observation, _, terminated, truncated, info = env.step(action)
            assert not info.get("format_error"), (seed, action)
            # Sudoku also refuses a digit that breaks no rule but is not the solution's (it knows it).
            sudoku_guess = env_id.startswith("game:Sudoku") and "breaks no rule yet" in observation
            assert not info.get("invalid_move") or sudoku_guess, (seed, action, observation)
            played.append(action)
            done = terminated or truncated
        env.reset(seed=seed)  # the same seed, the same draw: the env's action generator, re-seeded
        assert env.sample_legal_action() == played[0]


def test_legal_moves_are_drawn_uniformly_from_what_the_position_allows():
    env = gem_core.make("game:GuessTheNumber-v1-easy")
    firsts = set()
    for seed in range(200):
        env.reset(seed=seed)
        firsts.add(extract_boxed(env.sample_legal_action()))
    assert firsts == {str(n) for n in range(1, 11)}
    env.reset(seed=0)
    target = env.unwrapped.target
    env.step("\\boxed{1}" if target != 1 else "\\boxed{2}")  # a hint narrows what is legal
    allowed = {extract_boxed(env.sample_legal_action()) for _ in range(100)}
    assert allowed == {str(n) for n in range(env.unwrapped.low, env.unwrapped.high + 1)}


def test_envs_that_cannot_enumerate_their_moves_give_none():
    for env_id in ("game:Crosswords-v1-easy", "game:GuessTheNumber-v0-easy", "math:Arithmetic-v0"):
        env = gem_core.make(env_id)
        env.reset(seed=0)
        assert env.sample_legal_action() is None, env_id
    tictactoe = gem_core.make("multiagent:TicTacToe-v0-random")
    tictactoe.reset(seed=0)
    assert extract_boxed(tictactoe.sample_legal_action()) in set("123456789")


def _dense_and_sparse_episode(env_id: str, seed: int, play: str) -> tuple[list[float], list[float], bool]:
    """One episode of ``env_id`` played twice, with the dense and the sparse reward, by the same actions
    (the solver's or illegal moves); checks the two see the same observations and ends."""
    dense, sparse = gem_core.make(env_id), gem_core.make(env_id, reward_type="sparse")
    assert dense.reset(seed=seed) == sparse.reset(seed=seed)
    dense_rewards, sparse_rewards = [], []
    while True:
        action = dense.solve_action() if play == "solver" else "\\boxed{\x00 certainly not a move \x00}"
        obs, reward, terminated, truncated, info = dense.step(action)
        sparse_step = sparse.step(action)
        assert sparse_step[0] == obs and sparse_step[2:] == (terminated, truncated, info)
        dense_rewards.append(reward)
        sparse_rewards.append(sparse_step[1])
        if terminated or truncated:
            return dense_rewards, sparse_rewards, info["success"]


@pytest.mark.parametrize("env_id", [f"game:{name}-v1{s}" for name in GAMES for s in ("-easy", "-random")])
def test_a_sparse_reward_pays_the_win_only(env_id):
    """``reward_type="sparse"`` plays the dense game's episodes and pays 1 on the winning move, 0 on every
    other step: no penalty for illegal moves, no progress reward, no partial credit when the turns run
    out."""
    dense, sparse, won = _dense_and_sparse_episode(env_id, 0, "illegal moves")
    assert not won and min(dense) < 0 and sparse == [0.0] * len(sparse)
    episodes = (_dense_and_sparse_episode(env_id, seed, "solver") for seed in range(20))
    _, sparse, won = next((e for e in episodes if e[2]), (None, None, False))
    assert won, "the solver won none of 20 episodes"
    assert sparse == [0.0] * (len(sparse) - 1) + [1.0]


def test_a_reward_type_not_known_is_an_error():
    with pytest.raises(ValueError, match="reward_type must be one of"):
        gem_core.make("game:Sokoban-v1-easy", reward_type="success")
