"""QA envs: SQuAD normalisation, exact match and F1, the offline corpus and questions, Hub ids."""

import json
import time

import pytest

import gem_core
from gem_core.envs.dataset import DatasetUnavailableError, read_jsonl
from gem_core.envs.qa import HUB_SETS, QUESTIONS_PATH, exact_match, f1_score, load_corpus, normalize_answer


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("  an   Apple, a day ", "apple day"),
        ("St Mary's Hospital", "st marys hospital"),
        ("Theory", "theory"),  # "the" inside a word is not an article
        ("", ""),
    ],
)
def test_normalize_answer(text, normalized):
    assert normalize_answer(text) == normalized


def test_exact_match_and_f1():
    assert exact_match("the Louvre.", ["Louvre"]) and exact_match("LOUVRE", ["Paris", "the Louvre"])
    assert not exact_match("Louvre Museum", ["Louvre"])
    assert f1_score("Frederic Bartholdi", ["Frederic Auguste Bartholdi"]) == pytest.approx(0.8)
    assert f1_score("Bartholdi", ["Eiffel", "Frederic Auguste Bartholdi"]) == pytest.approx(0.5)
    assert f1_score("Paris", ["Louvre"]) == 0.0


def find(env, question):
    index = next(i for i, ex in enumerate(env.unwrapped.examples) if ex["question"] == question)
    return env.reset(index=index)


MONA_LISA = "Which museum holds the Mona Lisa?"


@pytest.fixture
def env():
    return gem_core.make("qa:LocalWiki-v0")


def test_right_answer_in_tags_scores_one(env):
    obs, _ = env.reset(seed=0)
    assert "<answer></answer>" in obs and env.unwrapped.example["question"] in obs
    find(env, MONA_LISA)
    obs, reward, terminated, truncated, info = env.step(
        "I recall it is in Paris. <answer> THE  louvre. </answer>"
    )
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["exact_match"] and info["f1"] == 1.0 and info["success"]


def test_wrong_answer_scores_zero_with_partial_f1(env):
    find(env, MONA_LISA)
    _, reward, terminated, _, info = env.step("<answer>Louvre Museum</answer>")
    assert reward == 0.0 and terminated and not info["success"]
    assert info["f1"] == pytest.approx(2 / 3)


@pytest.mark.parametrize("reply", ["Louvre", "<answer></answer>", "<answer>Louvre", "\\boxed{Louvre}"])
def test_missing_or_empty_tag_is_a_format_error(env, reply):
    find(env, MONA_LISA)
    obs, reward, terminated, _, info = env.step(reply)
    assert reward == 0.0 and terminated and info["format_error"] and "<answer></answer>" in obs


def test_every_question_is_answerable_from_its_passages():
    corpus = {p["id"]: p for p in load_corpus()}
    questions = read_jsonl(QUESTIONS_PATH)
    assert 60 <= len(corpus) <= 150 and len(questions) >= 100
    assert len({q["id"] for q in questions}) == len(questions)
    assert all(p["title"] and p["text"] for p in corpus.values())
    for q in questions:
        passages = [corpus[pid] for pid in q["passage_ids"]]  # every supporting id exists
        if len(passages) == 1:
            text = normalize_answer(passages[0]["text"])
            assert any(normalize_answer(a) in text for a in q["answers"]), q


def test_the_first_alias_of_every_question_scores_one(env):
    for index in range(env.unwrapped.num_examples):
        env.reset(index=index)
        assert env.step(f"<answer>{env.unwrapped.example['answers'][0]}</answer>")[1] == 1.0


def test_spawn_same_state_shares_the_question(env):
    obs, _ = env.reset(seed=11)
    group = [env.spawn(same_state=True) for _ in range(4)]
    answer = f"<answer>{env.unwrapped.example['answers'][-1]}</answer>"
    assert all(clone.unwrapped.example == env.unwrapped.example for clone in group)
    assert [clone.step(answer)[1] for clone in group] == [1.0] * 4


def test_check_env(env):
    assert gem_core.spec("qa:LocalWiki-v0").multi_turn is False
    gem_core.check_env(env)


def test_reference_hub_ids_are_registered():
    for env_id in ["qa:NaturalQuestions", "qa:HotpotQA", "eval:QaOpen", "eval:Bamboogle"]:
        assert gem_core.spec(env_id).data_source == "hub"
    assert set(HUB_SETS) <= set(gem_core.list_envs())


@pytest.mark.parametrize("env_id", ["qa:NaturalQuestions", "qa:HotpotQA"])
def test_hub_ids_fail_fast_offline_with_advice(env_id):
    pytest.importorskip("datasets")
    start = time.monotonic()
    with pytest.raises(DatasetUnavailableError, match="data_files="):
        gem_core.make(env_id)
    assert time.monotonic() - start < 10


def test_hub_id_loads_a_local_file(tmp_path):
    pytest.importorskip("datasets")
    rows = [
        {"problem": "Which city hosted the 1896 Olympics?", "answer": ["Athens"]},
        {"problem": "What is the capital of Canada?", "answer": ["Ottawa", "Ottawa, Ontario"]},
    ]
    path = tmp_path / "hotpot.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = gem_core.make("qa:HotpotQA", data_files=str(path))
    obs, _ = env.reset(index=1)
    assert "capital of Canada" in obs
    assert env.step("<answer>ottawa</answer>")[1] == 1.0
    gem_core.check_env(env)
