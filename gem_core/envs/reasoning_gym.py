"""ReasoningGym: ``rg:<name>`` for each of the procedural datasets of the ``reasoning-gym`` package.

Each episode poses one generated puzzle and scores the answer with the dataset's own
``score_answer`` (a float in [0, 1], in ``info["score"]``). The answer is read from
``<answer>...</answer>`` (reasoning-gym's convention) or, when there is no such tag, from the last
``\\boxed{}`` (the reference GEM's).

The reward rule: **only a fully correct answer is rewarded** (reward 1.0 when the dataset's score is
1.0, else 0.0). The datasets' partial credit pays for junk: 41 of the 104 scorers give 0.0002-0.33 to
answers such as a NUL byte, a lone surrogate, ``9**9**9**9``, random text or the prompt echoed back,
because (measured on 0.1.23) many pay 0.01-0.1 to any non-empty answer that is not right
(``advanced_geometry``, ``color_cube_rotation``, ``countdown``, ``cryptarithm``, ``emoji_mystery``,
``fraction_simplification``, ``palindrome_generation``, ``power_function``, ``propositional_logic``,
``puzzle24``, ``rubiks_cube``, ``rush_hour``, ``sentence_reordering``, ``tsumego``, ...), some to any
parsable list or dict (``boxnet``, ``graph_color``, ``group_anagrams``, ``jugs``, ``codeio``), and the
string- and number-similarity scorers pay for any text sharing characters or digits with the gold
answer (``aiw``, ``acre``, ``count_bits``, ``gcd``, ``largest_island``, ``letter_counting``, ``maze``,
``rotate_matrix``, ``spell_backward``, ``number_sequence``, ``rectangle_count``, ``complex_arithmetic``'s
``exp(-distance)``, ...). No format check could separate such credit from real progress across 104
datasets, so the reward is the solved bit; ``partial_credit=True`` passes the dataset's score through
instead (for evaluation, or with that caveat for training).

| event                                                  | reward                            |
|--------------------------------------------------------|-----------------------------------|
| answer the dataset scores 1.0                          | 1.0                               |
| any other answer (its score is ``info["score"]``)      | 0.0 (``partial_credit``: the score) |
| scoring raised or timed out (``info["error"]``)        | 0.0                               |
| no answer tag and no ``\\boxed{}``, or an answer with control characters or lone surrogates | 0.0 (``format_error``) |

The puzzle of an episode is item ``i`` of ``reasoning_gym.create_dataset(name, size, seed=dataset_seed)``
with ``i`` drawn from ``self.rng``, so the same seed gives the same puzzle; reasoning-gym generates an
item from ``dataset_seed + i`` on demand, so a large ``size`` costs nothing (``acre`` builds every item
up front and gets a smaller default). Generated items are kept (the last 1024 per dataset), because
``codeio`` runs sample programs whose output is not always repeatable.

Puzzles are generated in a worker process (``grading.call(..., pool="generation")``) under
``generate_timeout`` (default 10 s; puzzles take milliseconds), because some generators never return:
``maze`` loops forever on items 5801, 7848 and 8743 (a grid with no free cell). An item whose generator
runs past the deadline is skipped for the next one, deterministically (``DatasetEnv.reset``: the same
seed gives the same puzzle) and reported in ``info["skipped_items"]``; the known cases (``KNOWN_HANGS``)
are skipped at once. Six generators (``codeio``, ``isomorphic_strings``, ``knight_swap``,
``polynomial_multiplication``, ``ransom_note``, ``word_ladder``) depend on ``PYTHONHASHSEED`` (they
iterate over sets): generation workers run with ``PYTHONHASHSEED=0`` unless it is set.
Scorers evaluate untrusted text (some with sympy), so scoring runs in a grading worker under
``grade_timeout`` (``gem_core.envs.grading``).

The ids are registered from ``DATASET_NAMES``, reasoning-gym 0.1.23's registry, so that importing
gem_core needs no reasoning-gym; a test checks the list against the installed package. Extra keyword
arguments go to the dataset's config, e.g. ``make("rg:basic_arithmetic", min_terms=4)``. ``rg:composite``
mixes several datasets (``datasets=[{"name", "weight", "config"}, ...]``; a small default mix).

Two scorers are patched: reasoning-gym's ``game_of_life_halting`` compares ``bool(answer)`` with
``bool(gold)``, so any non-empty answer to a "False" puzzle scored 1.0; here the answer must match the
gold ``True``/``False`` (case-insensitive). ``complex_arithmetic`` scores ``min(1.0, exp(-distance))``,
which is 1.0 for the answer ``nan``; here an answer that is not a finite number scores 0.
"""

