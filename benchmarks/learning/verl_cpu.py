"""The learning experiment through the verl adapter, on CPU, with verl's own trainer components.

    python -m benchmarks.learning.verl_cpu --task guess_range --seed 0 --steps 60 --out benchmarks/results/learning/adapters/verl-rebn-seed0.csv

(``experiments.py run adapters`` runs it for every seed.) The hyperparameters are ``train.py``'s
``RunConfig`` (Hangman unless ``--task`` says otherwise; ``episodes_per_step``
episodes, ``num_generations`` per task seed, seeds disjoint per step and per run seed as in
``train.py``; temperature 1; ``gem_<estimator>`` with ``gamma``; one AdamW step per batch at
``learning_rate`` after ``warmup_steps`` of linear warm-up, gradient clip 1.0, no weight decay),
and the CSV has ``train.py``'s columns.

One step is verl 0.9's v1 trainer step (``verl.trainer.ppo.v1.trainer_base._step_once``) without Ray
and TransferQueue, everything in this process:

1. rollout: verl's ``AgentLoopWorker`` (its config parsing, agent-loop registry from the gem YAML,
   hydra instantiation of ``GemAgentLoop``, ``get_trajectory_info``, position ids) plays
   ``num_generations`` sessions of each row of verl's ``RLHFDataset`` (the parquet of
   ``gem_adapters.verl.rows``); its LLM client is ``PolicyServer`` over a plain transformers copy
   of the policy. Each sample is stored as ``AgentLoopWorkerTQ._agent_loop_postprocess`` stores it
   (``as_dict()`` + row + ``input_ids``/``position_ids``/``loss_mask``, ``list_of_dict_to_tensordict``),
   in a TensorDict instead of TransferQueue;
2. old log-probs: ``TrainingWorker.infer_batch`` (``compute_log_prob``), entropy by ``agg_loss``;
3. advantages: ``compute_advantage_for_multi_trajectories`` with ``adv_estimator="gem_rebn"`` on the
   padded ``DataProto``, written back as nested tensors (``_compute_advantage``);
4. update: ``TrainingWorker.train_mini_batch`` with verl's ``ppo_loss`` (``vanilla`` clipped policy
   loss, ``token-mean``), i.e. verl's ``FSDPEngineWithLMHead`` (FSDP2, fp32, one process, gloo) doing
   forward, backward, grad clipping and the AdamW step (verl 0.9 has no ``dp_actor.py``: this
   engine worker is its actor);
5. weight sync: ``engine.get_per_tensor_param()`` (what verl sends to its rollout servers) loaded
   into the rollout copy.

To run verl's engine on a machine without an accelerator, ``gem_adapters.verl.cpu`` is installed in
this process (none of it part of verl's computations): its ``CPUPlatform`` given to verl's
``set_platform`` (device "cpu", backend gloo), ``VERL_ENGINE_DEVICE=cuda`` so that the FSDP engine class
registered for accelerators is picked, and its patches (verl's monkey patch told that TRL is absent when
TRL has no value-head model). ``use_remove_padding`` is off (packed sequences need flash-attention) and
attention is ``sdpa``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from benchmarks.learning.common import TASKS, PolicySpec, warmed_up_policy
from benchmarks.learning.train import (
    MAX_CONTEXT_TOKENS,
    TASK_SEEDS_PER_RUN,
    RunConfig,
    batch_metrics,
    check_verl_run,
    parse_run,
    run_log,
    summarize,
)

REPO = Path(__file__).resolve().parents[2]
AGENT_YAML = REPO / "examples" / "verl" / "gem_agent_loop.yaml"


@dataclass
class VerlRunConfig(RunConfig):
    task: str = "hangman"


def use_cpu_platform() -> None:
    """verl on CPU in this process (``gem_adapters.verl.cpu``: its platform, before anything asks verl for
    its device, and its patches), and the one-rank gloo process group verl's workers expect."""
    from verl.plugin.platform.platform_manager import set_platform

    from gem_adapters.verl import cpu

    cpu.install()
    set_platform(cpu.CPUPlatform())
    logging.getLogger("verl.utils.tokenizer.continuous_token_wiring").setLevel(logging.ERROR)  # once per loop
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group("gloo", rank=0, world_size=1)


