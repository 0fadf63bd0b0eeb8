"""The policy of the learning experiments: a small Llama with a domain tokenizer, warmed up by SFT.

SmolLM2-135M takes about a minute per 16-episode step on 2 cores (``examples/train_trl.py``), too
slow for several seeds of several arms. The experiments therefore train a ~0.8M-parameter Llama
whose byte-level BPE tokenizer (512 ids, ChatML turn markers) is trained on the tasks' own text, so a
step takes about a second. It starts from a short supervised warm-up on episodes of a *scripted
warm-up player* that knows the reply format and plays legally but without skill: on the games, the
env's own ``sample_legal_action`` (a uniformly random legal move, from the env's action generator):

* ``guess`` (GuessTheNumber 1-10, 10 turns): a number the hints still allow; no preference for the
  middle, so binary search is what RL has to find; ``guess_range``: the same with the allowed range
  stated in every hint (``GuessTheNumberWithRange``);
* ``hangman`` (Hangman, 3 letters, 10 turns): a letter not yet guessed;
* ``sum`` (single turn, ``rg:basic_arithmetic``, a + b with one-digit terms): the right sum 30% of
  the time, otherwise a random number from -18 to 18 (an answer has no set of legal moves: this
  player reads the gold answer).

The baselines (``benchmarks/baselines``) add one player per game they train the small policy on, the
same legal player: ``guess_easy``/``guess_hard`` (GuessTheNumber's registered ids), ``mastermind`` (an
untried code of distinct symbols), ``minesweeper`` (reveal a hidden cell), ``wordle`` (an untried
answer-list word), ``hanoi`` (a legal move), ``sudoku`` (a digit no row, column or box rules out),
``fifteen`` and ``sokoban`` (a direction that moves), ``tictactoe`` (a free cell). Where random legal moves
almost never win, ``hanoi_solver50``, ``minesweeper_solver75``, ``wordle_solver25`` and
``sokoban_solver50`` play the env's solver on that share of the turns (``_solver_mix_warmup``), and
``sum_right60`` and ``sum_gold`` give the right sum on 60% and on all of the problems.

Everything is built locally and cached under ``$GEM_CACHE/learning`` (``gem_adapters.runtime.models.cache_dir``);
nothing is downloaded.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gem_core
from gem_adapters.algorithms import warmup
from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.episodes.episode import Episode
from gem_adapters.episodes.tasks import Task, make_tasks
from gem_adapters.runtime.models import cache_dir, tiny_llama_config
from gem_core.envs.games.guess_the_number import GuessTheNumberEnv
from gem_core.parsing import extract_boxed

CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


@dataclass(frozen=True)
class LearningTask:
    """What a learning run plays and how its policy is warmed up: the env, the warm-up player and the
    new tokens per turn. A run's episodes are ``gem_adapters.episodes.tasks.Task`` s of the env (``tasks``)."""

    env_id: str
    warmup_action: Callable[[Any, random.Random], str]  # (env, rng) -> the warm-up player's reply
    max_turn_tokens: int = 8
    observation_tokens: int = 160  # its longest observation as a prompt (ids): the games printing a board

    @property
    def prompt_tokens(self) -> int:
        """verl's share of a run's context for the first prompt (verl drops a task whose first prompt is
        longer); the rest is for the turns after it."""
        return max(256, self.observation_tokens)

    def tasks(self, num_tasks: int, first_seed: int) -> list[Task]:
        """The run's ``num_tasks`` tasks (seeds ``first_seed, first_seed + 1, ...``), one per prompt row."""
        return make_tasks(self.env_id, num_tasks, first_seed=first_seed)


def _legal_warmup(env: Any, rng: random.Random) -> str:
    """A uniformly random legal move (``Env.sample_legal_action``, from the env's action generator); any
    well-formed move where none is legal (a Sudoku filled into a dead end)."""
    return env.sample_legal_action() or env.sample_random_action()


def _solver_mix_warmup(share: float) -> Callable[[Any, random.Random], str]:
    """The env's solver (``Env.solve_action``) on a ``share`` of the turns, else a random legal move: a
    player that wins some games where random legal moves almost never do (Tower of Hanoi: 0.01 of 200
    games; with the solver on half the turns, 0.26), so that RL's batches hold wins to learn from."""

    def act(env: Any, rng: random.Random) -> str:
        return env.solve_action() if rng.random() < share else _legal_warmup(env, rng)

    return act


def _sum_warmup(share: float) -> Callable[[Any, random.Random], str]:
    """The gold answer on a ``share`` of the problems, else a random number from -18 to 18. A single-turn
    answer has no set of legal moves: this player is an oracle, reading the gold answer."""

    def act(env: Any, rng: random.Random) -> str:
        answer = env.example["answer"] if rng.random() < share else str(rng.randint(-18, 18))
        return f"<answer>{answer}</answer>"

    return act


