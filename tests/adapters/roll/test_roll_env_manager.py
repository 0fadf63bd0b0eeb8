"""ROLL's own code on gem_core episodes: its config classes on examples/roll/*.yaml, its env managers
(built through gem_adapters.roll.env_managers, stepping gem_core envs made by ``gem.make``), their
``formulate_rollouts``, and the advantage phase of ``AgenticPipeline.run`` on the resulting batch.

ROLL is not on PyPI: these tests run where ROLL is importable (``ROLL_SRC=/path/to/ROLL`` puts a
checkout on the path; its requirements must be installed) and are skipped otherwise.

What is not ROLL's here: the responses come from a ROLL LLM proxy registered below that plays the
game's scripted solver or random moves (ROLL's ``RandomProxy`` does the same with random moves only);
the start of an episode does the env part of ``TrajEnvManager.reset`` without its Ray episode-id queue;
the batch is not trimmed by ``AgenticPipeline.adjust_batch`` (a method of the Ray-driving pipeline).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import os
import random
import sys
import tempfile
import threading
import typing
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gem", reason="the reference GEM (pip install gem-llm) is what ROLL consumes")
if os.environ.get("ROLL_SRC") and os.environ["ROLL_SRC"] not in sys.path:
    sys.path.insert(0, os.environ["ROLL_SRC"])


def roll_on_path() -> bool:
    """Whether ``roll`` is alibaba/ROLL (PyPI's ``roll`` is another project, without ``roll.pipeline``)."""
    try:
        return importlib.util.find_spec("roll.pipeline.agentic") is not None
    except ImportError:
        return False


if not roll_on_path():
    pytest.skip(
        "ROLL is not on the path (it is not on PyPI): set ROLL_SRC to a checkout of "
        "github.com/alibaba/ROLL whose requirements are installed to run these tests",
        allow_module_level=True,
    )
os.environ.setdefault("ROLL_LOG_DIR", tempfile.mkdtemp(prefix="roll-logs-"))  # else ./output/logs
try:
    import torch
    from dacite import from_dict
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf
    from roll.distributed.scheduler.protocol import DataProto
    from roll.pipeline.agentic.agentic_config import AgenticConfig, LLMProxyConfig
    from roll.pipeline.agentic.env_manager.base_env_manager import RolloutCache
    from roll.pipeline.agentic.env_manager.traj_env_manager import TrajEnvManager
    from roll.pipeline.agentic.llm_proxy import BaseLLMProxy, register_llm_proxy
    from roll.pipeline.agentic.utils import (
        agentic_compute_advantage,
        compute_discounted_returns,
        compute_response_level_rewards,
        get_agentic_response_level_mask,
    )
    from roll.utils.constants import GenerateStopReason
    from roll.utils.functionals import compute_token_reward
    from roll.utils.import_utils import safe_import_class
    from roll.utils.kl_controller import get_kl_controller
except Exception as exc:  # ImportError, or one of ROLL's dependencies failing on import
    pytest.skip(
        f"ROLL is on the path but does not import ({type(exc).__name__}: {exc}): install its "
        "requirements (requirements_common.txt) to run these tests",
        allow_module_level=True,
    )

from gem_adapters.algorithms.advantages import compute_advantages  # noqa: E402
from gem_adapters.roll import NAMESPACE  # noqa: E402
from gem_adapters.roll.env import RollEnv  # noqa: E402
from tests.adapters.roll.players import agent_action  # noqa: E402
from tests.adapters.roll.test_train_roll_example import written  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[3] / "examples" / "roll"
INTERPOLATION_HELPERS = {"hydra", "max_tokens_per_step", "max_actions_per_traj"}
# Imported when a test builds a manager (as ROLL's env worker imports it), not at collection: importing
# gem_adapters.roll.env_managers registers gem_core's ids with gem, which test_gem_api checks from scratch.
STEP_CHAT = "gem_adapters.roll.env_managers.StepChatEnvManager"


@register_llm_proxy("gem_core_test_player")
class PlayerProxy(BaseLLMProxy):
    """Replies with the scripted solver's move, or with probability ``p_random`` a random one, followed by
    the tokenizer's end-of-turn token, as a served model's stop token would be."""

    agent = random.Random(0)
    p_random = 0.0

    def generate(self, messages, lm_input, generation_config):
        text = agent_action(self.env, self.agent, self.p_random) + self.tokenizer.eos_token
        lm_input.batch["responses"] = self.tokenizer([text], add_special_tokens=False, return_tensors="pt")[
            "input_ids"
        ]
        return lm_input


def roll_config(
    name: str, tmp_path: Path, config_dir: Path = CONFIGS, overrides: tuple[str, ...] = ()
) -> AgenticConfig:
    """The YAML composed by Hydra and turned into ROLL's AgenticConfig, as start_agentic_pipeline.py does."""
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        cfg = compose(
            config_name=name,
            overrides=[f"logging_dir={tmp_path}/logs", f"output_dir={tmp_path}/out", "pretrain=unused/model"]
            + list(overrides),
        )
    data = OmegaConf.to_container(cfg, resolve=True)
    assert unknown_keys(data, AgenticConfig) == sorted(INTERPOLATION_HELPERS & set(data))
    config = from_dict(data_class=AgenticConfig, data=data)
    config.train_env_manager.llm_proxy = LLMProxyConfig(proxy_type="gem_core_test_player")
    return config


def unknown_keys(data: dict, cls: type, prefix: str = "") -> list[str]:
    """Keys of ``data`` that are no field of the dataclass ``cls`` (recursing into dataclass fields);
    dacite ignores them, so a misspelt ROLL option would otherwise pass silently."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    out = []
    for key, value in data.items():
        if key not in names:
            out.append(prefix + key)
            continue
        options = typing.get_args(hints[key]) or (hints[key],)
        sub = next((t for t in options if dataclasses.is_dataclass(t)), None)
        if sub is not None and isinstance(value, dict):
            out += unknown_keys(value, sub, f"{prefix}{key}.")
    return sorted(out)


def build_manager(config: AgenticConfig, env_id: int, tokenizer):
    """The env manager of one env, built as ROLL's EnvironmentWorker builds it."""
    env_config = config.train_env_manager.env_configs[
        env_id // config.train_env_manager.max_env_num_per_worker
    ][env_id]
    manager_cls = safe_import_class(env_config["env_manager_cls"])
    return manager_cls(
        worker_config=config.train_env_manager,
        pipeline_config=config,
        env_config=env_config,
        tokenizer=tokenizer,
        generate_scheduler=None,
        output_queue=None,
        thread_lock=threading.Lock(),
        mode="train",
    )


def play_episode(manager, seed: int, agent: random.Random, p_random: float) -> tuple[DataProto, list]:
    """One episode through the manager's make_decision / step / formulate_rollouts, labelled with
    ``traj_group_id`` and ``traj_id`` as ``run_rollout_loop`` labels it; also returns the step history.
    (``seed`` replaces ROLL's group seed + episode id: ROLL draws group seeds from the global RNG.)"""
    cfg = manager.env_config
    manager.llm_proxy.agent, manager.llm_proxy.p_random = agent, p_random
    # TrajEnvManager.reset, less its Ray queue (episode ids) and tracing:
    manager.rollout_cache = RolloutCache(env_id=cfg["env_id"], group_id=cfg["group_id"], tag=cfg["tag"])
    observation, info = manager.env.reset(seed=seed)
    manager.rollout_cache.history.append(
        {"observation": observation, "actions_left": cfg.max_steps, "messages": None, **info}
    )
    cache = manager.rollout_cache
    while not cache.terminated:
        lm_output = manager.make_decision(cache)
        assert lm_output.meta_info.pop("stop_reason") == GenerateStopReason.FINISH
        cache = manager.step(lm_output)
    history = [dict(h) for h in cache.history]
    rollout = manager.formulate_rollouts(cache)
    traj_group_id = f"{cfg['tag']}_{cfg['group_id']}_0_{cfg['group_seed']}"  # episode 0 of the group
    n = rollout.batch.batch_size[0]
    rollout.non_tensor_batch["traj_group_id"] = np.array([traj_group_id] * n, dtype=object)
    rollout.non_tensor_batch["traj_id"] = np.array([f"{traj_group_id}_{cfg['env_id']}"] * n, dtype=object)
    return rollout, history


def advantage_phase(batch: DataProto, config: AgenticConfig) -> DataProto:
    """AgenticPipeline.run from compute_discounted_returns to agentic_compute_advantage, reference disabled."""
    batch = compute_discounted_returns(batch, config.adv_estimator, config.step_reward_gamma)
    batch.batch["old_log_probs"] = torch.zeros_like(batch.batch["attention_mask"][:, 1:])
    batch.batch["ref_log_probs"] = batch.batch["old_log_probs"].clone()
    batch, _ = get_agentic_response_level_mask(batch, config)
    batch, _ = compute_response_level_rewards(batch=batch, pipeline_config=config)
    kl_ctrl = get_kl_controller(
        init_kl_coef=config.init_kl_coef, target_kl=config.target_kl, kl_horizon=config.kl_horizon
    )
    batch, _ = compute_token_reward(batch, config, kl_ctrl)
    return agentic_compute_advantage(
        data=batch,
        gamma=config.gamma,
        lambd=config.lambd,
        adv_estimator=config.adv_estimator,
        advantage_clip=config.advantage_clip,
        whiten_advantages=config.whiten_advantages,
        whiten_rewards=config.whiten_rewards,
        pipeline_config=config,
    )


def sample_advantages(batch: DataProto) -> np.ndarray:
    """The advantage of each sample: the one value on all its response tokens."""
    mask = batch.batch["response_mask"][:, 1:].bool()
    out = []
    for advantages, m in zip(batch.batch["advantages"], mask):
        values = advantages[m]
        assert len(values) > 0 and torch.all(values == values[0])  # gamma 1: one value per sample
        out.append(float(values[0]))
    return np.array(out)


def test_rebn_config_in_step_chat_env_managers_equals_gem_rebn(tmp_path, tokenizer):
    config = roll_config("agentic_gem_rebn", tmp_path)
    assert config.adv_estimator == "step_reinforce" and config.reward_normalization.norm_std_type == "batch"
    managers = [build_manager(config, env_id, tokenizer) for env_id in range(10)]
    assert all(type(m) is safe_import_class(STEP_CHAT) and isinstance(m.env, RollEnv) for m in managers)

    rollouts, rewards = [], []
    for env_id, manager in enumerate(managers):
        rollout, history = play_episode(manager, 100 + env_id, random.Random(env_id), 0.25 * (env_id % 4))
        turns = [h for h in history if "reward" in h]
        assert rollout.batch.batch_size[0] == len(turns)  # one sample per turn
        assert [float(s) for s in rollout.non_tensor_batch["step_scores"]] == [h["reward"] for h in turns]
        assert all(h["llm_response"].endswith(tokenizer.eos_token) for h in turns)  # ROLL keeps the token...
        assert all(not h["metrics"]["format_error"] for h in turns)  # ...and the env never saw it as a move
        assert "env/GemCoreGame/success" in rollout.meta_info["metrics"]
        rollouts.append(rollout)
        rewards.append([h["reward"] for h in turns])

    batch = advantage_phase(DataProto.concat(rollouts), config)
    roll = sample_advantages(batch)
    ours = np.concatenate(compute_advantages("rebn", rewards, gamma=config.step_reward_gamma))
    n = len(ours)
    assert len(np.unique(np.round(ours, 6))) > 5  # returns differ: the comparison means something
    np.testing.assert_allclose(roll, ours * math.sqrt((n - 1) / n), rtol=1e-5, atol=2e-6)


def test_grpo_config_in_traj_env_managers_equals_gem_grpo(tmp_path, tokenizer):
    config = roll_config("agentic_gem_grpo", tmp_path)
    group_size = config.train_env_manager.group_size
    managers = [build_manager(config, env_id, tokenizer) for env_id in range(2 * group_size)]
    assert all(type(m) is TrajEnvManager for m in managers)

    rollouts, rewards, groups = [], [], []
    for env_id, manager in enumerate(managers):
        p_random = 0.0 if env_id < group_size else 0.3  # group 0: the solver alone, identical returns
        seed = 100 + manager.env_config["group_id"]  # the episodes of a group share their start
        rollout, history = play_episode(manager, seed, random.Random(env_id), p_random)
        assert rollout.batch.batch_size[0] == 1  # one sample per episode
        turns = [h for h in history if "reward" in h]
        rollouts.append(rollout)
        rewards.append([h["reward"] for h in turns])
        groups.append(rollout.non_tensor_batch["traj_group_id"][0])
    assert len(set(groups)) == 2 and len({round(sum(r), 6) for r in rewards[group_size:]}) > 1

    batch = advantage_phase(DataProto.concat(rollouts), config)
    roll = sample_advantages(batch)
    ours = np.array([a[0] for a in compute_advantages("grpo", rewards, group_ids=groups)])
    np.testing.assert_allclose(roll, ours, rtol=1e-5, atol=2e-6)
    assert np.all(roll[:group_size] == 0) and np.any(np.abs(roll[group_size:]) > 0.1)


@pytest.mark.parametrize(
    ("config_name", "manager"),
    [("agentic_gem_rebn", STEP_CHAT), ("agentic_gem_grpo", TrajEnvManager)],
)
def test_configs_written_by_train_roll_build_roll_configs(tmp_path, config_name, manager):
    _, path = written(
        tmp_path, "custom_envs.GemCoreGame.env_type=gem_core/game:Wordle-v1-easy", config_name=config_name
    )
    config = roll_config(path.stem, tmp_path, config_dir=path.parent)
    env_configs = [c for rank in config.train_env_manager.env_configs.values() for c in rank.values()]
    assert len(env_configs) == config.rollout_batch_size
    assert {c["env_type"] for c in env_configs} == {NAMESPACE + "game:Wordle-v1-easy"}
    manager = safe_import_class(manager) if isinstance(manager, str) else manager
    assert safe_import_class(env_configs[0]["env_manager_cls"]) is manager


def turn_prompts(tmp_path, tokenizer, *overrides: str) -> tuple[list[str], list[str], list[dict]]:
    """One GuessTheNumber episode of a ``agentic_gem_rebn`` manager (the scripted solver after two random
    guesses): each turn's prompt as generated from, each training sample's prompt, and the step history."""
    config = roll_config("agentic_gem_rebn", tmp_path, overrides=("max_actions_per_traj=10", *overrides))
    manager = build_manager(config, 0, tokenizer)
    prompts = []
    generate = manager.llm_proxy.generate

    def recording(messages, lm_input, generation_config):
        prompts.append(tokenizer.decode(lm_input.batch["input_ids"][0]))
        return generate(messages, lm_input, generation_config)

    manager.llm_proxy.generate = recording
    rollout, history = play_episode(manager, 7, random.Random(3), 0.7)
    responses = rollout.batch["response_mask"].bool()
    samples = [
        tokenizer.decode(ids[: int(mask.nonzero()[0])])
        for ids, mask in zip(rollout.batch["input_ids"], responses)
    ]
    return prompts, samples, history


def test_step_chat_env_manager_prompts_with_the_conversation(tmp_path, tokenizer):
    prompts, samples, history = turn_prompts(tmp_path, tokenizer)
    turns = [h for h in history if "reward" in h]
    assert len(turns) >= 3 and samples == prompts  # each turn's sample is trained on the prompt it saw
    system = "<|im_start|>system\nYou are playing a game."
    for t, prompt in enumerate(prompts):
        assert prompt.startswith(system) and prompt.count(system) == 1
        assert (
            prompt.count("<|im_start|>user\n") == t + 1 and prompt.count("<|im_start|>assistant\n") == t + 1
        )
        for earlier in turns[:t]:  # every earlier observation and reply, in order, as chat turns
            reply = earlier["llm_response"].removesuffix(tokenizer.eos_token)
            assert f"<|im_start|>user\n{earlier['observation']}<|im_end|>" in prompt
            assert f"<|im_start|>assistant\n{reply}<|im_end|>" in prompt
        assert prompt.endswith(
            f"<|im_start|>user\n{turns[t]['observation']}<|im_end|>\n<|im_start|>assistant\n"
        )
    # the LLM proxy is handed the conversation once: system, then user and assistant in turn
    roles = [m["role"] for h in turns for m in h["messages"]]
    assert roles == ["system"] + ["user", "assistant"] * len(turns)


def test_history_length_1_prompts_with_the_current_observation_alone(tmp_path, tokenizer):
    prompts, samples, history = turn_prompts(tmp_path, tokenizer, "custom_envs.GemCoreGame.history_length=1")
    turns = [h for h in history if "reward" in h]
    assert len(turns) >= 3 and samples == prompts
    for t, prompt in enumerate(prompts):
        assert prompt.count("<|im_start|>user\n") == 1 and prompt.endswith("<|im_start|>assistant\n")
        assert turns[t]["observation"] in prompt
        assert t == 0 or turns[0]["observation"] not in prompt  # the first observation (the rules) is gone