from __future__ import annotations

import collections
import json
import math
import re
import threading
from typing import Any

from gem_core.envs import grading
from gem_core.envs.dataset import DatasetEnv, ExampleUnavailableError
from gem_core.extras import require
from gem_core.parsing import extract_boxed, extract_tag, preview
from gem_core.registry import register

INSTRUCTION = "Give your final answer inside <answer></answer> tags."
# No answer of any dataset holds these: C0 controls but tab and newlines, DEL, C1 controls, lone surrogates.
_MALFORMED_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
DEFAULT_SIZE = 10_000
SIZES = {"acre": 500}  # acre generates all of its items when the dataset is created
GRADE_TIMEOUT = 5.0
GENERATE_TIMEOUT = 10.0  # seconds to generate one puzzle (they take milliseconds; a few never end)
MAX_ANSWER_CHARS = 20_000
# Items whose generator never returns, by (name, dataset_seed, config_json), found by running past
# the deadline: skipped at once rather than after GENERATE_TIMEOUT (item i is generated from
# dataset_seed + i, so the size does not matter). maze draws a grid with no free cell and retries forever.
KNOWN_HANGS = {("maze", 42, "{}"): (5801, 7848, 8743)}
COMPOSITE_DEFAULT = [
    {"name": "basic_arithmetic", "weight": 1.0, "config": {}},
    {"name": "letter_counting", "weight": 1.0, "config": {}},
    {"name": "number_sorting", "weight": 1.0, "config": {}},
]

# reasoning_gym.factory.DATASETS of reasoning-gym 0.1.23
DATASET_NAMES = (
    "ab", "acre", "advanced_geometry", "aiw", "arc_1d", "arc_agi", "base_conversion", "basic_arithmetic",
    "bf", "binary_alternation", "binary_matrix", "bitwise_arithmetic", "boxnet", "caesar_cipher",
    "calendar_arithmetic", "chain_sum", "circuit_logic", "codeio", "color_cube_rotation",
    "complex_arithmetic", "composite", "count_bits", "count_primes", "countdown", "course_schedule",
    "cryptarithm", "decimal_arithmetic", "decimal_chain_sum", "dice", "emoji_mystery",
    "family_relationships", "figlet_font", "fraction_simplification", "futoshiki", "game_of_life",
    "game_of_life_halting", "gcd", "graph_color", "group_anagrams", "gsm_symbolic",
    "intermediate_integration", "isomorphic_strings", "jugs", "kakurasu", "knight_swap", "knights_knaves",
    "largest_island", "lcm", "leg_counting", "letter_counting", "letter_jumble", "list_functions",
    "mahjong_puzzle", "manipulate_matrix", "maze", "mini_sudoku", "modulo_grid", "n_queens",
    "needle_haystack", "number_filtering", "number_format", "number_sequence", "number_sorting",
    "palindrome_generation", "palindrome_partitioning", "polynomial_equations", "polynomial_multiplication",
    "pool_matrix", "power_function", "prime_factorization", "products", "propositional_logic", "puzzle24",
    "quantum_lock", "ransom_note", "rearc", "rectangle_count", "rotate_matrix", "rotten_oranges",
    "rubiks_cube", "rush_hour", "self_reference", "sentence_reordering", "shortest_path",
    "simple_equations", "simple_geometry", "simple_integration", "sokoban", "spell_backward",
    "spiral_matrix", "string_insertion", "string_manipulation", "string_splitting", "string_synthesis",
    "sudoku", "survo", "syllogism", "time_intervals", "tower_of_hanoi", "tsumego", "word_ladder",
    "word_sequence_reversal", "word_sorting", "zebra_puzzles",
)  # fmt: skip


