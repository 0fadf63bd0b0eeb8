"""The rows of the baseline tables: which env, which policy and warm-up, which estimators, how long.

A ``Row`` is one env trained by one policy; each of its ``estimators`` is one line of the table
(env x framework x estimator), trained for every seed in ``seeds``. Policies:

* ``small``: the ~0.8M-parameter Llama of ``benchmarks/learning`` (domain tokenizer), warmed up by
  SFT on games of the scripted legal player ``benchmarks.learning.common.TASKS[small_task]``; the
  warm-up is built once (``PolicySpec``, cached) and shared by the row's seeds;
* ``smollm2``: SmolLM2-135M-Instruct (offline), warmed up in each run by TRL's ``SFTTrainer`` on
  ``warmup_episodes`` episodes of ``players.PLAYERS[warmup_player]`` (the env's solver, or its
  reference answers), as ``examples/train_trl.py`` does with the solver;
* ``tiny-llava``: a randomly initialised ~3M-parameter LLaVA (``gem_adapters.policies.multimodal.tiny_llava``),
  the only vision-language model available offline, no warm-up.

A *mixture* row (``mixture``; ``parts``: small-policy rows of other envs) trains one small policy on
several envs at once: a mixed task list (``gem_adapters.trl.mixed_tasks_dataset``, equal shares in every
step, each env on the task seeds its single-env run plays), warmed up on the union of the parts'
scripted warm-ups (``benchmarks.learning.common.MixedPolicySpec``), evaluated on each env's held-out
episodes; ``report`` puts one line per env beside the single-env lines of ``compare_table``.

Steps and episodes per step are sized from the measured seconds per step (``smoke``) so that a row's
seeds take minutes to a few tens of minutes on the 2-core machine; ``expectation`` says beforehand
what the row should show and, for a row expected to fail, why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

FRAMEWORK = "trl"  # the framework these rows train through (GEMGRPOTrainer)
GAMMA = 0.9


@dataclass(frozen=True)
class Row:
    env_id: str
    category: str
    policy: str  # "small" | "smollm2" | "tiny-llava"
    estimators: tuple[str, ...] = ("rebn",)
    seeds: tuple[int, ...] = (0, 1, 2)
    steps: int = 16
    episodes_per_step: int = 64
    num_generations: int = 8
    learning_rate: float = 5e-4
    lr_schedule: str = "cosine"  # after 5 warm-up steps: "cosine" (to 0 at the last step) or "constant"
    gamma: float = GAMMA
    max_turns: int | None = None  # None: the env's own limit
    max_turn_tokens: int = 16
    max_context_tokens: int = 1024
    micro_batch_size: int | None = None  # episodes per forward/backward pass (None: the whole batch)
    mask_truncated_turns: bool = False  # no loss on actions cut off by max_turn_tokens (per turn)
    beta: float = 0.0  # KL penalty towards the policy RL starts from (TRL's beta)
    temperature: float = 1.0  # sampling temperature of the training episodes (held-out episodes: 1.0)
    entropy_target: float | None = None  # adaptive entropy bonus (TRL's, Skywork-OR1) towards this entropy
    reward_type: str = "dense"  # the training episodes' game reward ("sparse": a win only); held-out: dense
    env_kwargs: tuple[tuple[str, Any], ...] = ()  # smollm2: the env's settings in warm-up, training, held-out
    eval_episodes: int = 64  # held-out episodes before and after RL (the same seeds for every run)
    small_task: str | None = None  # small: the benchmarks.learning.common.TASKS warm-up player
    small_warmup_steps: int = 400  # small: SFT steps and batch of the warm-up build (PolicySpec); fewer
    small_warmup_batch: int = 32  # for long episodes, about 2M tokens (~10 minutes on one thread) in all
    warmup_player: str | None = None  # smollm2: the players.PLAYERS name imitated by the SFT warm-up
    warmup_episodes: int = 64  # smollm2: scripted episodes of the warm-up (one epoch, batch 8)
    expectation: str = ""
    verdict: str = ""  # set before the run: "learns" | "learns slowly" | "does not learn" (VERDICTS)
    parts: tuple[Row, ...] = ()  # a mixture: the single-env rows whose envs it trains on at once
    compare_table: str | None = None  # a mixture: the table whose lines of the parts it is compared with
    change: str = ""  # a row that tries one change on the row of its env and policy (``tried``): its slug

    @property
    def env_ids(self) -> tuple[str, ...]:
        """The envs the row trains on: its parts' for a mixture, else its own."""
        return tuple(p.env_id for p in self.parts) if self.parts else (self.env_id,)

    @property
    def base_name(self) -> str:
        """Env id and policy, as a file name: the name of the row without its change."""
        return re.sub(r"[^A-Za-z0-9.+-]+", "_", f"{self.env_id}--{self.policy}")

    @property
    def name(self) -> str:
        """The row's folder name: ``base_name``, then the change's slug if it tries one."""
        return f"{self.base_name}--{self.change}" if self.change else self.base_name

    def label(self, estimator: str) -> str:
        return f"{self.env_id} [{self.policy}{', ' + self.change if self.change else ''}, {estimator}]"


def _small(env_id: str, category: str, task: str, **settings) -> Row:
    return Row(env_id, category, "small", small_task=task, **settings)


# What every env of a mixture must share, being played by one policy under one trainer configuration.
MIXTURE_SHARED = ("policy", "gamma", "max_turns", "max_turn_tokens", "max_context_tokens", "learning_rate")


