"""GemAgentExecutor against OpenRLHF 0.11's agent classes: whole multi-turn episodes through
``execute`` with a real (tiny, CPU) generator behind the engine interface, and their samples turned
into ``Experience`` objects by OpenRLHF's own code."""

from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("openrlhf.utils.agent")

import torch
from openrlhf.trainer.ppo_utils.experience import Experience
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

import gem_core
from gem_adapters.algorithms.advantages import state_key_code
from gem_adapters.episodes.tasks import make_tasks
from gem_adapters.openrlhf.advantages import NUM_TURNS, STATE_KEYS, SUCCESS, TURN_REWARDS, mask_runs
from gem_adapters.openrlhf.config import ESTIMATOR_ENV
from gem_adapters.openrlhf.rollout import GemAgentExecutor, GemEnvInstance
from gem_adapters.openrlhf.rows import Task, task_rows
from gem_adapters.policies.transformers_policy import TransformersPolicy
from tests.adapters.openrlhf.policy_engine import EngineSamplingParams, PolicyEngine

from ..runtime.test_state_keys_rollout import replayed_keys
from .conftest import AGENT_FUNC, MAX_LEN, SYSTEM_PROMPT, TURN_CAP, openrlhf_sampling_params
from .openrlhf_source import load_agent_executor, process_response_into_experience


def test_openrlhf_builds_the_executor_from_agent_func():
    executor = load_agent_executor(str(AGENT_FUNC))
    assert isinstance(executor, GemAgentExecutor) and isinstance(executor, MultiTurnAgentExecutor)
    assert executor.agent_instance_cls is GemEnvInstance and issubclass(GemEnvInstance, AgentInstanceBase)
    GemEnvInstance()  # OpenRLHF 0.11 builds instances synchronously, with no arguments


@pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning")
def test_an_async_constructor_breaks_in_openrlhf_0_11():
    """The reference GEM example's instance awaits in ``__init__``; OpenRLHF 0.11 calls the class."""

    class AsyncInitInstance(AgentInstanceBase):
        async def __init__(self):
            pass

        async def step(self, states, **kwargs):
            raise AssertionError("never reached")

    executor = MultiTurnAgentExecutor(AsyncInitInstance)
    with pytest.raises(TypeError, match="__init__"):
        asyncio.run(executor.execute("p", "l", openrlhf_sampling_params(), 10, None, None))