class ReasoningGymEnv(DatasetEnv):
    """Single-turn puzzles from one reasoning-gym dataset, scored by its own ``score_answer``."""

    def __init__(
        self,
        name: str,
        size: int | None = None,
        dataset_seed: int = 42,
        instruction: str = INSTRUCTION,
        grade_timeout: float = GRADE_TIMEOUT,
        generate_timeout: float = GENERATE_TIMEOUT,
        partial_credit: bool = False,
        **config: Any,
    ):
        require("reasoning_gym", package="reasoning-gym", extra="tasks", needed_by="rg:* envs")
        if name == "composite":
            config.setdefault("datasets", COMPOSITE_DEFAULT)
        self.name = name
        self.size = size or SIZES.get(name, DEFAULT_SIZE)
        self.dataset_seed = dataset_seed
        self.config_json = json.dumps(config, sort_keys=True)
        super().__init__(puzzles(name, self.size, dataset_seed, self.config_json))
        self.instruction = instruction
        self.grade_timeout = grade_timeout
        self.generate_timeout = generate_timeout
        self.partial_credit = partial_credit

    def _example(self, index: int) -> Any:
        return self.examples.get(index, self.generate_timeout)

    def _prompt(self, example: Any) -> str:
        return f"{example['question']}\n\n{self.instruction}".strip()

    def _grade(self, action: str) -> tuple[float, str, dict[str, Any]]:
        answer = extract_tag(action, "answer")
        if answer is None:
            answer = extract_boxed(action)
        if not answer:
            feedback = (
                "No answer found: give your final answer inside <answer></answer> tags. "
                f"Your reply was: {preview(action) or '(empty)'}"
            )
            return 0.0, feedback, {"format_error": True}
        if _MALFORMED_TEXT.search(answer):
            feedback = "Your answer holds control characters or broken unicode; it counts as wrong."
            return 0.0, feedback, {"format_error": True}
        if len(answer) > MAX_ANSWER_CHARS:
            return 0.0, "Your answer is too long to be graded.", {"error": "answer too long"}
        try:
            score = grading.call(
                "gem_core.envs.reasoning_gym:score_in_worker",
                self.name,
                self.size,
                self.dataset_seed,
                self.config_json,
                self.example,
                answer,
                timeout=self.grade_timeout,
                warmup=(
                    "gem_core.envs.reasoning_gym:warm_up_worker",
                    (self.name, self.size, self.dataset_seed, self.config_json),
                ),
            )
        except grading.GradingError as exc:
            return 0.0, f"Your answer could not be scored ({exc}); it counts as wrong.", {"error": str(exc)}
        score = min(max(float(score), 0.0), 1.0) if math.isfinite(score) else 0.0
        reward = score if self.partial_credit else float(score >= 1.0)
        feedback = "Correct." if score >= 1.0 else f"Not fully correct (score {score:.2f})."
        return reward, feedback, {"score": score}

    def _random_answer(self) -> str:
        return f"<answer>{self.action_rng.randint(0, 100)}</answer>"


# ---- datasets and scoring, in this process and in grading workers ---------------------------------
class _Puzzles:
    """A reasoning-gym dataset as a sequence whose items are generated in a worker process under a
    deadline, and which remembers its most recent items.

    A few generators are not repeatable (``codeio``), so item ``i`` is generated once and then served
    from memory: within a process the same seed always gives the same puzzle. An item whose generator
    runs past the deadline (``maze`` loops forever on some seeds) is remembered as unavailable and
    ``get`` raises ``ExampleUnavailableError`` for it, at once the next times.
    """

    def __init__(self, key: tuple[str, int, int, str], memory: int = 1024):
        self.key, self.memory = key, memory
        self.items: collections.OrderedDict[int, dict] = collections.OrderedDict()
        hangs = KNOWN_HANGS.get((key[0], key[2], key[3]), ())
        self.unavailable: dict[int, str] = dict.fromkeys(hangs, "its generator never ends (a known case)")
        self.lock = threading.Lock()

    def __len__(self) -> int:
        return self.key[1]

    def __getitem__(self, index: int) -> dict:
        return self.get(index)

    def get(self, index: int, timeout: float = GENERATE_TIMEOUT) -> dict:
        if not 0 <= index < len(self):
            raise IndexError(f"item {index} is outside 0..{len(self) - 1}")
        with self.lock:
            if index in self.items:
                self.items.move_to_end(index)
                return self.items[index]
            if index in self.unavailable:
                raise ExampleUnavailableError(f"item {index}: {self.unavailable[index]}")
        try:
            item = grading.call(
                "gem_core.envs.reasoning_gym:item_in_worker",
                *self.key,
                index,
                timeout=timeout,
                warmup=("gem_core.envs.reasoning_gym:warm_up_worker", self.key),
                pool="generation",
            )
        except grading.GradingTimeout:
            why = f"generating it took longer than {timeout:g}s"
            with self.lock:
                self.unavailable[index] = why
            raise ExampleUnavailableError(f"item {index}: {why}") from None
        except grading.GradingError as exc:
            raise ExampleUnavailableError(f"item {index}: its generator failed ({exc})") from None
        with self.lock:
            item = self.items.setdefault(index, item)
            while len(self.items) > self.memory:
                self.items.popitem(last=False)
        return item


