"""GEM inside Oat's multi-turn PPO: the actor that plays episodes and the learner that scores them.

Oat (oat-llm 0.2.4) runs as a Launchpad program of actors (a vLLM engine each) and learners
(DeepSpeed). Its multi-turn algorithm asks two things of a project, and this module gives both:

* ``GEMActor(PPOMultiTurnActor)``: ``collect_experience()`` plays GEM episodes with the shared rollout
  driver, generating through the actor's own vLLM engine (``OatVLLMPolicy`` around
  ``self.generate``: token ids in, ids and logprobs out), until at least
  ``rollout_batch_size_per_device`` turns are collected; it returns them as lists of
  ``oat.types.Transition`` (``episode_to_transitions``: one per turn, full-context prompt ids).
* ``GEMLearner(PPOMultiTurnLearner)``: ``process_feedback_data`` computes ReBN advantages over every
  turn collected by all learners (``transition_advantages`` with an all-reduce; see
  ``gem_adapters.oat.advantages`` for how this differs from Oat's whitening), then subsamples to
  ``rollout_batch_size_per_device`` and fills the buffer as Oat does. Oat's PPO step then trains on
  them with ``whiten_adv=False`` (the advantages are already normalised).

Oat's learner loop is driven by a prompt dataset and evaluates on one; here the loop runs on
``max_train`` placeholder prompts, one per training turn (the actors ignore prompts), and evaluation
plays GEM episodes with the eval sampling settings on fixed seeds.

Needs Python 3.10, a GPU, and Oat's own dependencies (vLLM 0.8.4, Launchpad, DeepSpeed, dm-tree,
tyro). On the CPU CI the tests import it only with stand-ins for the GPU-only ones, to parse
``GEMArgs`` (``tests/adapters/oat/test_train_oat_example.py``); their subject is otherwise the pure
parts it calls (``transitions``, ``advantages``, ``vllm_policy``) and, read with ``ast``, its fit to
Oat's classes (``test_program_static.py``).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
import torch.distributed as dist
from oat.algorithms.ppo import PPOArgs
from oat.algorithms.ppo_multiturn import PPOMultiTurnActor, PPOMultiTurnLearner
from oat.types import Transition
from torch.utils.data import Dataset

from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.episodes.episode import Episode
from gem_adapters.episodes.episode_stats import episode_stats
from gem_adapters.episodes.jsonl import write_jsonl
from gem_adapters.oat.advantages import check_estimator, transition_advantages
from gem_adapters.oat.transitions import episodes_to_transitions
from gem_adapters.oat.vllm_policy import OatVLLMPolicy
from gem_adapters.policies.base import SamplingParams
from gem_adapters.runtime.rollout import rollout
from gem_adapters.runtime.rollout_limits import RolloutLimits
from gem_core import EnvNotFoundError, make_vec, spec

SEEDS_PER_ACTOR = 10**8  # actor i draws training seeds from [seed + i * SEEDS_PER_ACTOR, ...)


@dataclass
class GEMArgs(PPOArgs):
    """Oat's PPO arguments (``oat.algorithms.ppo.PPOArgs``) plus GEM's episode settings. Parsed as Oat's
    own scripts parse theirs, ``oat.args.get_default_args`` (tyro): each field is a flag, ``--env-id``,
    ``--learning-rate``, its help the comment beside or above it; see ``examples/train_oat.py``."""

    # The gem_core env every episode plays (gem_core.list_envs() lists them).
    env_id: str = "game:GuessTheNumber-v1-easy"
    num_envs: int = 16  # Episodes each actor plays at once (one vLLM batch per turn).
    max_turns: int | None = None  # Actions per episode; None: the env's own limit.
    system_prompt: str | None = None  # A system message before each episode's first observation; None: none.
    advantage_estimator: str = "rebn"  # A registered estimator needing neither critic values nor groups.
    rebn_eps: float = 1e-6  # Added to the std by ReBN.
    eval_episodes: int = 32  # GEM episodes per evaluation, split over the actors.
    eval_seed: int = 10**9  # Evaluation seeds: eval_seed, eval_seed + 1, ... (the same every evaluation).
    dump_episodes: bool = True  # Append every collected episode to <save_path>/episodes/actor<i>.jsonl.
    # Oat's fields whose default GEM must change, each for the reason beside it:
    algo: Literal["PPO"] = "PPO"  # GEMLearner is Oat's PPO learner (Oat's run_ppo.py sets it in code).
    # Model name (Oat's default has no chat template, which GEM renders each turn with).
    pretrain: str = "Qwen/Qwen2.5-1.5B-Instruct"
    gamma: float = 0.9  # Discount of per-turn rewards within an episode (ReBN's returns; Oat: per token).
    num_samples: int = 1
    """Samples per prompt: the actor plays episodes, not prompt groups."""  # else tyro shows Oat's next string
    oracle: str = ""  # Empty: rewards come from the env, not an Oat oracle.
    prompt_data: str = ""  # Empty: episodes come from the env, not a prompt dataset.


def validate_args(args: GEMArgs) -> GEMArgs:
    """What GEMActor / GEMLearner need, checked after Oat's ``default_args_validation``."""
    try:
        spec(args.env_id)
    except EnvNotFoundError as error:
        raise ValueError(f"--env-id: {error}") from None
    if args.num_envs < 1:
        raise ValueError(f"--num-envs must be at least 1, got {args.num_envs}")
    if args.max_turns is not None and args.max_turns < 1:
        raise ValueError(f"--max-turns must be at least 1 (or None), got {args.max_turns}")
    if args.whiten_adv:
        raise ValueError("--whiten-adv must be off: GEMLearner's advantages are already normalised")
    if args.critic_type == "ppo":
        raise ValueError("GEMLearner trains without a critic: --critic-type drgrpo or grpo, not ppo")
    check_estimator(args.advantage_estimator)
    return args