class GuessTheNumberWithRange(GuessTheNumberEnv):
    """GuessTheNumber whose every hint also states the range the hints allow: the observation is a
    Markov state, so a small policy need not integrate the history to play legally."""

    def _play(self, move: str):
        observation, reward, done, info = super()._play(move)
        if not done:
            observation += f" The number is between {self.low} and {self.high}."
        return observation, reward, done, info


class PickSeven(gem_core.Env):
    """One turn: guess a number from 1 to 10; only 7 scores. The signal check: a clear reward that any
    working policy-gradient step learns in a few steps."""

    def reset(self, seed: int | None = None, **kwargs: Any):
        super().reset(seed)
        return (
            "I am thinking of an integer between 1 and 10 (inclusive). Reply with your guess inside "
            "\\boxed{}, e.g. \\boxed{5}."
        ), {}

    def step(self, action: str):
        success = extract_boxed(action) == "7"
        return "Correct!" if success else "Wrong.", float(success), True, False, {"success": success}


GUESS_1_10 = {"min_number": 1, "max_number": 10, "max_turns": 10}
# Binary search needs at most 6 guesses on 1-50, the warm-up player ~6.2 on average; 12 turns let
# both win, so only the discount rewards speed.
GUESS_1_50 = {"min_number": 1, "max_number": 50, "max_turns": 12}
LEARNING_ENVS = {  # id -> (entry point, description, constructor kwargs)
    "game:GuessTheNumber-v1-learn": (
        GuessTheNumberEnv,
        "GuessTheNumber 1-10 with 10 turns: every legal strategy can win; only speed differs.",
        GUESS_1_10,
    ),
    "game:GuessTheNumber-v1-learn-range": (
        GuessTheNumberWithRange,
        "game:GuessTheNumber-v1-learn whose hints also state the remaining range.",
        GUESS_1_10,
    ),
    "game:GuessTheNumber-v1-learn-range50": (
        GuessTheNumberWithRange,
        "GuessTheNumber 1-50 with 12 turns whose hints also state the remaining range.",
        GUESS_1_50,
    ),
    "learn:PickSeven-v0": (PickSeven, "One guess from 1 to 10; only 7 scores.", {}),
    "rg:sum-learn": (
        "gem_core.envs.reasoning_gym:ReasoningGymEnv",
        "a + b with one-digit terms (rg:basic_arithmetic).",
        {
            "name": "basic_arithmetic",
            "min_terms": 2,
            "max_terms": 2,
            "min_digits": 1,
            "max_digits": 1,
            "operators": ["+"],
        },
    ),
}


def _register() -> None:
    for env_id, (entry_point, description, kwargs) in LEARNING_ENVS.items():
        if env_id not in gem_core.list_envs(env_id):
            multi_turn = env_id.startswith("game:")
            gem_core.register(env_id, entry_point, description=description, multi_turn=multi_turn, **kwargs)


_register()
TASKS = {
    "guess": LearningTask("game:GuessTheNumber-v1-learn", _legal_warmup),
    "guess_range": LearningTask("game:GuessTheNumber-v1-learn-range", _legal_warmup),
    "guess50": LearningTask("game:GuessTheNumber-v1-learn-range50", _legal_warmup),
    "hangman": LearningTask("game:Hangman-v1-easy", _legal_warmup),
    "sum": LearningTask("rg:sum-learn", _sum_warmup(0.3), max_turn_tokens=10),
    "pick": LearningTask("learn:PickSeven-v0", lambda env, rng: f"\\boxed{{{rng.randint(1, 10)}}}"),
    # the baselines' games (benchmarks/baselines)
    "guess_easy": LearningTask("game:GuessTheNumber-v1-easy", _legal_warmup),
    "guess_hard": LearningTask("game:GuessTheNumber-v1-hard", _legal_warmup),
    "mastermind": LearningTask(
        "game:Mastermind-v1-easy", _legal_warmup, max_turn_tokens=16, observation_tokens=288
    ),
    "minesweeper": LearningTask(
        "game:Minesweeper-v1-easy", _legal_warmup, max_turn_tokens=16, observation_tokens=416
    ),
    "wordle": LearningTask("game:Wordle-v1-easy", _legal_warmup, max_turn_tokens=16),
    "wordle_solver25": LearningTask("game:Wordle-v1-easy", _solver_mix_warmup(0.25), max_turn_tokens=16),
    "hanoi": LearningTask(
        "game:TowerOfHanoi-v1-easy", _legal_warmup, max_turn_tokens=16, observation_tokens=352
    ),
    "hanoi_solver50": LearningTask(
        "game:TowerOfHanoi-v1-easy", _solver_mix_warmup(0.5), max_turn_tokens=16, observation_tokens=352
    ),
    "minesweeper_solver75": LearningTask(
        "game:Minesweeper-v1-easy", _solver_mix_warmup(0.75), max_turn_tokens=16, observation_tokens=416
    ),
    "sudoku": LearningTask("game:Sudoku-v1-easy", _legal_warmup, max_turn_tokens=16, observation_tokens=480),
    "fifteen": LearningTask(
        "game:FifteenPuzzle-v1-easy", _legal_warmup, max_turn_tokens=16, observation_tokens=320
    ),
    "sokoban": LearningTask(
        "game:Sokoban-v1-easy", _legal_warmup, max_turn_tokens=16, observation_tokens=416
    ),
    "sokoban_solver50": LearningTask(
        "game:Sokoban-v1-easy", _solver_mix_warmup(0.5), max_turn_tokens=16, observation_tokens=416
    ),
    "tictactoe": LearningTask("multiagent:TicTacToe-v0-random", _legal_warmup),
    "sum_right60": LearningTask("rg:sum-learn", _sum_warmup(0.6), max_turn_tokens=10),
    "sum_gold": LearningTask("rg:sum-learn", _sum_warmup(1.0), max_turn_tokens=10),
}
TOKENIZER_TASKS = ("guess", "hangman", "sum")  # what the shared tokenizer learns from


