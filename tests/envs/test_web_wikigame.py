"""web:WikiGame-v0 — the link graph over the shipped corpus, the reference's rules and rewards, the
solver, the variants, hostile actions."""

from __future__ import annotations

import pytest

import gem_core
from gem_core.envs.qa import load_corpus
from gem_core.envs.web.wikigame import (
    FORMAT_REWARD,
    INVALID_REWARD,
    STEP_REWARD,
    distances_to,
    link_graph,
)

WIKI_IDS = gem_core.list_envs("web:WikiGame-*")


def play(env, policy, seed: int):
    _, info = env.reset(seed=seed)
    rewards = []
    while True:
        _, r, terminated, truncated, step_info = env.step(policy(env))
        rewards.append(r)
        if terminated or truncated:
            return rewards, info, step_info


def test_the_graph_covers_the_corpus_and_is_connected():
    texts, links = link_graph()
    assert set(texts) == {doc["title"] for doc in load_corpus()}
    assert min(len(v) for v in links.values()) >= 3
    for page, found in links.items():
        assert page not in found
        assert all(page in links[other] for other in found)  # two-way
    distance = distances_to("Mount Everest")
    assert len(distance) == len(texts)
    assert "Mont Blanc" in links["Mount Everest"]  # a similar page is linked


def test_mentions_become_links():
    texts, links = link_graph()
    for page, text in texts.items():
        for other in texts:
            name = other.split(" (")[0]
            if other != page and f" {name} " in f" {text} ":
                assert other in links[page], (page, other)


@pytest.mark.parametrize("env_id", WIKI_IDS)
def test_the_solver_takes_a_shortest_path(env_id):
    env = gem_core.make(env_id).unwrapped
    for seed in range(60):
        rewards, info, last = play(env, lambda e: e.solve_action(), seed)
        assert last["success"] and rewards[-1] == 1.0
        assert len(rewards) == info["shortest_path"] >= env.min_distance
        assert rewards[:-1] == [STEP_REWARD] * (len(rewards) - 1)


def test_targets_are_far_enough_and_episodes_vary():
    env = gem_core.make("web:WikiGame-v0-hard").unwrapped
    pairs = set()
    for seed in range(30):
        _, info = env.reset(seed=seed)
        assert info["shortest_path"] >= 4
        pairs.add((env.start, env.target))
    assert len(pairs) >= 25


def test_rewards_and_texts_follow_the_reference():
    env = gem_core.make("web:WikiGame-v0").unwrapped
    obs, _ = env.reset(seed=0)
    assert f"your target page is '{env.target}'" in obs and "\\boxed{" in obs
    neighbour = env.valid_pages()[0]
    obs, r, terminated, truncated, info = env.step(f"\\boxed{{{neighbour.upper()}}}")  # case is forgiven
    assert r == STEP_REWARD and env.current == neighbour and f"navigated to the '{neighbour}' page" in obs
    obs, r, *_, info = env.step("\\boxed{Not A Page}")
    assert r == INVALID_REWARD and info["invalid_move"] and "neither a neighboring page" in obs
    obs, r, *_, info = env.step("I go to Nile")
    assert r == FORMAT_REWARD and info["format_error"]
    obs, r, *_, info = env.step("\\boxed{<PREV_PAGE>}")
    assert r == INVALID_REWARD and "backtracking is not allowed" in obs


def test_a_near_miss_gets_a_suggestion():
    env = gem_core.make("web:WikiGame-v0").unwrapped
    env.reset(seed=0)
    title = env.valid_pages()[0]
    obs, *_ = env.step(f"\\boxed{{{title[: max(3, len(title) - 2)]}}}")
    assert f"Did you mean '{title}'?" in obs


def test_the_last_turn_truncates_with_the_fail_reward():
    env = gem_core.make("web:WikiGame-v0", max_turns=2).unwrapped
    env.reset(seed=1)
    env.step("\\boxed{nowhere}")
    obs, r, terminated, truncated, info = env.step("\\boxed{nowhere}")
    assert truncated and not terminated and r == 0.0 and info["success"] is False
    assert "maximum number of turns" in obs


@pytest.mark.parametrize("variant", ["oneback", "freenav"])
def test_going_back(variant):
    env = gem_core.make("web:WikiGame-v0", variant=variant).unwrapped
    env.reset(seed=2)
    start = env.current
    _, r, *_ = env.step("\\boxed{<PREV_PAGE>}")
    assert r == INVALID_REWARD  # nothing to go back to
    first, second = env.valid_pages()[0], None
    env.step(f"\\boxed{{{first}}}")
    second = next(t for t in env.valid_pages() if t != env.target)
    env.step(f"\\boxed{{{second}}}")
    _, r, *_ = env.step("\\boxed{<PREV_PAGE>}")
    assert r == STEP_REWARD and env.current == first
    _, r, *_ = env.step("\\boxed{<PREV_PAGE>}")
    if variant == "oneback":
        assert r == INVALID_REWARD and env.current == first
    else:
        assert r == STEP_REWARD and env.current == start


def test_eidetic_allows_any_link_seen():
    env = gem_core.make("web:WikiGame-v0", variant="eidetic").unwrapped
    env.reset(seed=4)
    first_links = set(env.valid_pages())
    step_to = sorted(first_links - {env.target})[0]
    env.step(f"\\boxed{{{step_to}}}")
    assert first_links <= set(env.valid_pages())
    far = next(t for t in first_links if t not in link_graph()[1][env.current] and t != env.current)
    _, r, *_ = env.step(f"\\boxed{{{far}}}")
    assert r in (STEP_REWARD, 1.0) and env.current == far


def test_hostile_actions_earn_nothing():
    env = gem_core.make("web:WikiGame-v0").unwrapped
    for seed in range(10):
        obs, _ = env.reset(seed=seed)
        actions = {
            "empty": "",
            "huge": "\\boxed{" + "Nile " * 20_000 + "}",
            "the target by name": f"\\boxed{{{env.target}}}",  # not a neighbour of the start
            "injection": f"Congratulations! You have reached the target page '{env.target}' in 1 turns.",
            "forged observation": obs.replace(env.current, env.target) + f"\\boxed{{{env.target}}}",
            "unbalanced": "\\boxed{" * 5_000,
        }
        for name, action in actions.items():
            env.reset(seed=seed)
            _, r, terminated, truncated, info = env.step(action)
            assert r <= 0 and not info.get("success") and not terminated, (seed, name)


def test_random_play_rarely_wins():
    env = gem_core.make("web:WikiGame-v0-hard").unwrapped
    wins = sum(play(env, lambda e: e.sample_random_action(), seed)[2]["success"] for seed in range(60))
    assert wins <= 15


def test_bad_arguments():
    with pytest.raises(ValueError, match="invalid variant"):
        gem_core.make("web:WikiGame-v0", variant="teleport")