def test_episodes_are_token_exact(played, tokenizer):
    for row, _, output in played:
        episode = output["episode"]
        tokens = output["observation_tokens"]
        task = Task.from_label(row["label"])
        assert (episode.env_id, episode.seed) == (task.env_id, task.seed)
        assert tokens == episode.to_sequence().token_ids
        assert len(tokens) <= MAX_LEN
        # The first prompt is the template's rendering of the row (system prompt + first observation) ...
        first = tokenizer.apply_chat_template(
            [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": row["prompt"]}],
            add_generation_prompt=True,
            tokenize=True,
            return_dict=False,
        )
        assert tokens[: len(first)] == first
        # ... and the whole sequence is the template's rendering of the conversation.
        assert not episode.template_rewrites_history
        rendered = tokenizer.apply_chat_template(episode.messages(), tokenize=False)
        assert tokenizer.decode(tokens, skip_special_tokens=False) == rendered
        # Each action range holds exactly the generated ids; env and template ids lie between them.
        ranges = output["action_ranges"]
        assert len(ranges) == episode.num_turns >= 2
        for (start, end), turn in zip(ranges, episode.turns):
            assert tokens[start:end] == turn.action_ids and 1 <= end - start <= TURN_CAP
        for (_, end), (start, _), turn in zip(ranges, ranges[1:], episode.turns[1:]):
            assert turn.observation in tokenizer.decode(tokens[end:start])
        # Logprobs: the engine's on generated ids, 0.0 elsewhere.
        logprobs = output["rollout_log_probs"]
        assert len(logprobs) == len(tokens)
        inside = {i for start, end in ranges for i in range(start, end)}
        assert all(lp == 0.0 for i, lp in enumerate(logprobs) if i not in inside)
        for (start, end), turn in zip(ranges, episode.turns):
            assert logprobs[start:end] == turn.logprobs
        assert output["truncated"] == (episode.turns[-1].finish_reason == "length")


def test_rewards_are_the_envs_per_turn(played):
    kinds = set()
    for row, player, output in played:
        episode = output["episode"]
        task = Task.from_label(row["label"])
        env = gem_core.make(task.env_id)
        env.reset(seed=task.seed)
        replayed = [env.step(turn.action)[1] for turn in episode.turns]
        env.close()
        assert output["extra_logs"][TURN_REWARDS] == replayed == [t.reward for t in episode.turns]
        assert output["reward"] == output["scores"] == pytest.approx(sum(replayed))
        assert output["extra_logs"][NUM_TURNS] == episode.num_turns
        assert output["extra_logs"][SUCCESS] == float(episode.success)
        kinds.add((player, episode.info.get("stopped_by"), episode.success))
    # The batch covers a win, a loss, and an episode stopped by the context budget.
    assert ("script", None, True) in kinds and ("script", None, False) in kinds
    assert ("model", "max_context_tokens", False) in kinds


def test_each_turn_carries_the_envs_state_key_before_its_action(played):
    """``GemEnvInstance`` reports the env's ``state_key()`` after reset and every step; the episode keeps
    the key before each action, and ``extra_logs`` its integer code (what survives OpenRLHF's tensors)."""
    for _, _, output in played:
        episode = output["episode"]
        replayed = replayed_keys(episode)
        assert [t.state_key for t in episode.turns] == replayed
        assert None not in replayed  # the games name their states
        assert output["extra_logs"][STATE_KEYS] == [state_key_code(k) for k in replayed]
    # Sessions of one task start from one state: the first turns share a key (GiGPO's anchor).
    first = {}
    for row, _, output in played:
        first.setdefault(row["label"], set()).add(output["extra_logs"][STATE_KEYS][0])
    assert all(len(codes) == 1 for codes in first.values())


def test_logprobs_are_the_models_on_generated_ids(played, tiny_model):
    for _, player, output in played[:1]:
        assert player == "model"
        ids = torch.tensor([output["observation_tokens"]])
        with torch.no_grad():
            logp = torch.log_softmax(tiny_model(ids).logits[0, :-1].double(), dim=-1)
        scored = logp.gather(1, ids[0, 1:, None])[:, 0]
        got = torch.tensor(output["rollout_log_probs"][1:], dtype=torch.float64)
        for start, end in output["action_ranges"]:
            torch.testing.assert_close(
                got[start - 1 : end - 1], scored[start - 1 : end - 1], atol=2e-4, rtol=0
            )


def test_openrlhf_turns_outputs_into_experiences(played, tokenizer):
    """``SamplesGenerator``'s own conversion: action mask shifted by one, per-turn rewards in info."""
    experiences = []
    for _, _, output in played:
        experience = process_response_into_experience(output, MAX_LEN)
        assert experience.sequences[0].tolist() == output["observation_tokens"]
        shifted = [(start - 1, end - 1) for start, end in output["action_ranges"]]
        assert mask_runs(experience.action_mask[0]) == shifted
        rewards = torch.tensor(output["extra_logs"][TURN_REWARDS], dtype=torch.float32)
        assert torch.equal(experience.info[TURN_REWARDS][0], rewards)
        assert experience.rewards.item() == pytest.approx(output["reward"])
        assert experience.labels == [output["label"]]
        experiences.append(experience)
    batch = Experience.concat_experiences(experiences, tokenizer.pad_token_id)
    widest = max(len(o["action_ranges"]) for _, _, o in played)
    assert batch.info[TURN_REWARDS].shape == (len(played), widest)
    assert batch.info[NUM_TURNS].tolist() == [len(o["action_ranges"]) for _, _, o in played]
    assert batch.info[STATE_KEYS].dtype == torch.int64  # 63-bit codes, exact
    for row, (_, _, output) in enumerate(played):
        codes = output["extra_logs"][STATE_KEYS]
        assert batch.info[STATE_KEYS][row, : len(codes)].tolist() == codes


def test_label_limits_turns_and_per_turn_rewards_need_the_estimator(tokenizer, tiny_model, monkeypatch):
    monkeypatch.delenv(ESTIMATOR_ENV, raising=False)
    (row,) = task_rows(make_tasks("game:GuessTheNumber-v1-easy", 1, first_seed=5, max_turns=2))
    engine = PolicyEngine(TransformersPolicy(tiny_model, tokenizer, seed=3), tokenizer)
    executor = GemAgentExecutor(return_episode=True)
    params = EngineSamplingParams(max_tokens=4, skip_special_tokens=False)  # no logprobs
    output = asyncio.run(executor.execute(row["prompt"], row["label"], params, 300, tokenizer, engine))
    episode = output["episode"]
    assert (
        episode.num_turns == 2 and episode.info["stopped_by"] == "max_turns" and episode.turns[-1].truncated
    )
    assert TURN_REWARDS not in output["extra_logs"] and output["rollout_log_probs"] is None
    assert params.max_tokens == 4 and params.stop_token_ids is None  # the caller's params are untouched

    # Without --rollout.max_new_tokens a turn may take all the room left, closing ids included.
    params = EngineSamplingParams(max_tokens=None, skip_special_tokens=False)
    output = asyncio.run(executor.execute(row["prompt"], row["label"], params, 150, tokenizer, engine))
    first = output["episode"].turns[0]
    assert len(output["observation_tokens"]) <= 150
    if first.finish_reason == "length":
        assert len(output["observation_tokens"]) == 150 and output["episode"].num_turns == 1


def test_first_prompt_longer_than_max_len_is_refused(tokenizer, tiny_model):
    (row,) = task_rows(make_tasks("game:Mastermind-v1-easy", 1))
    engine = PolicyEngine(TransformersPolicy(tiny_model, tokenizer), tokenizer)
    with pytest.raises(ValueError, match=r"--data\.max_len"):
        asyncio.run(
            GemAgentExecutor().execute(
                row["prompt"], row["label"], openrlhf_sampling_params(), 40, tokenizer, engine
            )
        )


def test_malformed_label_is_named():
    with pytest.raises(ValueError, match="env_id and seed"):
        Task.from_label(json.dumps({"seed": 1}))
    task = Task("game:Hangman-v1", 3, {"max_turns": 2}, "sys", 4, {"enable_thinking": False})
    assert Task.from_label(task.to_label()) == task == Task.from_label(json.loads(task.to_label()))


def test_policy_engine_follows_vllm_sampling_params(tokenizer, tiny_model):
    engine = PolicyEngine(TransformersPolicy(tiny_model, tokenizer, seed=0), tokenizer, default_max_tokens=5)
    eos = tokenizer.eos_token_id
    params = engine.policy_params(EngineSamplingParams(top_k=-1, stop_token_ids=[7], temperature=0.0))
    assert (params.max_new_tokens, params.top_k, params.temperature) == (5, 0, 0.0)
    assert params.stop_token_ids == (7, eos)
    assert engine.policy_params(EngineSamplingParams(ignore_eos=True)).stop_token_ids == ()
    with pytest.raises(NotImplementedError):
        engine.policy_params(EngineSamplingParams(min_tokens=2))

    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=True, return_dict=False
    )
    out = asyncio.run(engine.generate(prompt, EngineSamplingParams(max_tokens=4, logprobs=1))).outputs[0]
    assert 1 <= len(out.token_ids) <= 4 and out.finish_reason in ("stop", "length")
    assert [list(entry) for entry in out.logprobs] == [[t] for t in out.token_ids]
    assert out.text == tokenizer.decode(out.token_ids, skip_special_tokens=True)  # vLLM's default