def verl_config(run: RunConfig, folder: Path):
    """verl's own default trainer config (the generated ppo_trainer.yaml) with this run's settings."""
    import verl
    from omegaconf import OmegaConf

    config = OmegaConf.load(Path(verl.__file__).parent / "trainer" / "config" / "_generated_ppo_trainer.yaml")
    prompts_per_step = run.episodes_per_step // run.num_generations
    prompt_tokens = TASKS[run.task].prompt_tokens
    for key, value in {
        "data.max_prompt_length": prompt_tokens,
        "data.max_response_length": MAX_CONTEXT_TOKENS - prompt_tokens,
        "algorithm.adv_estimator": f"gem_{run.estimator}",
        "algorithm.gamma": run.gamma,
        "model.path": str(folder),
        "model.use_remove_padding": False,
        "model.override_config": {"attn_implementation": "sdpa"},
        "rollout.name": "gem_policy_server",  # no verl rollout class: PolicyServer answers the agent loops
        "rollout.n": run.num_generations,
        "rollout.prompt_length": prompt_tokens,
        "rollout.response_length": MAX_CONTEXT_TOKENS - prompt_tokens,
        "rollout.temperature": run.temperature,
        "rollout.top_p": 1.0,
        "rollout.top_k": -1,
        "rollout.calculate_log_probs": True,
        "rollout.agent.agent_loop_config_path": str(AGENT_YAML),
        "rollout.log_prob_micro_batch_size_per_gpu": run.episodes_per_step,
        "actor.strategy": "fsdp2",
        "actor.fsdp_config.strategy": "fsdp2",
        "actor.fsdp_config.mixed_precision": {
            "param_dtype": "fp32",
            "reduce_dtype": "fp32",
            "buffer_dtype": "fp32",
        },
        "actor.fsdp_config.use_torch_compile": False,
        "actor.ppo_mini_batch_size": prompts_per_step,  # times rollout.n: the whole batch, one optimizer step
        "actor.ppo_micro_batch_size_per_gpu": run.episodes_per_step,
        "actor.ppo_epochs": 1,
        "actor.use_dynamic_bsz": False,
        "actor.loss_agg_mode": "token-mean",
        "actor.policy_loss.loss_mode": "vanilla",
        "actor.entropy_coeff": 0.0,
        "actor.use_kl_loss": False,
        "actor.optim.lr": run.learning_rate,
        "actor.optim.lr_warmup_steps": run.warmup_steps,  # linear from 0, as TRL's
        "actor.optim.lr_scheduler_type": run.lr_schedule,  # verl's cosine: to 0 at total_training_steps, as TRL's
        "actor.optim.total_training_steps": run.steps,
        "actor.optim.weight_decay": 0.0,
        "actor.optim.clip_grad": 1.0,
        "actor.engine.seed": run.seed,
    }.items():
        prefix = "" if key.split(".")[0] in ("data", "algorithm") else "actor_rollout_ref."
        OmegaConf.update(config, prefix + key, value)
    return config


def training_worker(config):
    """verl's actor as ``ActorRolloutRefWorker.init_model`` builds it: a TrainingWorker with ppo_loss."""
    from functools import partial

    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.config import TrainingWorkerConfig
    from verl.workers.engine_workers import TrainingWorker
    from verl.workers.utils.losses import ppo_loss

    actor = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
    actor.model_config = omega_conf_to_dataclass(config.actor_rollout_ref.model)
    worker_config = TrainingWorkerConfig(
        model_type="language_model",
        model_config=actor.model_config,
        engine_config=actor.engine,
        optimizer_config=actor.optim,
        checkpoint_config=actor.checkpoint,
    )
    engine = worker_config.engine_config
    engine.use_dynamic_bsz = False
    engine.micro_batch_size_per_gpu = config.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu
    engine.infer_micro_batch_size_per_gpu = config.actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu
    worker = TrainingWorker(config=worker_config)
    worker.reset()
    worker.set_loss_fn(partial(ppo_loss, config=actor))
    return worker


def agent_loop_worker_class():
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    class LocalAgentLoopWorker(AgentLoopWorker):
        """verl's AgentLoopWorker; each finished episode becomes the fields AgentLoopWorkerTQ stores."""

        async def _agent_loop_postprocess(self, output, validate, **kwargs):
            input_ids = torch.tensor(output.prompt_ids + output.response_ids, dtype=torch.int64)
            attention_mask = torch.ones_like(input_ids)[None]
            field = output.as_dict()
            field.update(kwargs)
            field.pop("multi_modal_data", None)
            field["loss_mask"] = field["response_mask"]
            field["input_ids"] = input_ids
            field["position_ids"] = self._compute_position_ids(input_ids[None], attention_mask, {}).squeeze(0)
            return field, output.episode

    return LocalAgentLoopWorker


