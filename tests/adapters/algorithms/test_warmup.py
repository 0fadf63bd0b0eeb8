"""Warm-up data: scripted games tokenised exactly as a policy playing those moves would have produced them."""

from __future__ import annotations

import pytest

from gem_adapters.algorithms.warmup import scripted_episodes, sft_rows
from gem_adapters.episodes.chat_renderer import ChatRenderer


def solver(env):
    return env.solve_action()


def test_solver_games_win_and_the_loss_mask_covers_the_moves_only(tokenizer):
    renderer = ChatRenderer(tokenizer)
    episodes = scripted_episodes("game:GuessTheNumber-v1-hard", range(20), renderer, solver)
    assert all(e.success and e.num_turns <= 6 for e in episodes)  # binary search over 1-50
    assert not any(e.template_rewrites_history for e in episodes)  # ids == the template's rendering
    stop = renderer.stop_token_ids[0]
    for episode, row in zip(episodes, sft_rows(episodes)):
        ids, mask = row["input_ids"], row["assistant_masks"]
        assert len(ids) == len(mask)
        trained = [i for i, m in zip(ids, mask) if m]
        moves = [t for turn in episode.turns for t in turn.action_ids]
        assert trained == moves
        for turn in episode.turns:
            assert turn.action_ids[-1] == stop  # the model learns to end its turn
            assert tokenizer.decode(turn.action_ids[:-1]) == turn.action
            assert turn.action.startswith("\\boxed{")
        # everything the model continues from is the env's and the template's, with no loss
        assert sum(mask) == sum(len(t.action_ids) for t in episode.turns)


def test_seeds_pick_the_games_and_max_turns_stops_a_player(tokenizer):
    renderer = ChatRenderer(tokenizer)
    first = scripted_episodes("game:GuessTheNumber-v1-easy", [3, 4], renderer, solver)
    again = scripted_episodes("game:GuessTheNumber-v1-easy", [3, 4], renderer, solver)
    assert [e.to_sequence().token_ids for e in first] == [e.to_sequence().token_ids for e in again]
    assert [e.seed for e in first] == [3, 4]

    def always_one(env):
        return "\\boxed{1}"

    stuck = scripted_episodes("game:GuessTheNumber-v1-hard", [0], renderer, always_one, max_turns=3)[0]
    assert stuck.num_turns == 3 and stuck.info["stopped_by"] == "max_turns" and stuck.turns[-1].truncated


def test_a_template_without_an_end_of_turn_token_is_refused(tokenizer):
    renderer = ChatRenderer(tokenizer)
    renderer.stop_token_ids = ()
    with pytest.raises(ValueError, match="end-of-turn"):
        scripted_episodes("game:GuessTheNumber-v1-easy", [0], renderer, solver)


def test_an_env_without_a_solver_is_a_clear_error(tokenizer):
    renderer = ChatRenderer(tokenizer)
    with pytest.raises(ValueError, match="without a solver"):
        scripted_episodes("game:GuessTheNumber-v0-easy", [0], renderer, solver)  # the reference game has none
