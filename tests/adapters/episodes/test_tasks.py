"""Tasks: the one description of an episode every adapter encodes in its rows."""

from __future__ import annotations

import pytest

from gem_adapters.episodes.tasks import Task, iter_tasks, make_tasks

GUESS, HANGMAN = "game:GuessTheNumber-v1-easy", "game:Hangman-v1-easy"


def test_make_tasks_takes_env_ids_in_turn_with_consecutive_seeds():
    tasks = make_tasks([GUESS, HANGMAN], 3, first_seed=7, system_prompt="s", max_turns=4)
    assert [(t.env_id, t.seed) for t in tasks] == [(GUESS, 7), (HANGMAN, 8), (GUESS, 9)]
    assert all(t.system_prompt == "s" and t.max_turns == 4 for t in tasks)
    assert make_tasks(GUESS, 0) == []
    with pytest.raises(ValueError, match="at least one env id"):
        make_tasks([], 2)
    with pytest.raises(ValueError, match="max_turns"):
        make_tasks(GUESS, 2, max_turns=0)


def test_iter_tasks_gives_each_task_its_first_observation():
    import gem_core

    pairs = list(iter_tasks([GUESS, HANGMAN], 3, first_seed=1))
    assert [task for task, _ in pairs] == make_tasks([GUESS, HANGMAN], 3, first_seed=1)
    for task, observation in pairs:
        with gem_core.make(task.env_id) as env:
            assert env.reset(seed=task.seed)[0] == observation


def test_json_round_trip_and_partial_json():
    task = Task(HANGMAN, 3, {"max_turns": 2}, "sys", 4, {"enable_thinking": False})
    assert Task.from_json(task.to_json()) == task
    assert Task.from_json('{"env_id": "game:X", "seed": 5, "other": 1}') == Task("game:X", 5)
    with pytest.raises(ValueError, match="env_id and seed"):
        Task.from_json('{"seed": 1}')