@dataclass(frozen=True)
class PolicySpec:
    """What the cached warm-up policy is built from (its hash names the cache folder)."""

    task: str
    seed: int = 0
    vocab_size: int = 512
    hidden_size: int = 128
    num_layers: int = 4
    warmup_episodes: int = 3000
    warmup_steps: int = 400
    warmup_batch: int = 32
    warmup_lr: float = 2e-3
    version: int = (
        2  # 2: the game players are Env.sample_legal_action (drawn from the env's action generator)
    )

    def folder(self) -> Path:
        digest = hashlib.sha1(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:10]
        return cache_dir() / "learning" / f"{self.task}-seed{self.seed}-{digest}"


@dataclass(frozen=True)
class MixedPolicySpec:
    """One small policy warmed up on several tasks at once (``benchmarks/baselines``' mixture rows): the
    union of the ``parts``' warm-ups. Each part's own SFT draws (its ``warmup_steps`` batches of
    ``warmup_batch`` sequences from its scripted episodes, drawn as its own build draws them) are pooled,
    shuffled and cut into batches of ``warmup_batch``, so every part's sequences are seen as often as in
    its single-task build, in one schedule of ``warmup_steps`` steps. The tokenizer is the shared one
    (``shared_tokenizer``): ids mean the same in every part. The parts share seed, sizes and learning rate."""

    parts: tuple[PolicySpec, ...]
    warmup_batch: int = 16
    version: int = 1

    def __post_init__(self) -> None:
        if len(self.parts) < 2 or len({p.task for p in self.parts}) != len(self.parts):
            raise ValueError(
                f"a mixed warm-up needs two or more distinct tasks, got {[p.task for p in self.parts]}"
            )
        shared = ("seed", "vocab_size", "hidden_size", "num_layers", "warmup_lr", "version")
        if len({tuple(getattr(p, k) for k in shared) for p in self.parts}) != 1:
            raise ValueError(f"the parts of a mixed warm-up must share {', '.join(shared)}")

    @property
    def seed(self) -> int:
        return self.parts[0].seed

    @property
    def vocab_size(self) -> int:
        return self.parts[0].vocab_size

    @property
    def hidden_size(self) -> int:
        return self.parts[0].hidden_size

    @property
    def num_layers(self) -> int:
        return self.parts[0].num_layers

    @property
    def warmup_lr(self) -> float:
        return self.parts[0].warmup_lr

    @property
    def task(self) -> str:
        return "+".join(p.task for p in self.parts)

    @property
    def warmup_steps(self) -> int:
        return math.ceil(sum(p.warmup_steps * p.warmup_batch for p in self.parts) / self.warmup_batch)

    def folder(self) -> Path:
        digest = hashlib.sha1(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:10]
        return cache_dir() / "learning" / f"mix{len(self.parts)}-seed{self.seed}-{digest}"


def scripted_games(task: LearningTask, num: int, seed: int) -> Iterator[tuple[int, list[warmup.Move]]]:
    """``num`` games of the task's warm-up player (``gem_adapters.algorithms.warmup.scripted_games``): game ``i`` on
    env seed ``seed * 1_000_003 + i``, the player's random numbers from ``random.Random(seed)``."""
    rng = random.Random(seed)
    seeds = [seed * 1_000_003 + i for i in range(num)]
    return warmup.scripted_games(task.env_id, seeds, lambda env: task.warmup_action(env, rng))


def scripted_episodes(task: LearningTask, renderer: ChatRenderer, num: int, seed: int) -> list[Episode]:
    """The games of ``scripted_games`` token by token, as a policy would have played them."""
    return warmup.episodes_of_games(task.env_id, scripted_games(task, num, seed), renderer)