def mixture(env_id: str, category: str, parts: list[Row], **settings) -> Row:
    """A row training one small policy on the ``parts``' envs at once (module docstring); the parts must
    agree on ``MIXTURE_SHARED``, which the mixture takes from them, and its groups per step must split
    evenly over the envs."""
    if any(p.policy != "small" or p.parts for p in parts) or len({p.env_id for p in parts}) != len(parts):
        raise ValueError("a mixture's parts are single-env small-policy rows of distinct envs")
    for key in MIXTURE_SHARED:
        if len({getattr(p, key) for p in parts}) != 1:
            raise ValueError(f"a mixture's parts must share {key}: {[getattr(p, key) for p in parts]}")
    row = Row(
        env_id, category, parts=tuple(parts), **{k: getattr(parts[0], k) for k in MIXTURE_SHARED}, **settings
    )
    if (row.episodes_per_step // row.num_generations) % len(parts):
        raise ValueError(f"{row.name}: the groups of a step must split evenly over its {len(parts)} envs")
    return row


def _smollm2(env_id: str, category: str, player: str | None, **settings) -> Row:
    defaults = dict(
        episodes_per_step=16, num_generations=4, learning_rate=2e-5, lr_schedule="constant",
        micro_batch_size=4, eval_episodes=24, max_context_tokens=2048, steps=6,
    )  # fmt: skip
    return Row(env_id, category, "smollm2", warmup_player=player, **{**defaults, **settings})


BOTH = ("rebn", "grpo")
# SmolLM2 rows whose episodes are long conversations: half the batch and held-out episodes, to fit a session
LONG_CONVERSATIONS = dict(episodes_per_step=8, num_generations=2, eval_episodes=16)
ENVS = [
    # ---- games, the small policy (a scripted legal player for its warm-up) ----
    _small(
        "game:GuessTheNumber-v1-easy",
        "game (easy)",
        "guess_easy",
        estimators=(*BOTH, "gigpo"),
        episodes_per_step=64,
        steps=20,
        expectation="learns: 4 turns on 1-10 reward a bisecting first guess; the warm-up player wins ~0.77",
    ),
    _small(
        "game:GuessTheNumber-v1-hard",
        "game (hard)",
        "guess_hard",
        estimators=(*BOTH, "gigpo"),
        small_warmup_steps=400,
        small_warmup_batch=16,
        episodes_per_step=64,
        steps=20,
        expectation="learns a little: 7 turns on 1-50 leave room above the warm-up player's ~0.69",
    ),
    _small(
        "game:Hangman-v1-easy",
        "game (easy)",
        "hangman",
        small_warmup_steps=200,
        small_warmup_batch=16,
        estimators=BOTH,
        steps=40,
        expectation="small or no gain: letter frequencies help, but 3-letter words leave few clues and the "
        "warm-up player wins ~0.03",
    ),
    _small(
        "game:Mastermind-v1-easy",
        "game (easy)",
        "mastermind",
        small_warmup_steps=100,
        small_warmup_batch=16,
        estimators=BOTH,
        max_context_tokens=2048,
        expectation="learns some: not repeating a scored code and using the pegs beats the warm-up's ~0.31",
    ),
    _small(
        "game:Minesweeper-v1-easy",
        "game (easy)",
        "minesweeper",
        small_warmup_steps=190,
        small_warmup_batch=16,
        expectation="no gain expected: winning needs reading numbers around cells; the warm-up never wins",
    ),
    _small(
        "game:FifteenPuzzle-v1-easy",
        "game (easy)",
        "fifteen",
        small_warmup_steps=160,
        small_warmup_batch=16,
        expectation="learns some: a 2x2 puzzle with 10 turns; random legal slides win ~0.23",
    ),
    _small(
        "game:TowerOfHanoi-v1-easy",
        "game (hard)",
        "hanoi",
        small_warmup_steps=110,
        small_warmup_batch=16,
        max_context_tokens=1536,
        expectation="no gain expected: 7 exact moves in 10 turns; random legal moves win ~0.01, so almost no "
        "episode is ever rewarded with success (only the progress reward shapes it)",
    ),
    _small(
        "game:Wordle-v1-easy",
        "game (hard)",
        "wordle",
        small_warmup_steps=60,
        small_warmup_batch=16,
        max_context_tokens=2560,
        episodes_per_step=32,
        num_generations=4,
        expectation="no gain expected: using G/Y/- marks over a growing history is beyond a 0.8M model "
        "in this budget; random untried words win ~0.05",
    ),
    _small(
        "game:Sokoban-v1-easy",
        "game (hard)",
        "sokoban",
        small_warmup_steps=55,
        small_warmup_batch=16,
        max_context_tokens=2048,
        episodes_per_step=16,
        num_generations=4,
        max_turns=12,  # the solver took <= 11 moves on 20 boards
        eval_episodes=32,
        expectation="no gain expected: planning pushes from a board printed as text; random moves win ~0.06",
    ),
    _small(
        "multiagent:TicTacToe-v0-random",
        "multi-agent",
        "tictactoe",
        small_warmup_steps=235,
        small_warmup_batch=16,
        estimators=BOTH,
        expectation="learns: against a random opponent taking centre and completing lines lifts wins from ~0.55",
    ),
    # ---- reasoning-gym, the small policy ----
    _small(
        "rg:sum-learn",
        "reasoning-gym",
        "sum",
        estimators=BOTH,
        episodes_per_step=64,
        steps=20,
        max_turn_tokens=10,
        expectation="learns: one-digit sums (rg:basic_arithmetic) from a player right 30% of the time",
    ),
    # ---- SmolLM2-135M: games with the solver, tasks with reference answers ----
    _smollm2(
        "game:GuessTheNumber-v1-easy",
        "game (easy)",
        "solver",
        estimators=BOTH,
        steps=8,
        num_generations=2,
        max_turn_tokens=12,
        max_context_tokens=1024,
        expectation="learns (examples/train_trl.py's setting, without its worked-game prefix): the solver "
        "warm-up gives ~0.8, RL adds to it",
    ),
    _smollm2(
        "game:Mastermind-v1-easy",
        "game (easy)",
        "solver",
        max_turn_tokens=16,
        expectation="keeps or adds a little: the solver warm-up plays consistent codes; RL has to keep "
        "it from repeating scored codes",
    ),
    _smollm2(
        "game:Wordle-v1-easy",
        "game (hard)",
        "solver",
        max_turn_tokens=16,
        expectation="little or no gain: the solver's choice needs the whole mark history; SmolLM2 imitates "
        "its format, not its elimination",
    ),
    _smollm2(
        "game:Sudoku-v1-easy",
        "game (easy)",
        "solver",
        max_turn_tokens=16,
        max_turns=8,  # the solver fills the 6 empty cells in 6 turns; SmolLM2 played all 15 (93% invalid moves)
        **LONG_CONVERSATIONS,
        expectation="after the solver warm-up little to gain or lose: 4x4 with few empty cells",
    ),
    _smollm2(
        "math:Arithmetic-v0",
        "math",
        "math_answer",
        estimators=BOTH,
        max_turn_tokens=48,
        expectation="small gain at most: a 135M model computing 3-operation expressions in its head; "
        "the 60 problems are also the evaluation set (no held-out split)",
    ),
    _smollm2(
        "tool:Arithmetic-v0-python",
        "math + Python tool",
        "python_then_answer",
        max_turn_tokens=64,
        expectation="learns: writing the expression in Python and copying the printed result is within "
        "a 135M model after the warm-up; the gain over math:Arithmetic-v0 is the tool's",
    ),
    _smollm2(
        "tool:LocalWiki-v0-search",
        "QA + search tool",
        "search_then_answer",
        max_turn_tokens=48,
        expectation="learns some: search the question, copy the answer span from the passage",
    ),
    _smollm2(
        "code:PythonBasics-v0",
        "code",
        "code_reference",
        max_turn_tokens=192,
        num_generations=4,
        max_context_tokens=1536,
        expectation="small gain at most: 41 problems, programs of 3-10 lines; the warm-up imitates "
        "reference programs of other problems",
    ),
    _smollm2(
        "terminal:Mixed-v0",
        "terminal",
        "terminal_solution",
        max_turn_tokens=96,
        max_turns=4,
        expectation="memorises: 21 fixed tasks, warm-up on their reference commands, evaluated on the same tasks",
    ),
    _smollm2(
        "rg:letter_counting",
        "reasoning-gym",
        "tag_answer",
        max_turn_tokens=24,
        expectation="no gain expected: counting letters needs character-level reading a 135M BPE model "
        "lacks; the warm-up only teaches the answer format",
    ),
    _smollm2(
        "logic:RuleTaker-v0-d1",
        "logic",
        "boxed_label",
        max_turn_tokens=12,
        expectation="near chance (1/3): one-step deduction over a generated theory; the warm-up teaches "
        "the labels, not the reasoning",
    ),
    _smollm2(
        "multiagent:CustomerService-v0",
        "multi-agent",
        "customer_service_reference",
        steps=6,
        **LONG_CONVERSATIONS,
        max_turn_tokens=96,
        max_turns=12,
        max_context_tokens=3072,
        expectation="memorises some: 7 scenarios with a scripted customer; the warm-up imitates their "
        "reference conversations",
    ),
    # ---- SmolLM2-135M: a database, web shopping, web navigation (issue 47's envs), the solver's warm-up ----
    _smollm2(
        "sql:Mixed-v0-easy",
        "database (SQL)",
        "solver",
        max_turn_tokens=64,
        expectation="memorises the answer format at most: the solver writes the gold query, which a 135M "
        "model imitates for templates it saw, not for a new database's values",
    ),
    _smollm2(
        "web:Shop-v0",
        "web shopping",
        "solver",
        max_turn_tokens=32,
        max_turns=8,  # the solver buys in <= 7 turns (20 instructions)
        warmup_episodes=32,  # web pages make long conversations (as WikiGame's below)
        **LONG_CONVERSATIONS,
        expectation="partial reward at most: search and click follow the instruction's words, matching "
        "attributes and options on a product page is beyond a 32-episode warm-up",
    ),
    _smollm2(
        "web:WikiGame-v0-easy",
        "web navigation",
        "solver",
        max_turn_tokens=16,
        max_turns=5,  # the solver's shortest paths took <= 5 clicks (20 games)
        warmup_episodes=32,  # its 64-episode warm-up took 13 minutes, its first RL step 7 (6 turns)
        **LONG_CONVERSATIONS,
        expectation="little: the solver follows shortest paths on a link graph the model cannot see whole; "
        "it can learn to click a link that names the target",
    ),
    _smollm2(
        "math:GeometryFigures-v0-easy",
        "vision",
        None,
        steps=6,
        max_turn_tokens=16,
        expectation="cannot learn on CPU: the only offline VLM is a random-init 3M LLaVA seeing 32-px "
        "figures; it never writes a boxed answer, so every reward is 0",
    ),
]
ENVS[-1] = replace(ENVS[-1], policy="tiny-llava", learning_rate=1e-3)
# A table that runs in about a minute: the runner and the trainer end to end (the tests run it).
CHECK = [
    _small(
        "learn:PickSeven-v0",
        "check",
        "pick",
        seeds=(0, 1),
        steps=1,
        episodes_per_step=8,
        num_generations=4,
        eval_episodes=8,
        small_warmup_steps=40,
        lr_schedule="constant",
        expectation="runs: one step of 8 one-turn episodes per seed",
    )
]

# ---- the plateau campaign (issue 58) ------------------------------------------------------------------
VERDICTS = ("learns", "learns slowly", "does not learn")
# Budgets to a plateau: every small-policy line >= 60 steps x 64 episodes (more where today's steps are
# cheap and the rise slow), every SmolLM2 line >= 24 steps x 16 episodes (32 where 6 steps already rose).
# The small policy keeps its cosine schedule (to 0 at the last step): benchmarks/results/learning
# section 14 measured constant 5e-4 not holding its gains over 120 steps while cosine to 0 did; the
# plateau step (``results.plateau``) is therefore read on a curve whose late steps also anneal.
PLATEAU_BUDGET = {
    "small": dict(steps=60, episodes_per_step=64, num_generations=8, eval_episodes=64),
    "smollm2": dict(steps=24, episodes_per_step=16, num_generations=4, eval_episodes=24),
    "tiny-llava": dict(steps=24, episodes_per_step=16, num_generations=4, eval_episodes=24),
}
_ENVS_BY_NAME = {r.name: r for r in ENVS}


def _plateau(name: str, verdict: str, expectation: str, **changes) -> Row:
    """The ``envs`` row ``name`` at the campaign's budget, with its verdict and expectation set now."""
    assert verdict in VERDICTS, verdict
    base = _ENVS_BY_NAME[name]
    settings = {**PLATEAU_BUDGET[base.policy], "estimators": ("rebn",), **changes}
    return replace(base, **settings, verdict=verdict, expectation=expectation)


REBN_GRPO = ("rebn", "grpo")
# One row per env (24): where two policies played an env today, the one with room to learn. Left out:
# SmolLM2 on GuessTheNumber-easy (1.00 before RL on every seed: no room), SmolLM2 on Wordle (never run;
# the small policy's row stands for the env), the small policy on Mastermind (no clear change in 16
# steps; SmolLM2 rose there). GRPO beside ReBN on 5 envs where ReBN rose today (FifteenPuzzle, TicTacToe,
# GuessTheNumber-easy, Hangman, RuleTaker). The order is the run order (``run plateau --workers 2``
# takes rows in this order, two at a time): first FifteenPuzzle (small) beside RuleTaker (SmolLM2), which
# check the plateau definition on a fast riser and the SmolLM2 seconds-per-step assumption of the plan
# within ~3 hours; then the long SmolLM2 rows, each beside small-policy rows, longest first.
PLATEAU = [
    _plateau(
        "game_FifteenPuzzle-v1-easy--small",
        "learns",
        estimators=REBN_GRPO,
        expectation="learns, plateau before step 30: today +0.52 [0.50, 0.55] in 16 steps (0.22 -> 0.73); "
        "GRPO beside it",
    ),
    _plateau(
        "logic_RuleTaker-v0-d1--smollm2",
        "learns",
        estimators=REBN_GRPO,
        steps=32,
        expectation="learns: today +0.11 [0.08, 0.12] in 6 steps (0.21 -> 0.32, near the 1/3 chance of "
        "three labels); 32 steps to see it pass chance or flatten there; GRPO beside it",
    ),
    _plateau(
        "web_Shop-v0--smollm2",
        "does not learn",
        expectation="does not learn: today 0.04 -> 0.04 [0.00, 0.12]; RL cut format errors, not mismatched "
        "purchases. Diagnosis to measure: the share of batches with any full-credit purchase and the "
        "return's partial score; smallest change: the 64-episode warm-up instead of 32",
    ),
    _plateau(
        "multiagent_CustomerService-v0--smollm2",
        "does not learn",
        expectation="does not learn: today 0.17 -> 0.08 (two of three seeds fell) at 8 episodes a step; "
        "now 16 a step (4 scenarios x 4). Diagnosis: success per scenario before "
        "and after; smallest change: lr 1e-5",
    ),
    _plateau(
        "web_WikiGame-v0-easy--smollm2",
        "learns slowly",
        expectation="learns slowly: today success 0.00 -> 0.06 (no clear change) while the return rose on "
        "every seed (invalid clicks 0.24-0.29 -> 0.01-0.11); success should follow the return at 24 steps",
    ),
    _plateau(
        "game_Sudoku-v1-easy--smollm2",
        "does not learn",
        expectation="does not learn: 0.00 before and after today, 87-98% of moves invalid, so no batch "
        "holds a win. Diagnosis: invalid-move rate per step; smallest change: warm-up on 128 solver "
        "episodes (legal moves first)",
    ),
    _plateau(
        "game_Mastermind-v1-easy--smollm2",
        "learns",
        expectation="learns: today +0.11 [0.04, 0.21] in 6 steps (0.19 -> 0.31), invalid guesses 22-37% "
        "-> 13-15%; plateau expected once repeats are gone, before step 24",
    ),
    _plateau(
        "multiagent_TicTacToe-v0-random--small",
        "learns",
        estimators=REBN_GRPO,
        expectation="learns: today +0.05 [0.03, 0.08] ReBN and +0.07 [0.02, 0.11] GRPO in 16 steps "
        "(from 0.17); still rising then, so the plateau should fall between steps 20 and 60",
    ),
    _plateau(
        "game_Hangman-v1-easy--small",
        "learns slowly",
        estimators=REBN_GRPO,
        steps=90,
        expectation="learns slowly: today +0.03 [0.02, 0.05] ReBN in 40 steps (0.05 -> 0.08), GRPO no "
        "clear change; 90 steps",
    ),
    _plateau(
        "game_GuessTheNumber-v1-easy--small",
        "learns",
        estimators=REBN_GRPO,
        steps=120,
        expectation="learns: today +0.07 ReBN / +0.08 GRPO in 20 steps (0.36 -> 0.43); 120 steps cost "
        "minutes (1.3 s a step) and reach the warm-up player's ~0.77 or a plateau below it",
    ),
    _plateau(
        "game_GuessTheNumber-v1-hard--small",
        "learns slowly",
        steps=120,
        expectation="learns slowly: today +0.03 [0.02, 0.03] in 20 steps (0.14 -> 0.17); 120 steps at "
        "5 s a step",
    ),
    _plateau(
        "rg_sum-learn--small",
        "learns slowly",
        steps=120,
        expectation="learns slowly: today +0.03 in 20 steps (0.02 -> 0.04; GRPO's interval clear of 0, "
        "ReBN's not); 120 steps at 0.2 s a step",
    ),
    _plateau(
        "game_Minesweeper-v1-easy--small",
        "does not learn",
        expectation="does not learn: today 0.00 -> 0.02 [0.00, 0.03]; the warm-up never wins, so batches "
        "hold almost no success. Diagnosis: wins per batch and the return's reveal reward; smallest "
        "change: success-only reward is not it (no wins) -- a warm-up on a safe-cell player",
    ),
    _plateau(
        "game_TowerOfHanoi-v1-easy--small",
        "does not learn",
        expectation="does not learn: today success 0.02 -> 0.00 on every seed while the return rose "
        "(-0.18 -> -0.09): the progress reward is learnt, not the 7-move solution. Diagnosis: success "
        "and return curves apart; smallest change: success-only reward (gamma 0.9 kept)",
    ),
    _plateau(
        "game_Wordle-v1-easy--small",
        "does not learn",
        max_context_tokens=2560,
        expectation="does not learn: 0.00 before and after today (32 episodes a step, now 64); no batch "
        "holds a win. Diagnosis: wins per batch, repeated words; smallest change: SmolLM2 with the solver "
        "warm-up (its row, not run today)",
    ),
    _plateau(
        "game_Sokoban-v1-easy--small",
        "does not learn",
        expectation="does not learn: today 0.03 -> 0.05, no clear change at 16 episodes a step (now 64, "
        "12 turns); random moves win ~0.06. Diagnosis: wins per batch, pushes into corners",
    ),
    _plateau(
        "sql_Mixed-v0-easy--smollm2",
        "learns",
        steps=32,
        expectation="learns: today +0.08 [0.04, 0.12] in 6 steps (0.44 -> 0.53), every seed; 32 steps",
    ),
    _plateau(
        "terminal_Mixed-v0--smollm2",
        "learns slowly",
        expectation="learns slowly (memorises): today 0.04 -> 0.06, return 0.03 -> 0.07 on 21 fixed tasks "
        "evaluated as trained",
    ),
    _plateau(
        "rg_letter_counting--smollm2",
        "does not learn",
        expectation="does not learn: today 0.28 -> 0.31, no clear change [-0.08, 0.08]; counting letters "
        "needs character-level reading. Diagnosis: success by word length; smallest change: none within "
        "a 135M BPE model expected",
    ),
    _plateau(
        "tool_Arithmetic-v0-python--smollm2",
        "learns",
        expectation="learns (set again before its second run): its first run, 0.04 -> 0.03 with no episode "
        "calling Python, had a broken warm-up: the scripted player answered the first game's question at "
        "once in every later game (``players._planned`` kept one plan per env, and the warm-up plays every "
        "game in one env), so the policy learnt to answer at once with a stale number. With a plan per game "
        "the warm-up calls Python, whose printed result is the answer to copy",
    ),
    _plateau(
        "tool_LocalWiki-v0-search--smollm2",
        "learns slowly",
        estimators=REBN_GRPO,  # added after ReBN rose here: GRPO beside it (item 1)
        expectation="learns slowly (set again before its second run): its first run, 0.01 -> 0.01 with no "
        "episode searching, had the Python tool row's broken warm-up (the first game's answer replayed at "
        "once in every later game). With a plan per game the warm-up searches; copying the answer span out "
        "of a retrieved passage is harder for 135M than copying a printed number: a slow rise",
    ),
    _plateau(
        "code_PythonBasics-v0--smollm2",
        "does not learn",
        estimators=REBN_GRPO,  # added after ReBN rose here: GRPO beside it (item 1)
        expectation="does not learn: today 0.00 -> 0.01 on 41 problems. Diagnosis: tests passed per "
        "program (partial credit); smallest change: none expected at 135M",
    ),
    _plateau(
        "math_Arithmetic-v0--smollm2",
        "does not learn",
        expectation="does not learn: today 0.00 -> 0.01 with ReBN and GRPO; mental 3-operation arithmetic "
        "at 135M. Diagnosis: boxed-answer rate; the tool row is the change that should make it learn",
    ),
    _plateau(
        "math_GeometryFigures-v0-easy--tiny-llava",
        "does not learn",
        expectation="does not learn: the random-init 3M LLaVA never writes a boxed answer, every reward "
        "is 0 and every ReBN advantage 0; 24 steps x 16 confirm it at 0.02 machine-hours",
    ),
]


def _tried(
    name: str,
    change: str,
    verdict: str,
    expectation: str,
    estimators: tuple[str, ...] = ("rebn",),
    **settings,
) -> Row:
    """The plateau row ``name`` trying one change (``settings``, slug ``change``) where it did not learn:
    ReBN (GRPO beside it once ReBN rose with the change: item 1's comparison), the same budget and seeds
    (or, as the change, more steps where its line was still rising); its verdict and expectation set before
    it runs. ``name`` may be a tried row: the change is made on top of its change (slugs joined by ``--``)."""
    assert verdict in VERDICTS, verdict
    assert estimators[0] == "rebn" and set(estimators) <= set(BOTH), estimators
    base = next(r for r in PLATEAU if r.name == name)
    return replace(
        base,
        **settings,
        change=f"{base.change}--{change}" if base.change else change,
        estimators=estimators,
        verdict=verdict,
        expectation=expectation,
    )


# The smallest change tried on each row that did not learn (issue 58, item 2), from the diagnosis of the
# batches RL starts from (``diagnose``: results in plateau/diagnoses/).
PLATEAU += [
    _tried(
        "game_GuessTheNumber-v1-easy--small",
        "warmup-x4",
        "learns",
        estimators=BOTH,  # ReBN rose with the change: GRPO beside it (item 1)
        small_warmup_steps=1600,
        expectation="learns: diagnosis of the 400-step warm-up: 21% of its guesses (45% of those after the "
        "first) contradict an earlier hint (its scripted player's: none), while every group of a batch has a signal; RL did "
        "not teach hint-keeping in 120 steps. A 4x longer warm-up (1,600 SFT steps) should bring the "
        "policy nearer its player's ~0.77, from where RL has the remaining mistakes to remove",
    ),
    _tried(
        "game_GuessTheNumber-v1-easy--small",
        "mask-cut-turns",
        "learns slowly",
        mask_truncated_turns=True,
        expectation="learns slowly: in 2 of its 6 runs (ReBN seed 0, GRPO seed 0) the policy stopped ending "
        "its turns after ~step 35: every turn ran to the 16-token budget (6 tokens before) and entropy "
        "doubled, the tokens after the guess drifting under advantages they do not earn. No loss on cut "
        "turns keeps the end-of-turn token; the runs that kept it rose little either, so a slow rise at most",
    ),
    _tried(
        "game_GuessTheNumber-v1-easy--small",
        "kl-0.04",
        "learns slowly",
        beta=0.04,
        expectation="learns slowly: the drift that ends in cut turns (2 of 6 runs; the same in Hangman, whose "
        "entropy went 0.58 -> 2.43, and TicTacToe) starts on tokens no reward tells apart; a KL penalty "
        "towards the warm-up (TRL's beta 0.04) holds them, keeping the signal for the guesses",
    ),
    _tried(
        "game_GuessTheNumber-v1-hard--small",
        "warmup-x4",
        "learns slowly",
        small_warmup_steps=1600,
        expectation="learns slowly: as GuessTheNumber-easy, 30% of the warm-up's guesses (53% of those after "
        "the first) contradict a hint (1-50, 7 turns); a 4x longer warm-up first",
    ),
    _tried(
        "rg_sum-learn--small",
        "warmup-x4",
        "learns slowly",
        small_warmup_steps=1600,
        expectation="learns slowly: diagnosis: the warm-up policy answers 1.6% right (its player: ~30%), so "
        "1 group in 8 holds a reward and RL sees almost no signal; a 4x longer warm-up should reach the "
        "player's rate and give most groups a signal",
    ),
    _tried(
        "game_GuessTheNumber-v1-hard--small",
        "kl-0.04",
        "does not learn",
        beta=0.04,
        expectation="does not learn: its runs kept ending their turns (6.8 tokens a turn throughout), so the "
        "drift a KL penalty holds is not what stops it; tried because GuessTheNumber-easy's first KL run "
        "rose (0.31 -> 0.45) beyond its row's",
    ),
    _tried(
        "rg_sum-learn--small",
        "kl-0.04",
        "does not learn",
        beta=0.04,
        expectation="does not learn: a KL penalty keeps the end-of-answer token (2 of 3 runs lost it) but adds "
        "no signal: 1 group in 8 rewarded",
    ),
    _tried(
        "rg_sum-learn--small",
        "mask-cut-turns",
        "does not learn",
        mask_truncated_turns=True,
        expectation="does not learn: in 2 of 3 runs the answers ran to the 10-token budget after the collapse "
        "of the end-of-answer token and success fell to 0; masking cut answers removes that collapse, not "
        "the lack of signal (1 group in 8 rewarded), so no clear rise expected",
    ),
    _tried(
        "game_TowerOfHanoi-v1-easy--small",
        "solver-warmup",
        "learns",
        estimators=BOTH,  # ReBN rose with the change: GRPO beside it (item 1)
        small_task="hanoi_solver50",
        expectation="learns: in 180 RL steps (11,520 episodes) no training episode was won, since the warm-up "
        "imitates random legal moves (0.01 of games won), so success never had a signal while the "
        "invalid-move penalty was learnt (19% -> 1%). Warmed up on a player that takes the solver's move on "
        "half the turns (0.26 of games won), every batch should hold wins for RL to raise",
    ),
    _tried(
        "game_Minesweeper-v1-easy--small",
        "solver-warmup",
        "learns slowly",
        small_task="minesweeper_solver75",
        expectation="learns slowly: the random-legal warm-up won ~1% of training episodes and 35-37% of its "
        "moves stayed invalid through RL. Warmed up on the solver's move on 3 turns in 4 (that player wins "
        "0.33; the solver alone 0.78, Minesweeper needs guesses) RL starts from wins in every batch",
    ),
    _tried(
        "multiagent_TicTacToe-v0-random--small",
        "warmup-x4",
        "learns slowly",
        small_warmup_steps=940,
        expectation="learns slowly: the 235-step warm-up imitates a player of random free cells, which wins "
        "0.61 (the line's chance), yet plays 41% of its moves on taken squares and wins 0.19; RL kept 42-47% "
        "invalid. 4x longer should bring invalid moves near 0 and success near 0.6, from where RL must find "
        "the lines that pass chance: a slow rise at most",
    ),
    _tried(
        "tool_Arithmetic-v0-python--smollm2",
        "warmup-32",
        "learns slowly",
        warmup_episodes=32,
        expectation="learns slowly: with its fixed 64-episode warm-up (8 SFT steps) the row starts at 0.93 and "
        "ends at 0.97, no room for a clear rise. A 16-game warm-up (2 SFT steps), tried first, was too weak: "
        "over 18 RL steps of its first seed 76-100% of the turns had no tool call or answer in the format, "
        "one batch held a reward, and it was stopped. 32 games (4 SFT steps) should teach the format in part, "
        "leaving RL groups with a signal and room to raise the share of episodes that call Python",
    ),
    _tried(
        "game_Wordle-v1-easy--small",
        "solver-warmup",
        "learns slowly",
        small_task="wordle_solver25",
        expectation="learns slowly: the random-legal warm-up wins 0.04 of 200 games and RL won ~1% of its "
        "training episodes, below the random player (0.05), while invalid guesses fell 74% -> 55%. Warmed up on "
        "a player that guesses the solver's word on 1 turn in 4 (it wins 0.86 of 200 games; 1 in 10 wins 0.54) "
        "RL starts from wins in its batches; the solver's moves read all feedback so far, hard to imitate "
        "for the small policy: a slow rise",
    ),
    _tried(
        "game_Mastermind-v1-easy--smollm2",
        "steps-48",
        "learns slowly",
        steps=48,
        # a fourth seed (twenty-sixth stop): 2 seeds of 3 used the feedback, the third did not; a fifth
        # (thirty-fourth): the held-out wins split by precision, so seed 4 runs in fp32 on a bf16 CPU
        seeds=(0, 1, 2, 3, 4),
        expectation="learns slowly: in 24 steps every seed rose (0.19 -> 0.38 held-out, return 0.23 -> 0.67) "
        "as invalid guesses went 22-37% -> 0-13%, which brings it to the random player's 0.31, not past it; "
        "the training curve is still rising at step 24. Twice the steps (SmolLM2's lr is constant) to see "
        "whether the feedback starts to be used: a slow rise past chance at most",
    ),
    _tried(
        "game_Sokoban-v1-easy--small",
        "solver-warmup",
        "learns",
        small_task="sokoban_solver50",
        expectation="learns: the random-legal warm-up solves 0.02 of the held-out boards and ends at 0.03 [0.02, "
        "0.03] after 60 x 64 (3 seeds; random moves 0.03); 2-4% of training episodes won, 36-43% of moves "
        "blocked after RL (40% before), and the return rose (-0.64 -> -0.41 to -0.48): the shaping was learnt, "
        "not the boards. Warmed up on a player that takes the solver's move on half the turns (0.29 of 200 "
        "games won), batches hold wins, as in TowerOfHanoi, whose solver-warmup row rose 0.03 -> 0.96",
    ),
    _tried(
        "terminal_Mixed-v0--smollm2",
        "warmup-128",
        "learns slowly",
        warmup_episodes=128,
        expectation="learns slowly: its 64-episode warm-up (8 SFT steps, loss 2.5 -> 0.33) leaves 22% of the "
        "held-out turns out of format and 1 task in 24 solved before RL, so most groups hold no reward; the "
        "training batches' success wandered 0.00-0.23 over 24 steps. Twice the warm-up (16 SFT steps on the "
        "21 tasks' reference solutions) should bring the format errors down and a solved sample into most "
        "groups, from where RL raises the share of tasks solved",
    ),
    _tried(
        "game_Sokoban-v1-easy--small",
        "solver-warmup-x4",
        "learns",
        small_task="sokoban_solver50",
        small_warmup_steps=220,
        expectation="learns: the solver-warmup row's 55 SFT steps did not copy its player (seed 0: 0.02 of the "
        "held-out boards solved before RL, 17% of turns out of format with garbled moves, 44% of moves "
        "blocked; the player wins 0.29) and RL won 2% of its training episodes. Four times the warm-up (220 "
        "steps, as TowerOfHanoi's 110 on shorter boards) should copy the player's wins into the batches, "
        "from where RL rises as on TowerOfHanoi (0.03 -> 0.96)",
    ),
    _tried(
        "rg_sum-learn--small",
        "right60-warmup",
        "learns",
        small_task="sum_right60",
        expectation="learns: the warm-up player is right on 30% of the problems and random otherwise, and the "
        "policy copied the random answers, not the sums: 1.6-4.7% right before RL with 400 or 1,600 SFT "
        "steps, 1 group in 8 rewarded. A player right on 60% makes the sum the answer to copy; with most "
        "groups rewarded, RL sharpens it",
    ),
    _tried(
        "rg_sum-learn--small",
        "gold-warmup-x4",
        "learns",
        small_task="sum_gold",
        small_warmup_steps=1600,
        expectation="learns: the right60-warmup row did not learn (0.03 -> 0.03 [0.02, 0.05]): its warm-up "
        "copied the terms' signs, not their sum (greedy, its 361 problems get 5 distinct answers, -1, 11 "
        "and -11 for 357 of them, 34 right), so the noise of the player's wrong answers is not the only "
        "obstacle; the policy is underfit. Gold answers only, four times as many SFT steps: a policy "
        "that adds some of the sums, which RL sharpens",
    ),
    _tried(
        "rg_sum-learn--small",
        "right60-warmup-x4",
        "learns slowly",
        estimators=BOTH,  # ReBN rose with the change: GRPO beside it (item 1)
        small_task="sum_right60",
        small_warmup_steps=1600,
        expectation="learns slowly: with gold answers and 1,600 SFT steps the policy adds (0.97 before RL), "
        "leaving no room, and RL at lr 5e-4 lowered it (0.83 [0.81, 0.86]; batches at 0.5-0.7 by step 25); "
        "with the 60%-right player and 400 steps it does not add (0.03). The 60%-right player with 1,600 "
        "steps should land between, where most groups hold a signal; that RL lowered a near-perfect policy "
        "says its steps are noisy, so a slow rise at most",
    ),
    _tried(
        "rg_sum-learn--small",
        "gold-warmup",
        "learns slowly",
        small_task="sum_gold",
        expectation="learns slowly: the 60%-right player with 1,600 SFT steps did not add (0.03 -> 0.06 "
        "[0.05, 0.09]) and gold answers with 1,600 steps left no room (0.97, lowered to 0.83 by RL). Gold "
        "answers with the row's 400 steps stop the warm-up short of 0.97, where some sums are right and "
        "groups of 8 hold both a right and a wrong answer; that RL lowered the near-perfect policy says "
        "its steps at lr 5e-4 are noisy, so a slow rise at most",
    ),
    _tried(
        "rg_sum-learn--small",
        "gold-warmup-x2",
        "learns slowly",
        small_task="sum_gold",
        small_warmup_steps=800,
        expectation="learns slowly: gold answers with 400 SFT steps leave 0.06 right before RL (0.06 -> 0.10 "
        "[0.08, 0.12], under chance 0.11), with 1,600 steps 0.97: the policy learns to add between the two. "
        "800 steps should land between, where groups of 8 hold both a right and a wrong sum; RL lowered the "
        "near-perfect policy, so its steps are noisy: a slow rise at most",
    ),
    _tried(
        "logic_RuleTaker-v0-d1--smollm2",
        "kl-0.04",
        "does not learn",
        beta=0.04,
        expectation="does not learn: ReBN and GRPO both settled on one label (entropy 0.10-0.49 -> under "
        "0.02, no group with a signal after step ~12) and end at exactly 0.33, chance. A KL penalty towards "
        "the warm-up (TRL's beta 0.04) should keep the entropy and the groups' signal; that the signal then "
        "teaches one-step deduction to 135M in 32 steps of 16 episodes we do not expect: no rise past chance",
    ),
    _tried(
        "math_Arithmetic-v0--smollm2",
        "steps-warmup",
        "learns slowly",
        warmup_player="math_steps",
        max_turn_tokens=96,  # the longest worked answer: 66 tokens
        expectation="learns slowly: the warm-up copied a boxed answer with no working (every problem asks to "
        "reason step by step), so the policy guessed: 0.00 before and 0.01 after, no batch held a reward. "
        "Warmed up on answers worked one operation at a time (27 * 22 = 594, 15 + 594 = 609, ...) the model "
        "has small steps to get right, and groups a signal where it does; 2-digit products stay hard for "
        "135M, and the 60 problems are also the held-out set (a rise may be memorised): a slow rise",
    ),
    _tried(
        "rg_letter_counting--smollm2",
        "letters-by-word",
        "learns slowly",
        warmup_player="letters_by_word",
        max_turn_tokens=64,  # the longest worked answer: 42 tokens
        expectation="learns slowly: diagnosis: the warm-up answered a bare number and guesses (answers 1.75-3.19 "
        "from the count; always 2: 1.5); RL settled on near-constant answers (0.31; always 1: 0.33). Warmed "
        "up on answers that name each word holding the letter with its count there (Gutenberg (2), ...), "
        "the count becomes a sum over words whose spelling the model may know: a slow rise at most",
    ),
    _tried(
        "logic_RuleTaker-v0-d1--smollm2",
        "temperature-1.5",
        "does not learn",
        temperature=1.5,
        expectation="does not learn: ReBN, GRPO and kl-0.04 all lost their entropy (to under 0.03) and settled on "
        "one label by step ~12, where no group holds a signal. Sampling the training episodes at temperature "
        "1.5 (TRL's temperature, the learner's logprobs at the same) keeps both labels in the groups and "
        "their signal for longer; that it then teaches one-step deduction to 135M we do not expect: at "
        "chance (0.33) or a little above",
    ),
    _tried(
        "game_Sudoku-v1-easy--smollm2",
        "empty-cells-listed",
        "learns slowly",
        env_kwargs=(("list_empty_cells", True),),
        expectation="learns slowly: the row's held-out moves (`rejected`) were written on filled cells 68% of "
        "the time before RL and 41% after: the policy copied the warm-up's move format, not where the empty "
        "cells are, and no batch held a win. With each board followed by its empty cells' rows and columns "
        "(in warm-up, training and held-out games; the solver fills the first one listed), picking a cell "
        "becomes copying; the digit still has to be read off its row, column and box, so a few wins a batch "
        "at most: a slow rise",
    ),
    _tried(
        "multiagent_CustomerService-v0--smollm2",
        "lr-1e-5",
        "does not learn",
        learning_rate=1e-5,
        expectation="does not learn: on the fixed reward the batches' success fell from 0.06-0.25 to 0 by "
        "step 13-16 on every seed while the entropy rose (0.53-0.80 -> 0.92-1.18 nats) and the held-out "
        "success went 0.24 -> 0.06: the updates moved the policy off the warm-up's conversations faster "
        "than its rare wins could steer it. Half the step size should slow that drift and keep the "
        "warm-up's 0.24; a rise past it in 24 steps we do not expect",
    ),
    _tried(
        "multiagent_CustomerService-v0--smollm2",
        "warmup-128",
        "learns slowly",
        warmup_episodes=128,
        expectation="learns slowly: at lr 2e-5 and 1e-5 alike (3 seeds each) the batches' success fell from "
        "0.06-0.14 to 0.01-0.05 while the entropy rose, and the held-out scenarios the warm-up solved were "
        "lost (refusal 7/9 -> 3/9, change_address 3/6 -> 0/6): a smaller step did not help, too few groups "
        "carry a win (0.28-0.47 by the last steps). Twice the warm-up (16 SFT steps on the reference "
        "conversations, as terminal's warmup-128 which then rose 0.22 -> 0.36) should start RL from more "
        "solved scenarios and more groups with a signal: kept, and a slow rise at most",
    ),
    _tried(
        "web_Shop-v0--smollm2",
        "warmup-64",
        "learns slowly",
        warmup_episodes=64,
        expectation="learns slowly: after the 32-episode warm-up the held-out policy wins 1 of 24 instructions "
        "(3 seeds) and RL takes it to 0.17 [0.04, 0.25] by buying at once: every held-out episode ends in a "
        "purchase (16-19 of 24 before), option clicks fall from 25-30 to 4-17 and the purchases' score rises "
        "(0.34-0.49 -> 0.56-0.67), while the batches' wins stay at 0.03-0.17. The solver's episodes copy the "
        "instruction's options onto the item page; twice its episodes (8 SFT steps, as the row's plan said) "
        "should leave more right options before RL and so more wins in its batches: a slow rise",
    ),
]

# Changes on top of a tried change that did not learn either.
PLATEAU += [
    _tried(
        "rg_sum-learn--small--gold-warmup-x2",
        "lr-1e-4",
        "learns slowly",
        learning_rate=1e-4,
        expectation="learns slowly: from 0.64 before RL (800 gold SFT steps) the batches won 0.55-0.58 in the "
        "first 5 steps, 0.42-0.46 in steps 6-90 (the learning rate at 5e-4 decaying to 8e-5) and 0.52-0.57 "
        "in the last 30 (under 8e-5), with 64-82% of the groups of 8 carrying a signal; the held-out success "
        "ended at 0.55 [0.47, 0.59]. The signal is there and the step is too large for it: a fifth of the "
        "step size should keep the start and let the right sums win their groups, a slow rise at most",
    ),
    _tried(
        "game_Sokoban-v1-easy--small--solver-warmup-x4",
        "sparse-reward",
        "learns slowly",
        reward_type="sparse",
        expectation="learns slowly: with the 220-step solver warm-up the format is learnt (1.5% of held-out "
        "turns out of format) and 1-4% of the training episodes are won, yet RL learnt the shaping instead "
        "(return -0.40 -> -0.24..-0.30, blocked moves 39% -> 25-30%) while the batches' wins fell (seed 0: "
        "4.2% -> 1.4%) and held-out success stayed at 0.02-0.03. Paying only the win (1, else 0), the "
        "won episodes are the only ones with a positive advantage; with 1-4% of episodes won, 15-28% of "
        "the groups of 8 hold a win: a slow rise at most",
    ),
    _tried(
        "logic_RuleTaker-v0-d1--smollm2--temperature-1.5",
        "entropy-target-0.5",
        "learns slowly",
        entropy_target=0.5,
        expectation="learns slowly: at temperature 1.5 two seeds still lost their entropy (1.9 and 3.5 nats "
        "at step 1, under 0.1 by steps 8 and 22) and answer False to every held-out statement (0.33, "
        "chance), while the seed whose entropy stayed at 0.1-1.4 answers both labels and is right on 11 of "
        "24 (0.46). An adaptive entropy bonus (TRL's, from Skywork-OR1: its coefficient grows 0.02 a step "
        "while the batch's entropy is under 0.5 nats, shrinks above) should hold every seed where that "
        "seed was: a slow rise past chance",
    ),
    _tried(
        "game_Sudoku-v1-easy--smollm2--empty-cells-listed",
        "row-digits-listed",
        "learns slowly",
        env_kwargs=(("list_empty_cells", True), ("list_missing_digits", True)),
        expectation="learns slowly: with the empty cells listed no held-out move was written on a filled cell "
        "(68% of the row's moves were), and the moves rejected are now digits the cell's row already holds "
        "(49-51% of moves, before and after RL) or its column (11-14%); the training batches won 5-6 of 384 "
        "episodes a seed, the held-out games none after RL (0.03 -> 0.00 over 3 seeds). With the digits "
        "each row lacks listed, the row's rule becomes copying and the column and box are left to read: a "
        "few more wins a batch, a slow rise",
    ),
    _tried(
        "web_Shop-v0--smollm2--warmup-64",
        "gamma-1",
        "learns slowly",
        gamma=1.0,
        expectation="learns slowly: after the 64-episode warm-up two seeds kept choosing options and rose "
        "(0.12 -> 0.42, 0.29 -> 0.33) while the third dropped them for good by step 9 (0.25 -> 0.00: a "
        "search, a listing and buy now, no group with a signal). After RL a purchase with an option chosen "
        "scores 0.79 and holds every win, one without 0.61 (`purchases`); discounted by gamma 0.9 to the "
        "first turn that edge halves (0.58 against 0.49). With gamma 1 every turn gets the purchase's "
        "score, so the options keep their full edge and no seed should drop them: a slow rise",
    ),
    _tried(
        "web_WikiGame-v0-easy--smollm2",
        "warmup-64",
        "learns slowly",
        warmup_episodes=64,
        expectation="learns slowly: after the 32-episode warm-up every seed learnt to click links that exist "
        "(invalid clicks 23-29% -> 0-3%) and none reached a target in 24 held-out games; the batches won "
        "1.8-2.6% of their episodes. Twice the solver's shortest paths (as Shop's warmup-64, which lifted "
        "its start from 0.04 to 0.22) should leave wins in most batches for RL to raise: a slow rise",
    ),
]

# A larger policy where the small one's changes left its env below chance (the diagnoses' "a different policy").
PLATEAU.append(
    replace(
        _smollm2("multiagent:TicTacToe-v0-random", "multi-agent", "solver"),
        **PLATEAU_BUDGET["smollm2"],
        verdict="learns slowly",
        expectation="learns slowly: the small policy, warmed up 4x as long, rose 0.31 -> 0.51 [0.42, 0.59], "
        "under the random player's 0.61, with 25-30% of its moves on taken squares: it does not read the "
        "free cells' numbers off the board. SmolLM2 copies numbers it is shown; warmed up on 64 games of "
        "minimax (which wins 32 of 32 against the random opponent in 3.5 moves), its moves should be free "
        "cells and some of minimax's, and RL raises the share of games won past chance: a slow rise",
    )
)

# ---- the mixture row (issue 58, item 4) -----------------------------------------------------------------
# One small policy on four plateau envs that rose in the ``envs`` table (at the plateau budget FifteenPuzzle
# and Hangman rose, GuessTheNumber-easy with its longer warm-up only, and TicTacToe stays below its random
# player: ``chance``) and that share every setting (max_turn_tokens 16, 1024-token
# context, gamma 0.9, lr 5e-4, the shared tokenizer; warm-ups per env, hence their union), against those
# envs' single-env ReBN lines of the plateau table at the same total number of episodes: 60 + 60 + 90 + 120
# = 330 steps x 64 episodes. Equal shares: 2 of a step's 8 groups per env, so each env gets 5280 episodes
# (FifteenPuzzle and TicTacToe 1.375x their single-env lines' 3840, Hangman 0.92x of 5760, GuessTheNumber
# 0.69x of 7680). ReBN over the mixed batch beside ReBN within each env (``rebn_per_env``).
_PLATEAU_BY_NAME = {r.name: r for r in PLATEAU}
MIXTURE_PARTS = [
    _PLATEAU_BY_NAME[name]
    for name in (
        "game_FifteenPuzzle-v1-easy--small",
        "multiagent_TicTacToe-v0-random--small",
        "game_Hangman-v1-easy--small",
        "game_GuessTheNumber-v1-easy--small",
    )
]
_MIXTURE = mixture(
    "mixture:Fifteen+TicTacToe+Hangman+Guess",
    "mixture (4 games)",
    MIXTURE_PARTS,
    estimators=("rebn", "rebn_per_env"),
    steps=sum(p.steps for p in MIXTURE_PARTS),
    episodes_per_step=64,
    num_generations=8,
    eval_episodes=64,
    compare_table="plateau",
    verdict="learns",
    expectation="learns each env, less than its single-env line where it gets fewer episodes "
    "(GuessTheNumber 0.69x, Hangman 0.92x), about as well where it gets more. ReBN over the mixed batch "
    "centres every env on the batch's mean return (single-env returns: TicTacToe about -0.8, Hangman "
    "0.04-0.08, GuessTheNumber 0.33-0.40, FifteenPuzzle 0.3-1.1), so all of TicTacToe's turns get "
    "negative advantages and FifteenPuzzle's positive ones whatever their quality; rebn_per_env centres "
    "each env on its own and should match or beat it on every env, most on TicTacToe and Hangman",
)
# One row per estimator (the same name and folder): ``run mixture --workers 2`` trains both at once; the
# second waits for the first's warm-up build (one build, locked and cached).
MIXTURE = [replace(_MIXTURE, estimators=(estimator,)) for estimator in _MIXTURE.estimators]
# A mixture that runs in about a minute (the tests run it): two one-turn envs, one step per seed.
MIXTURE_CHECK = [
    mixture(
        "mixture:PickSeven+sum",
        "check",
        [
            _small("learn:PickSeven-v0", "check", "pick", small_warmup_steps=40),
            _small("rg:sum-learn", "check", "sum", small_warmup_steps=40),
        ],
        estimators=("rebn", "rebn_per_env"),
        seeds=(0,),
        steps=1,
        episodes_per_step=8,
        num_generations=2,
        eval_episodes=8,
        lr_schedule="constant",
        expectation="runs: one step of 8 one-turn episodes, 4 of each env",
    )
]
TABLES = {
    "envs": ENVS,
    "check": CHECK,
    "plateau": PLATEAU,
    "mixture": MIXTURE,
    "mixture-check": MIXTURE_CHECK,
}


def find_rows(table: str, patterns: list[str] | None = None) -> list[Row]:
    """The rows of ``table`` whose env id or name matches one of ``patterns`` (all when none), in the
    order of the first pattern each matches (the order they run in)."""
    rows = TABLES[table]
    if not patterns:
        return rows

    def first_match(row: Row) -> int | None:
        return next(
            (i for i, p in enumerate(patterns) if p in (row.env_id, row.name) or re.fullmatch(p, row.env_id)),
            None,
        )

    matched = [(first_match(r), i, r) for i, r in enumerate(rows)]
    chosen = [r for m, _, r in sorted(t for t in matched if t[0] is not None)]  # in the patterns' order
    if not chosen:
        raise SystemExit(f"no row of {table!r} matches {patterns}; rows: {[r.name for r in rows]}")
    return chosen
