"""benchmarks/baselines/diagnose.py: what RL starts from, measured on one training batch."""

from __future__ import annotations

import json
import math

import pytest

import gem_core
from benchmarks.baselines.diagnose import (
    FORMAT_ERROR,
    diagnose,
    diagnoses_markdown,
    guesses_against_hints,
    letter_count_error,
    purchases,
    purchases_markdown,
    rejected_markdown,
    rejected_moves,
    same_answer_share,
    sum_answer_error,
)
from benchmarks.baselines.rows import TABLES
from gem_adapters.episodes.episode import Episode, Turn


def played(guesses: list[int], seed: int = 3) -> Episode:
    """A GuessTheNumber-easy episode of ``guesses``, each judged by the real env."""
    env = gem_core.make("game:GuessTheNumber-v1-easy")
    observation, _ = env.reset(seed=seed)
    episode = Episode(env_id="game:GuessTheNumber-v1-easy", seed=seed)
    for guess in guesses:
        action = f"\\boxed{{{guess}}}"
        next_observation, reward, terminated, truncated, info = env.step(action)
        episode.turns.append(
            Turn(observation, action, prompt_ids=[], action_ids=[1], reward=reward, info=info)
        )
        observation = next_observation
        if terminated or truncated:
            break
    return episode


def target_of(seed: int) -> int:
    env = gem_core.make("game:GuessTheNumber-v1-easy")
    env.reset(seed=seed)
    return env.unwrapped.target


def test_guesses_against_hints_are_judged_by_the_env():
    seed = next(s for s in range(100) if target_of(s) >= 3)
    target = target_of(seed)
    # below the target ("higher"), then further below: the second guess contradicts the hint
    assert guesses_against_hints([played([target - 1, target - 2], seed)]) == 0.5
    assert guesses_against_hints([played([target - 2, target - 1], seed)]) == 0.0  # keeps to the hint
    # a repeated guess is an invalid move, which the env does not judge against the hints
    assert guesses_against_hints([played([target - 1, target - 1], seed)]) == 0.0
    assert guesses_against_hints([]) == 0.0


def answered(answers: list[str]) -> tuple[list[Episode], list[int]]:
    """rg:sum-learn episodes, one per answer, on the real env's questions, and each question's a + b."""
    episodes, sums = [], []
    for seed, action in enumerate(answers):
        env = gem_core.make("rg:sum-learn")
        observation, _ = env.reset(seed=seed)
        _, reward, *_ = env.step(f"<answer>{env.unwrapped.example['answer']}</answer>")
        assert reward == 1.0  # the gold answer scores: the question is the one parsed below
        sums.append(int(env.unwrapped.example["answer"]))
        turn = Turn(observation, action, prompt_ids=[], action_ids=[1], reward=0.0, info={})
        episodes.append(Episode(env_id="rg:sum-learn", seed=seed, turns=[turn]))
    return episodes, sums


def test_sum_answer_error_is_the_distance_from_the_sum_of_the_question():
    import benchmarks.learning.common  # noqa: F401  registers rg:sum-learn

    episodes, sums = answered(["<answer>0</answer>"] * 4)
    assert sum_answer_error(episodes) == sum(abs(s) for s in sums) / 4
    right = [f"<answer>{s}</answer>" for s in sums]
    assert sum_answer_error(answered(right)[0]) == 0.0
    # answers out of the tags, or not numbers, are not judged; none judged is no measurement
    off = sum_answer_error(answered([right[0], "the sum is 5", "<answer>five</answer>", right[3]])[0])
    assert off == 0.0
    assert math.isnan(sum_answer_error(answered(["no answer"])[0])) and math.isnan(sum_answer_error([]))


def counted(answers: list[int]) -> tuple[list[Episode], list[int]]:
    """rg:letter_counting episodes answering ``answers`` on the real env's questions, graded by the env,
    and each question's count (the answer the env rewards)."""
    env = gem_core.make("rg:letter_counting")
    episodes, counts = [], []
    for seed, answer in enumerate(answers):
        observation, _ = env.reset(seed=seed)
        count = next(n for n in range(60) if env.spawn(same_state=True).step(f"<answer>{n}</answer>")[1])
        action = f"<answer>{answer}</answer>"
        _, reward, *_ = env.step(action)
        assert reward == float(answer == count)
        turn = Turn(observation, action, prompt_ids=[], action_ids=[1], reward=reward, info={})
        episodes.append(Episode(env_id="rg:letter_counting", seed=seed, turns=[turn]))
        counts.append(count)
    return episodes, counts


def test_letter_count_error_is_the_distance_from_the_count_the_env_rewards():
    _, counts = counted([0] * 6)
    assert letter_count_error(counted(counts)[0]) == 0.0 and same_answer_share(counted(counts)[0]) < 1.0
    always_one = counted([1] * 6)[0]
    assert letter_count_error(always_one) == sum(abs(c - 1) for c in counts) / 6 > 0
    assert same_answer_share(always_one) == 1.0
    assert math.isnan(same_answer_share([])) and math.isnan(letter_count_error([]))


