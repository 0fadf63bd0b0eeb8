"""ReasoningGym envs: every rg:* id sampled once and scored by its dataset's own scorer."""

import json
import time

import pytest

import gem_core
from gem_core.envs.reasoning_gym import DATASET_NAMES

reasoning_gym = pytest.importorskip("reasoning_gym")

WRONG = "<answer>zzz wrong 12345</answer>"


def reference_answer(entry):
    """The gold answer, or for datasets with many right answers the example solution they store."""
    if entry["answer"] is not None:
        return str(entry["answer"])
    metadata = entry["metadata"]
    if "possible_answer" in metadata:  # graph_color: a dict of vertex -> colour, expected as JSON
        return json.dumps({str(k): v for k, v in metadata["possible_answer"].items()})
    for key in ("example_answer", "example_correct_answer"):
        if key in metadata:
            return metadata[key]
    return None  # boxnet and rush_hour store no solution


def test_every_registered_dataset_has_an_id():
    from reasoning_gym.factory import DATASETS

    assert tuple(sorted(DATASETS)) == DATASET_NAMES, "update DATASET_NAMES for this reasoning-gym"
    # one id per dataset at its default config (a benchmark may register a configured one too: rg:sum-learn)
    rg_ids = [
        i for i in gem_core.list_envs("rg:*") if gem_core.spec(i).kwargs == {"name": i.removeprefix("rg:")}
    ]
    assert len(rg_ids) >= 90 and set(rg_ids) == {f"rg:{name}" for name in DATASET_NAMES}
    assert all(gem_core.spec(i).multi_turn is False for i in rg_ids)


@pytest.mark.parametrize("name", DATASET_NAMES)
def test_sample_and_score(name):
    env = gem_core.make(f"rg:{name}").unwrapped
    obs, info = env.reset(seed=5)
    assert env.unwrapped.example["question"].strip() in obs and "<answer></answer>" in obs
    assert env.spawn().reset(seed=5)[0] == obs  # same seed, same puzzle
    reference = reference_answer(env.unwrapped.example)
    if reference is not None:
        _, reward, terminated, truncated, info = env.step(f"Done.\n<answer>{reference}</answer>")
        assert (reward, terminated, truncated) == (1.0, True, False), info
        assert info["success"]
        env.reset(seed=5)
    _, reward, terminated, _, info = env.step(WRONG)
    assert 0.0 <= reward < 1.0 and terminated and not info["success"], info


def test_reward_is_the_dataset_scorer():
    env = gem_core.make("rg:word_sorting").unwrapped
    env.reset(seed=1)
    gold = env.unwrapped.example["answer"]
    words = gold.split(", ")
    almost = ", ".join(words[1:] + words[:1])  # a well-formed but wrongly ordered answer
    scorer = reasoning_gym.create_dataset("word_sorting", size=env.size, seed=42)
    assert scorer[env.index] == env.unwrapped.example
    partial = scorer.score_answer(almost, env.unwrapped.example)
    assert 0 < partial < 1
    _, reward, _, _, info = env.step(f"<answer>{almost}</answer>")
    assert reward == 0.0 and info["score"] == partial  # only a solved puzzle is rewarded
    env = gem_core.make("rg:word_sorting", partial_credit=True).unwrapped
    env.reset(seed=1)
    assert env.step(f"<answer>{almost}</answer>")[1] == partial


def test_boxed_answers_are_accepted():
    env = gem_core.make("rg:basic_arithmetic").unwrapped
    env.reset(seed=3)
    assert env.step(f"\\boxed{{{env.unwrapped.example['answer']}}}")[1] == 1.0


def test_missing_answer_is_a_format_error():
    env = gem_core.make("rg:basic_arithmetic").unwrapped
    env.reset(seed=3)
    obs, reward, terminated, _, info = env.step(f"The answer is {env.unwrapped.example['answer']}")
    assert reward == 0.0 and terminated and info["format_error"]


def test_game_of_life_halting_needs_the_right_verdict():
    # reasoning-gym's own scorer gives 1.0 to any non-empty answer when the gold answer is "False"
    env = gem_core.make("rg:game_of_life_halting").unwrapped
    for seed in range(20):
        env.reset(seed=seed)
        gold = env.unwrapped.example["answer"]
        wrong = "True" if gold == "False" else "False"
        assert env.step(f"<answer>{wrong}</answer>")[1] == 0.0
        env.reset(seed=seed)
        assert env.step(f"<answer>{gold.lower()}</answer>")[1] == 1.0


def test_pathological_answer_times_out_with_zero_reward():
    env = gem_core.make("rg:countdown", grade_timeout=1.0).unwrapped
    env.reset(seed=0)
    env.step(WRONG)  # start a worker and build the dataset in it, outside the timing
    env.reset(seed=0)
    start = time.monotonic()
    _, reward, terminated, _, info = env.step("<answer>9**9**9**9</answer>")
    assert reward == 0.0 and terminated and "longer than 1s" in info["error"]
    assert time.monotonic() - start < 1.0 + 1.0


def test_spawn_same_state_shares_the_puzzle_and_config_reaches_the_dataset():
    env = gem_core.make("rg:chain_sum", min_terms=6, max_terms=6).unwrapped
    env.reset(seed=9)
    group = [env.spawn(same_state=True) for _ in range(3)]
    assert all(clone.unwrapped.example == env.unwrapped.example for clone in group)
    assert [c.step(f"<answer>{env.unwrapped.example['answer']}</answer>")[1] for c in group] == [1.0] * 3
    assert env.unwrapped.example["metadata"]["num_terms"] == 6


@pytest.mark.parametrize("name", ["basic_arithmetic", "composite", "codeio", "sudoku"])
def test_check_env(name):
    gem_core.check_env(gem_core.make(f"rg:{name}"))


def test_a_generator_that_never_returns_is_skipped_deterministically(monkeypatch):
    from gem_core.envs import reasoning_gym as rg

    env = gem_core.make("rg:maze").unwrapped
    start = time.monotonic()
    obs, info = env.reset(seed=4156)  # draws item 8743, on which maze's generator loops forever
    assert info == {"index": 8744, "skipped_items": [8743]} and time.monotonic() - start < 30
    assert env.spawn().reset(seed=4156) == (obs, info)  # the same seed, the same puzzle
    _, reward, *_ = env.step(f"<answer>{env.unwrapped.example['answer']}</answer>")
    assert reward == 1.0
    # Without the list of known cases, the deadline finds the hang (once per process).
    monkeypatch.setattr(rg, "KNOWN_HANGS", {})
    monkeypatch.setattr(rg, "_PUZZLES", {})
    env = gem_core.make("rg:maze", generate_timeout=1.0).unwrapped
    env.reset(seed=0)  # the generation workers are warm
    for _ in range(2):
        start = time.monotonic()
        obs2, info = env.reset(index=5801)
        assert info == {"index": 5802, "skipped_items": [5801]}, info
        assert time.monotonic() - start < 1.0 + 5.0
    assert env.reset(index=5802)[0] == obs2
