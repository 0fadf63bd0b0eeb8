"""episode_stats: the summary of a batch of episodes, checked by hand on three small episodes."""

from __future__ import annotations

import pytest

from gem_adapters.episodes.episode import Episode, Turn
from gem_adapters.episodes.episode_stats import episode_stats


def turn(reward: float, generated: int, finish_reason: str = "stop", **info) -> Turn:
    return Turn(
        observation="obs",
        action="a",
        prompt_ids=[7],
        action_ids=[1] * generated,
        reward=reward,
        info=info,
        finish_reason=finish_reason,
    )


def episodes() -> list[Episode]:
    won = Episode(
        turns=[turn(0.0, 3, format_error=True), turn(1.0, 2, success=True)],
        template_rewrites_history=True,
    )
    stopped = Episode(
        turns=[turn(0.5, 4, "length", invalid_move=True), turn(0.0, 1), turn(-1.0, 5, invalid_move=False)],
        info={"stopped_by": "max_turns"},
    )
    cut = Episode(
        turns=[turn(0.25, 6, format_error=True, invalid_move=True)], info={"stopped_by": "max_context_tokens"}
    )
    return [won, stopped, cut]


def test_hand_checked_numbers():
    stats = episode_stats(episodes())
    assert stats == {
        "episodes": 3.0,
        "return": pytest.approx((1.0 + -0.5 + 0.25) / 3),
        "success_rate": pytest.approx(1 / 3),
        "turns": 2.0,  # 6 turns over 3 episodes
        "format_error_rate": pytest.approx(2 / 6),
        "invalid_move_rate": pytest.approx(2 / 6),  # invalid_move=False does not count
        "generated_tokens": 21.0,
        "generated_tokens_per_episode": 7.0,
        "stopped_by_max_turns": 1.0,
        "stopped_by_context": 1.0,
        "template_rewrites_history": 1.0,
        "length_cut_rate": pytest.approx(1 / 6),
        "rewarded_turn_rate": pytest.approx(4 / 6),
        "groups_with_signal": 0.0,  # unseeded episodes: no task is played twice
    }


def test_success_is_read_from_the_last_turn_only():
    early = Episode(turns=[turn(1.0, 1, success=True), turn(0.0, 1)])
    assert episode_stats([early])["success_rate"] == 0.0


def test_an_empty_batch_and_an_episode_without_turns_give_zeros():
    assert set(episode_stats([]).values()) == {0.0}
    stats = episode_stats([Episode(info={"stopped_by": "max_context_tokens"})])
    assert stats["episodes"] == 1.0 and stats["turns"] == 0.0 and stats["format_error_rate"] == 0.0
    assert stats["stopped_by_context"] == 1.0


def test_groups_with_signal_counts_tasks_played_more_than_once_whose_returns_differ():
    def played(seed: int, reward: float, env_id: str = "game:A") -> Episode:
        return Episode(env_id=env_id, seed=seed, turns=[turn(reward, 1)])

    batch = [
        *(played(0, r) for r in (1.0, 0.0)),  # differs: signal
        *(played(1, r) for r in (0.0, 0.0, 0.0)),  # all lost: no signal
        played(1, 1.0, env_id="game:B"),  # same seed, another env: a group of one, not counted
        *(played(2, r) for r in (0.5, 0.5)),  # equal partial returns: no signal
    ]
    assert episode_stats(batch)["groups_with_signal"] == pytest.approx(1 / 3)
    assert episode_stats([played(0, 1.0), played(1, 0.0)])["groups_with_signal"] == 0.0


def test_groups_with_signal_reads_a_group_set_as_a_list():
    """The TRL rollout names the group of a task with env kwargs ``[env_id, seed, kwargs JSON]`` (a list,
    as JSON gives it back): two starts of the same env and seed with other kwargs are two groups."""

    def played(reward: float, kwargs: str) -> Episode:
        return Episode(
            env_id="game:A", seed=0, turns=[turn(reward, 1)], info={"group": ["game:A", 0, kwargs]}
        )

    batch = [
        played(1.0, '{"k": 1}'),
        played(0.0, '{"k": 1}'),
        played(1.0, '{"k": 2}'),
        played(1.0, '{"k": 2}'),
    ]
    assert episode_stats(batch)["groups_with_signal"] == pytest.approx(1 / 2)