def test_diagnose_plays_one_training_batch_of_the_warmed_up_policy(tmp_path, monkeypatch):
    monkeypatch.setenv("GEM_CACHE", str(tmp_path / "cache"))
    (row,) = TABLES["check"]
    out = diagnose(row, 0, tmp_path)
    record = json.loads(out.read_text())
    assert out == tmp_path / "diagnoses" / f"{row.name}-seed0.json"
    stats = record["stats"]
    assert (
        stats["episodes"] == row.episodes_per_step
        and record["tasks"] == row.episodes_per_step // row.num_generations
    )
    for key in ("groups_with_signal", "rewarded_turn_rate", "length_cut_rate", "success_rate"):
        assert 0.0 <= stats[key] <= 1.0
    assert record["first_episode"] and "action" in record["first_episode"][0]
    table = diagnoses_markdown(tmp_path).splitlines()
    assert len(table) == 3 and table[2].startswith(f"| {row.name} |")
    assert f"{stats['groups_with_signal']:.2f}" in table[2]


def test_rejected_moves_replay_held_out_episodes_and_count_the_envs_reasons(tmp_path):
    """A Sudoku episode that writes on a given cell, plays a solver's move, boxes a word and gives no move at
    all: three rejections, each under the env's reason with numbers and quoted text masked; an episode
    recorded with another return does not replay and is counted as such."""
    env_id, seed = "game:Sudoku-v1-easy", 7
    with gem_core.make(env_id) as env:
        env.reset(seed=seed)
        given = next((r, c) for r in range(4) for c in range(4) if env.unwrapped.board[r][c])
        actions = [
            f"\\boxed{{{given[0] + 1} {given[1] + 1} 1}}",
            f"\\boxed{{{env.unwrapped.solve_action()}}}",
            "\\boxed{junk}",
            "junk",
        ]
        rewards = [env.step(action)[1] for action in actions]
    assert rewards[0] < 0 < rewards[1] and rewards[2] < 0 and rewards[3] < 0
    lines = [
        {"phase": "before", "env_id": env_id, "seed": seed, "return": sum(rewards), "actions": actions},
        {"phase": "after", "env_id": env_id, "seed": seed, "return": 0.0, "actions": actions[:1]},
    ]
    path = tmp_path / "trl-rebn-seed0.heldout.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    counts = rejected_moves([path])
    assert counts["before"]["moves"] == 4 and counts["before"]["replayed"] == 1
    assert counts["before"]["rejected"] == {
        "Row #, column # already holds #.": 1,
        "'…' is not a move: give row, column and digit, e.g. # # #.": 1,
        FORMAT_ERROR: 1,
    }
    assert counts["after"]["moves"] == 1 and counts["after"]["replayed"] == 0
    text = rejected_markdown(counts)
    assert "| Row #, column # already holds #. | 0.25 | 1.00 |" in text
    assert "before: 1 of 1, after: 0 of 1" in text


def shop_episode(seed: int, shortcut: bool) -> dict:
    """A held-out line of web:Shop-v0: the solver's episode, or (``shortcut``) its search and first listing
    then ``buy now`` at once, as the runs that dropped their option clicks play it."""
    actions, total = [], 0.0
    with gem_core.make("web:Shop-v0") as env:
        env.reset(seed=seed)
        shop = env.unwrapped
        done = False
        while not done:
            action = "\\boxed{click[buy now]}" if shortcut and shop.page == "item" else shop.solve_action()
            _, reward, terminated, truncated, _ = env.step(action)
            actions.append(action)
            total += reward
            done = terminated or truncated
    return {"phase": "after", "env_id": "web:Shop-v0", "seed": seed, "return": total, "actions": actions}


def test_purchases_replay_a_shops_episodes_and_split_them_by_option_clicks(tmp_path):
    """The solver chooses the instruction's options on the first listing and wins; the shortcut buys that
    listing with none chosen, for a partial score in 3 turns, discounted to its first turn by gamma^2."""
    for seed in range(100):  # an instruction with options whose first fitting listing has them
        solved, shortcut = shop_episode(seed, shortcut=False), shop_episode(seed, shortcut=True)
        options = len(solved["actions"]) - 3  # search, the listing, its options, buy
        if options > 0 and solved["return"] == 1.0 and len(shortcut["actions"]) == 3:
            break
    else:
        pytest.fail("no instruction of seeds 0-99 has options on its first fitting listing")
    assert 0 < shortcut["return"] < 1.0
    path = tmp_path / "trl-rebn-seed0.heldout.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in (solved, shortcut)))
    counts = purchases([path], gamma=0.9)["after"]
    assert counts["episodes"] == counts["replayed"] == 2 and counts["won"] == 1
    assert counts["option_clicks"] == options
    assert counts["with options"] == {
        "purchases": 1,
        "won": 1,
        "score": 1.0,
        "turns": 3 + options,
        "first_turn_return": pytest.approx(0.9 ** (2 + options)),
    }
    assert counts["without options"] == {
        "purchases": 1,
        "won": 0,
        "score": shortcut["return"],
        "turns": 3,
        "first_turn_return": pytest.approx(shortcut["return"] * 0.81),
    }
    text = purchases_markdown({"after": counts}, 0.9)
    assert (
        f"| after RL | 2 (1) | {options} | 1 without options | 0 | {shortcut['return']:.2f} | 3.00 |" in text
    )
    assert "after: 2 of 2" in text