def nested(td, keys):
    """list_of_dict_to_tensordict stacks equal-length rows densely; verl's storage keeps them jagged."""
    for key in keys:
        if not td[key].is_nested:
            td[key] = torch.nested.as_nested_tensor(list(td[key]), layout=torch.jagged)
    return td


def join_a_one_rank_process_group() -> None:
    """verl's Worker and its FSDP engine join a process group of one rank (gloo), on a free loopback port
    unless ``MASTER_PORT`` names one. Set when a trainer is built, not on import: a process that only
    imports this module must not hand every subprocess it starts a rank and a port."""
    os.environ.update(WORLD_SIZE="1", RANK="0", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(s.getsockname()[1])


class VerlCPUTrainer:
    def __init__(self, run: RunConfig, folder: Path, workdir: Path):
        from omegaconf import OmegaConf
        from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
        from verl.utils.dataset.rl_dataset import RLHFDataset

        from gem_adapters.policies.transformers_policy import TransformersPolicy
        from gem_adapters.runtime.models import load_model, load_tokenizer
        from gem_adapters.verl.advantages import register_estimators
        from gem_adapters.verl.policy_server import PolicyServer
        from gem_adapters.verl.rows import AGENT_NAME, task_rows, write_dataset

        join_a_one_rank_process_group()
        use_cpu_platform()
        register_estimators()
        self.run, self.task = run, TASKS[run.task]
        self.config = config = verl_config(run, folder)
        self.prompts_per_step = run.episodes_per_step // run.num_generations
        num_tasks = run.steps * self.prompts_per_step
        rows = task_rows(self.task.tasks(num_tasks, first_seed=run.seed * TASK_SEEDS_PER_RUN))
        self.rollout_model = load_model(str(folder))
        policy = TransformersPolicy(self.rollout_model, load_tokenizer(str(folder)), seed=run.seed)
        self.server = PolicyServer(policy)
        self.agent_loops = agent_loop_worker_class()(config, llm_client=self.server)
        entry = _agent_loop_registry[AGENT_NAME]  # read from the YAML by the worker
        _agent_loop_registry[AGENT_NAME] = OmegaConf.merge(
            entry, {"max_turns": None, "max_new_tokens": self.task.max_turn_tokens}
        )
        self.dataset = RLHFDataset(
            str(write_dataset(workdir / "train.parquet", rows)), self.agent_loops.tokenizer, config.data
        )
        self.actor = training_worker(config)

    async def _play(self, rows, step):
        from verl.experimental.agent_loop.agent_loop import get_trajectory_info

        rollout = self.config.actor_rollout_ref.rollout
        sampling = dict(
            temperature=rollout.temperature,
            top_p=rollout.top_p,
            top_k=rollout.top_k,
            repetition_penalty=1.0,
            logprobs=rollout.calculate_log_probs,
        )
        jobs, keys = [], []
        for row, info in zip(rows, await get_trajectory_info(step, [r["index"] for r in rows], False)):
            uid = f"s{step}i{row['index']}"
            for session in range(rollout.n):
                jobs.append(
                    self.agent_loops._run_agent_loop(
                        dict(sampling),
                        info,
                        trace=False,
                        uid=uid,
                        session_id=session,
                        global_steps=step,
                        **row,
                    )
                )
                keys.append(f"{uid}_{session}_0")
        return await asyncio.gather(*jobs), keys

    def rollout(self, step: int):
        """Play this step's episodes; the samples (verl's storage layout), their keys and Episodes."""
        from verl.utils.tensordict_utils import list_of_dict_to_tensordict

        first = step * self.prompts_per_step
        rows = [self.dataset[i] for i in range(first, first + self.prompts_per_step)]
        self.server.global_steps = step
        played, keys = asyncio.run(self._play(rows, step))
        batch = list_of_dict_to_tensordict([field for field, _ in played])
        token_keys = ["prompts", "responses", "response_mask", "loss_mask", "input_ids", "position_ids"]
        batch = nested(batch, [*token_keys, "rm_scores", "rollout_log_probs"])
        return batch, keys, [episode for _, episode in played]

    def old_log_probs(self, batch) -> float:
        """``_compute_old_log_prob``: the actor's log-probs of the batch; returns the mean entropy."""
        from verl.trainer.ppo.core_algos import agg_loss
        from verl.utils import tensordict_utils as tu
        from verl.workers.utils.padding import response_from_nested

        data = batch.select("input_ids", "position_ids", "loss_mask", "prompts", "responses", "response_mask")
        tu.assign_non_tensor(
            data, calculate_entropy=True, compute_loss=False, temperature=self.run.temperature
        )
        output = self.actor.infer_batch(data)
        batch["old_log_probs"] = response_from_nested(tu.get(output, "log_probs"), batch["response_mask"])
        entropy = response_from_nested(tu.get(output, "entropy"), batch["response_mask"])
        padded = batch.select("response_mask").to_padded_tensor()
        entropy = torch.nested.to_padded_tensor(entropy, 0.0, output_size=padded["response_mask"].shape)
        return agg_loss(
            entropy, padded["response_mask"], self.config.actor_rollout_ref.actor.loss_agg_mode
        ).item()

    def advantages(self, batch, keys, estimator: str | None = None):
        """``_compute_advantage``: verl's compute_advantage on the padded DataProto, back to nested;
        ``estimator`` (e.g. "gem_grpo") instead of ``algorithm.adv_estimator``."""
        from verl import DataProto
        from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories
        from verl.workers.utils.padding import response_to_nested

        data = DataProto(batch=batch.select("response_mask", "rm_scores").to_padded_tensor())
        data.batch["token_level_scores"] = data.batch["rm_scores"]
        data.batch["token_level_rewards"] = data.batch["token_level_scores"]
        data.non_tensor_batch["uid"] = np.array([key.rsplit("_", 2)[0] for key in keys], dtype=object)
        algorithm = self.config.algorithm
        data = compute_advantage_for_multi_trajectories(
            data,
            batch_keys=keys,
            adv_estimator=estimator or algorithm.adv_estimator,
            gamma=algorithm.gamma,
            lam=algorithm.lam,
            num_repeat=self.config.actor_rollout_ref.rollout.n,
            norm_adv_by_std_in_grpo=algorithm.norm_adv_by_std_in_grpo,
            config=algorithm,
        )
        for field in ("advantages", "returns"):
            batch[field] = response_to_nested(data.batch[field], batch["response_mask"])
        return data

    def update(self, batch) -> dict:
        """``_update_actor``: one mini-batch (the whole batch), one epoch: one optimizer step."""
        from verl.utils import tensordict_utils as tu

        actor = self.config.actor_rollout_ref.actor
        fields = ["input_ids", "position_ids", "loss_mask", "prompts", "responses", "response_mask"]
        data = batch.select(*fields, "old_log_probs", "advantages")
        mini_batch = actor.ppo_mini_batch_size * self.config.actor_rollout_ref.rollout.n
        tu.assign_non_tensor(
            data,
            calculate_entropy=False,
            global_batch_size=mini_batch,
            mini_batch_size=mini_batch,
            epochs=actor.ppo_epochs,
            seed=actor.data_loader_seed,
            dataloader_kwargs={"shuffle": actor.shuffle},
            temperature=self.run.temperature,
        )
        return tu.get(self.actor.train_mini_batch(data), "metrics")

    def sync_weights(self) -> None:
        """What verl sends its rollout servers after an update, loaded into the rollout copy."""
        params, _ = self.actor.engine.get_per_tensor_param()
        state = {name: tensor.detach().to("cpu") for name, tensor in params}
        missing, unexpected = self.rollout_model.load_state_dict(state, strict=False)
        if unexpected or [m for m in missing if m != "lm_head.weight"]:  # lm_head is tied to the embeddings
            raise RuntimeError(f"weight sync mismatch: missing {missing}, unexpected {unexpected}")

    def step(self, step: int) -> dict:
        batch, keys, episodes = self.rollout(step)
        entropy = self.old_log_probs(batch)
        self.advantages(batch, keys)
        metrics = self.update(batch)
        self.sync_weights()
        loss = metrics.get("actor/pg_loss", metrics.get("loss"))
        return {
            **batch_metrics(episodes),
            "loss": float(np.mean(loss)),
            "entropy": entropy,
            "critic_loss": float("nan"),
            "lr": float(np.mean(metrics["lr"])),
        }


def main(run: RunConfig, policy: PolicySpec | None = None) -> list[dict]:
    """Train; ``policy`` overrides the warmed-up policy's spec. Returns the CSV rows."""
    from transformers import set_seed

    check_verl_run(run)
    set_seed(run.seed)
    folder = warmed_up_policy(policy or run.policy_spec())
    with tempfile.TemporaryDirectory() as workdir, run_log(run) as log:
        trainer = VerlCPUTrainer(run, folder, Path(workdir))
        for step in range(run.steps):
            log.record({"step": step + 1, **trainer.step(step)})
        summarize(log, f"verl {run.task} {run.estimator} gamma={run.gamma} seed={run.seed}")
    return log.rows


if __name__ == "__main__":
    main(parse_run(VerlRunConfig, adapter="verl"))