class GEMActor(PPOMultiTurnActor):
    """Plays GEM episodes with the actor's vLLM engine and returns them as Oat transitions."""

    def init(self, actor_id: int, save_path: str) -> None:
        super().init(actor_id, save_path)
        args: GEMArgs = self.args
        self.renderer = ChatRenderer(self.tokenizer, system_prompt=args.system_prompt)
        self.policy = OatVLLMPolicy(self.generate)
        self.envs = make_vec(args.env_id, args.num_envs, backend="sync", autoreset_mode="disabled")
        self.next_seed = args.seed + actor_id * SEEDS_PER_ACTOR
        self.episodes_path = os.path.join(save_path, "episodes", f"actor{actor_id}.jsonl")
        if args.dump_episodes:
            os.makedirs(os.path.dirname(self.episodes_path), exist_ok=True)

    def sampling(self, eval: bool = False) -> SamplingParams:
        args: GEMArgs = self.args
        if eval:
            return SamplingParams(
                max_new_tokens=args.eval_generate_max_length,
                temperature=args.eval_temperature,
                top_p=args.eval_top_p,
                top_k=max(args.eval_top_k, 0),  # Oat: -1 switches top-k off
            )
        return SamplingParams(
            max_new_tokens=args.generate_max_length,
            temperature=args.temperature,
            top_p=args.top_p,
            top_k=max(args.top_k, 0),
        )

    def play(self, envs: Any, seeds: Any, sampling: SamplingParams) -> list[Episode]:
        args: GEMArgs = self.args
        return rollout(
            envs,
            self.policy,
            self.renderer,
            seeds=seeds,
            limits=RolloutLimits(args.max_turns, sampling.max_new_tokens, args.max_model_len),
            sampling=sampling,
        )

    def collect_experience(self) -> tuple[Sequence[Sequence[Transition]], dict]:
        args: GEMArgs = self.args
        start = time.time()
        episodes: list[Episode] = []
        num_turns = 0
        while num_turns < args.rollout_batch_size_per_device:
            batch = self.play(self.envs, self.next_seed, self.sampling())
            self.next_seed += args.num_envs
            added = sum(e.num_turns for e in batch)
            if added == 0:
                raise RuntimeError(f"no episode of {args.env_id} got a turn: is max_model_len too small?")
            episodes += batch
            num_turns += added
        if args.dump_episodes:
            write_jsonl(self.episodes_path, episodes, append=True)
        info = {f"actor/{k}": v for k, v in episode_stats(episodes).items()}
        info["actor/collect_time"] = time.time() - start
        transitions = episodes_to_transitions(
            episodes, tokenizer=self.tokenizer, mask_truncated=args.ignore_no_eos
        )
        return transitions, info

    def evaluate_episodes(self, num_episodes: int, first_seed: int) -> list[dict]:
        """``num_episodes`` played with the eval sampling settings, as ``Episode.to_dict()``s."""
        args: GEMArgs = self.args
        episodes = self.play([args.env_id] * num_episodes, first_seed, self.sampling(eval=True))
        return [e.to_dict() for e in episodes]


