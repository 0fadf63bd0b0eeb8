"""QA: a question in, a short answer in ``<answer></answer>`` out, scored by SQuAD-style exact match.

| event                                                        | reward |
|--------------------------------------------------------------|--------|
| normalised answer equals a normalised gold alias             | 1.0    |
| any other answer (token F1 against the best alias in info)   | 0.0    |
| no ``<answer>...</answer>`` (or it is empty): format error   | 0.0    |

Normalisation is SQuAD's: lowercase, drop punctuation and the articles a/an/the, collapse whitespace.
``info`` carries ``exact_match`` and ``f1``. With ``answer_format="boxed"`` the answer is read from the
last ``\\boxed{}`` instead (the reference GEM's RuleTaker sets use that).

``qa:LocalWiki-v0`` ships with the package: 244 questions (236 answerable from a single passage, 8
needing two) over ``gem_core/data/qa/corpus.jsonl``, 94 short encyclopedic passages written for this
project (JSON lines ``{"id", "title", "text"}``; ``CORPUS_PATH``, ``load_corpus()``), which the search
tool indexes. Each question names its supporting ``passage_ids``.

Hub ids, named as in the reference GEM: ``qa:NaturalQuestions``, ``qa:HotpotQA`` (training) and
``eval:QaOpen``, ``eval:NaturalQuestions``, ``eval:HotpotQA``, ``eval:2Wiki``, ``eval:PopQA``,
``eval:TriviaQA``, ``eval:Bamboogle``, ``eval:Musique``; pass ``data_files=`` to use local copies.
The episode is single-turn; wrap the env with the search tool to make it multi-turn.
"""

from __future__ import annotations

import collections
import re
import string
from collections.abc import Sequence
from typing import Any

from gem_core.envs.dataset import DATA_DIR, DatasetEnv, answers_of, load_hf_dataset, read_jsonl
from gem_core.parsing import extract_boxed, extract_tag, preview
from gem_core.registry import register

CORPUS_PATH = DATA_DIR / "qa" / "corpus.jsonl"
QUESTIONS_PATH = DATA_DIR / "qa" / "questions.jsonl"
INSTRUCTION = (
    "Answer the question. Think it through if you need to, then give only the final short answer "
    "inside <answer></answer> tags, for example <answer>Paris</answer>."
)
BOXED_INSTRUCTION = "Give your final answer inside \\boxed{}, for example \\boxed{True}."
MAX_ANSWER_CHARS = 1_000


def load_corpus() -> tuple[dict[str, str], ...]:
    """The passages of the offline corpus: ``{"id", "title", "text"}`` each."""
    return read_jsonl(CORPUS_PATH)


# ---- SQuAD-style scoring --------------------------------------------------------------------------
_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lowercase, remove punctuation and articles, collapse whitespace (the SQuAD evaluation script's rule)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, golds: Sequence[str]) -> bool:
    normalized = normalize_answer(prediction)
    return any(normalized == normalize_answer(g) for g in golds)


def f1_score(prediction: str, golds: Sequence[str]) -> float:
    """The best token-level F1 between ``prediction`` and any gold alias."""
    predicted = normalize_answer(prediction).split()
    best = 0.0
    for gold in golds:
        expected = normalize_answer(gold).split()
        common = sum((collections.Counter(predicted) & collections.Counter(expected)).values())
        if common:
            precision, recall = common / len(predicted), common / len(expected)
            best = max(best, 2 * precision * recall / (precision + recall))
        elif not predicted and not expected:
            best = 1.0
    return best


# ---- the env --------------------------------------------------------------------------------------
class QAEnv(DatasetEnv):
    """Single-turn question answering from a shipped JSON-lines file, the Hub, or local ``data_files``."""

    def __init__(
        self,
        path: str | None = None,
        dataset_name: str | None = None,
        split: str | None = None,
        data_files: Any = None,
        question_key: str = "question",
        answer_key: str = "answer",
        answer_format: str = "tag",
        instruction: str | None = None,
    ):
        if answer_format not in ("tag", "boxed"):
            raise ValueError("answer_format is 'tag' (<answer></answer>) or 'boxed' (\\boxed{})")
        if data_files is not None or path is None:
            examples = load_hf_dataset(dataset_name, split, data_files)
        else:
            examples = read_jsonl(path)
        for key in (question_key, answer_key):
            if key not in examples[0]:
                raise KeyError(f"the examples have no {key!r} field (they have {sorted(examples[0])})")
        super().__init__(examples)
        self.question_key, self.answer_key = question_key, answer_key
        self.answer_format = answer_format
        default = INSTRUCTION if answer_format == "tag" else BOXED_INSTRUCTION
        self.instruction = default if instruction is None else instruction

    def _prompt(self, example: Any) -> str:
        return f"{self.instruction}\nQuestion: {example[self.question_key]}"

    def _extract(self, action: str) -> str | None:
        return extract_tag(action, "answer") if self.answer_format == "tag" else extract_boxed(action)

    def _grade(self, action: str) -> tuple[float, str, dict[str, Any]]:
        answer = self._extract(action)
        if not answer or len(answer) > MAX_ANSWER_CHARS:
            where = "<answer></answer>" if self.answer_format == "tag" else "\\boxed{}"
            feedback = f"No answer found: give a short answer inside {where}. Your reply was: {preview(action) or '(empty)'}"
            return 0.0, feedback, {"format_error": True, "exact_match": False, "f1": 0.0}
        golds = answers_of(self.example[self.answer_key])
        correct = exact_match(answer, golds)
        info = {"exact_match": correct, "f1": f1_score(answer, golds)}
        return (
            (1.0, "Correct.", info)
            if correct
            else (0.0, f"Incorrect: {preview(answer)} is not the answer.", info)
        )

    def _random_answer(self) -> str:
        other = self.examples[self.action_rng.randrange(len(self.examples))]
        guess = self.action_rng.choice(answers_of(other[self.answer_key]))
        return f"<answer>{guess}</answer>" if self.answer_format == "tag" else f"\\boxed{{{guess}}}"


# id -> (Hub dataset, split, question key, answer key); the reference GEM's names
HUB_SETS = {
    "qa:NaturalQuestions": ("axon-rl/NaturalQuestions", "train", "problem", "answer"),
    "qa:HotpotQA": ("axon-rl/HotpotQA", "train", "problem", "answer"),
    "eval:QaOpen": ("google-research-datasets/nq_open", "validation", "question", "answer"),
    **{
        f"eval:{name}": ("axon-rl/search-eval", split, "question", "answer")
        for split, name in [
            ("2wiki", "2Wiki"),
            ("popqa", "PopQA"),
            ("tq", "TriviaQA"),
            ("hotpotqa", "HotpotQA"),
            ("bamboogle", "Bamboogle"),
            ("nq", "NaturalQuestions"),
            ("musique", "Musique"),
        ]
    },
}


def _register() -> None:
    entry_point = "gem_core.envs.qa:QAEnv"
    register(
        "qa:LocalWiki-v0",
        entry_point,
        description="244 questions over a 94-passage offline encyclopedia (gem_core/data/qa)",
        multi_turn=False,
        path="qa/questions.jsonl",
        answer_key="answers",
    )
    for env_id, (dataset_name, split, question_key, answer_key) in HUB_SETS.items():
        register(
            env_id,
            entry_point,
            description=f"{dataset_name} ({split})",
            multi_turn=False,
            data_source="hub",
            dataset_name=dataset_name,
            split=split,
            question_key=question_key,
            answer_key=answer_key,
        )


_register()