_DATASETS: dict[tuple[str, int, int, str], Any] = {}
_DATASETS_LOCK = threading.Lock()


_PUZZLES: dict[tuple[str, int, int, str], _Puzzles] = {}
_PUZZLES_LOCK = threading.Lock()


def puzzles(name: str, size: int, seed: int, config_json: str) -> _Puzzles:
    """The puzzles of a dataset, shared by every env of this process made with the same arguments.

    The dataset is built in a generation worker (``dataset``), which checks the config: an invalid
    one raises ``ValueError`` here.
    """
    key = (name, size, seed, config_json)
    with _PUZZLES_LOCK:
        if key in _PUZZLES:
            return _PUZZLES[key]
    try:
        grading.call(
            "gem_core.envs.reasoning_gym:warm_up_worker",
            *key,
            timeout=grading.STARTUP_TIMEOUT,
            pool="generation",
        )
    except grading.GradingError as exc:
        raise ValueError(f"cannot create the reasoning-gym dataset {name!r}: {exc}") from None
    with _PUZZLES_LOCK:
        return _PUZZLES.setdefault(key, _Puzzles(key))


def dataset(name: str, size: int, seed: int, config_json: str) -> Any:
    """The reasoning-gym dataset (a lazy sequence of puzzles), built once per process and arguments."""
    key = (name, size, seed, config_json)
    with _DATASETS_LOCK:
        if key not in _DATASETS:
            import reasoning_gym

            config = json.loads(config_json)
            if name == "composite":
                from reasoning_gym.composite import DatasetSpec

                config["datasets"] = [DatasetSpec(**spec) for spec in config["datasets"]]
            _DATASETS[key] = reasoning_gym.create_dataset(name, size=size, seed=seed, **config)
        return _DATASETS[key]


def warm_up_worker(name: str, size: int, seed: int, config_json: str) -> bool:
    dataset(name, size, seed, config_json)
    return True


def item_in_worker(name: str, size: int, seed: int, config_json: str, index: int) -> dict:
    """Runs in a generation worker: item ``index`` of the dataset."""
    return dataset(name, size, seed, config_json)[index]


def score_in_worker(name: str, size: int, seed: int, config_json: str, entry: dict, answer: str) -> float:
    """Runs in a grading worker: the dataset's own score for ``answer`` (patched where it is broken)."""
    data = dataset(name, size, seed, config_json)
    if name == "game_of_life_halting":
        return float(answer.strip().lower() == str(entry["answer"]).strip().lower())
    if name == "complex_arithmetic":  # min(1.0, exp(-distance)) is 1.0 when the distance is nan
        try:
            value = data.parse_string_to_complex(answer)
        except Exception:
            return 0.0
        if not isinstance(value, complex) or not (math.isfinite(value.real) and math.isfinite(value.imag)):
            return 0.0
    return float(data.score_answer(answer, entry))


def _register() -> None:
    for name in DATASET_NAMES:
        register(
            f"rg:{name}",
            "gem_core.envs.reasoning_gym:ReasoningGymEnv",
            description=f"reasoning-gym's {name}",
            multi_turn=False,
            name=name,
        )


_register()