class PromptPlaceholders(Dataset):
    """Empty prompts that keep Oat's learner loop turning; the actors ignore them."""

    def __init__(self, size: int):
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[str, str, str]:
        return "", "", ""


class GEMLearner(PPOMultiTurnLearner):
    """Oat's multi-turn PPO learner with ReBN advantages over all collected turns."""

    def _init(self, args: GEMArgs, actors: list) -> None:
        super()._init(args, actors)
        self.subsample_rng = np.random.default_rng(args.seed + self.strategy.get_rank())

    def prepare_data(self, strategy: Any, tokenizer: Any) -> None:
        # One placeholder per training turn: the loop takes rollout_batch_size_per_device at a time (one
        # actor step, subsampled to that many turns), and Oat sizes its LR schedule from this length.
        self.prompts_dataset = PromptPlaceholders(strategy.args.max_train)
        self.eval_prompts_dataset = PromptPlaceholders(1)
        self.prompts_dataloader = strategy.setup_dataloader(
            self.prompts_dataset, strategy.args.rollout_batch_size_per_device, shuffle=False
        )
        self.eval_prompts_dataloader = strategy.setup_dataloader(
            self.eval_prompts_dataset, batch_size=1, shuffle=False, drop_last=False
        )

    def all_reduce_sum(self, x: np.ndarray) -> torch.Tensor:
        return self.strategy.all_reduce(torch.from_numpy(x), op="sum")

    def process_feedback_data(self, data_list: Sequence[Sequence[Transition]]) -> None:
        args: GEMArgs = self.args
        transition_advantages(
            data_list,
            estimator=args.advantage_estimator,
            gamma=args.gamma,
            eps=args.rebn_eps,
            reduce_fn=self.all_reduce_sum,
        )
        transitions = [t for episode in data_list for t in episode]
        if len(transitions) > args.rollout_batch_size_per_device:
            keep = self.subsample_rng.choice(
                len(transitions), args.rollout_batch_size_per_device, replace=False
            )
            transitions = [transitions[i] for i in keep]
        logging.info("adding %d transitions to the buffer", len(transitions))
        self.pi_buffer.extend(transitions)
        if args.dump_all_buffer:
            self.all_buffer.extend(transitions)
        self.query_step += len(transitions)

    def evaluate(self, dataloader: Any, steps: int) -> dict:
        """``episode_stats`` of ``eval_episodes`` episodes under the eval sampling settings, on the
        same seeds every time."""
        del dataloader, steps
        args: GEMArgs = self.args
        self._pre_evaluate()
        start = time.time()
        # Every rank must broadcast the same keys; rank 0 fills in the values.
        metrics = {f"eval/{k}": 0.0 for k in episode_stats([])}
        if self.strategy.is_rank_0():
            share = -(-args.eval_episodes // len(self.actors))
            futures = [
                actor.futures.evaluate_episodes(share, args.eval_seed + i * share)
                for i, actor in enumerate(self.actors)
            ]
            episodes = [Episode.from_dict(d) for future in futures for d in future.result()]
            metrics = {f"eval/{k}": v for k, v in episode_stats(episodes).items()}
        metrics["eval/elapse"] = time.time() - start
        dist.barrier()
        metrics = self.strategy.broadcast(metrics)
        self._post_evaluate()
        return metrics