def shared_tokenizer(spec: PolicySpec):
    """The policy's tokenizer: one for every task (learnt from the same episodes whatever the task), so
    ids mean the same."""
    corpus = [
        text
        for other in (TASKS[name] for name in TOKENIZER_TASKS)
        for _, moves in scripted_games(other, 200, seed=10_000 + spec.seed)
        for obs, action, (last_obs, *_) in moves
        for text in (obs, action, last_obs)
    ]
    return train_tokenizer(corpus, spec.vocab_size)


def train_tokenizer(texts: list[str], vocab_size: int):
    """A byte-level BPE (any text encodes; digits one id each) with ChatML turn markers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(texts, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>", padding_side="left"
    )
    tokenizer.chat_template = CHATML
    return tokenizer


def warmed_up_policy(spec: PolicySpec | MixedPolicySpec) -> Path:
    """The folder of the SFT-warmed policy (model + tokenizer) for ``spec``; built on first use, on one thread
    (~15 minutes for the experiments' 400 steps). Runs started together build it once: the others wait
    for it (a lock beside the folder)."""
    folder = spec.folder()
    if (folder / "config.json").exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / "config.json").exists():  # not built while this run waited
            _build_warmed_up_policy(spec, folder)
    return folder


def _build_warmed_up_policy(spec: PolicySpec | MixedPolicySpec, folder: Path) -> None:
    import torch

    tokenizer = shared_tokenizer(spec)
    batches = None
    if isinstance(spec, MixedPolicySpec):
        sequences, batches = [], mixed_warmup_batches(spec, tokenizer)
    else:
        episodes = scripted_episodes(
            TASKS[spec.task], ChatRenderer(tokenizer), spec.warmup_episodes, seed=spec.seed
        )
        sequences = [e.to_sequence() for e in episodes]

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # sums round differently on 2 threads, and the folder is named by the spec alone
    try:
        model, loss = supervised_warmup(tokenizer, sequences, spec, batches=batches)
    finally:
        torch.set_num_threads(threads)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    partial = folder.with_name(folder.name + ".partial")
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    info = {**asdict(spec), "task": spec.task, "warmup_steps": spec.warmup_steps, "final_sft_loss": loss}
    (partial / "spec.json").write_text(json.dumps(info, indent=1))
    partial.rename(folder)


def mixed_warmup_batches(spec: MixedPolicySpec, tokenizer) -> list[list]:
    """The SFT batches of a mixed warm-up (``MixedPolicySpec``): each part's draws as its own build
    makes them, pooled, shuffled (``random.Random(spec.seed)``) and cut into ``spec.warmup_batch``."""
    renderer = ChatRenderer(tokenizer)
    pool = []
    for part in spec.parts:
        episodes = scripted_episodes(TASKS[part.task], renderer, part.warmup_episodes, seed=part.seed)
        sequences = [e.to_sequence() for e in episodes]
        rng = random.Random(part.seed)  # as supervised_warmup draws the part's own batches
        pool += [s for _ in range(part.warmup_steps) for s in rng.sample(sequences, part.warmup_batch)]
    random.Random(spec.seed).shuffle(pool)
    return [pool[i : i + spec.warmup_batch] for i in range(0, len(pool), spec.warmup_batch)]


def supervised_warmup(
    tokenizer, sequences: list, spec: PolicySpec | MixedPolicySpec, batches: list | None = None
):
    """A fresh policy trained on ``sequences`` by ``spec``'s SFT schedule (``warmup_steps`` batches of
    ``warmup_batch`` drawn at random), or on the given ``batches`` in order (one step each); returns it
    and its last loss."""
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(spec.seed)
    config = tiny_llama_config(tokenizer, spec.hidden_size, spec.num_layers)
    config.max_position_embeddings = 1024
    model = LlamaForCausalLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.warmup_lr, weight_decay=0.0)
    steps = len(batches) if batches is not None else spec.warmup_steps
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, spec.warmup_lr, total_steps=steps)
    rng = random.Random(spec.seed)
    model.train()
    for step in range(steps):
        batch = batches[step] if batches is not None else rng.sample(sequences, spec.warmup_batch)
        width = max(len(s.token_ids) for s in batch)
        ids = torch.full((len(batch), width), tokenizer.pad_token_id)
        labels = torch.full((len(batch), width), -100)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        for row, s in enumerate(batch):
            n = len(s.token_ids)
            ids[row, :n] = torch.tensor(s.token_ids)
            attention[row, :n] = 1
            labels[row, :n] = torch.where(torch.tensor(s.loss_mask, dtype=torch.bool), ids[row, :n], -100)
        loss = model(input_ids=ids, attention_mask=attention, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
    return model, loss.item()
