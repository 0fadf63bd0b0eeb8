"""ROLL's env managers, importable from a module that first registers gem_core's envs with gem.

ROLL's env workers (``roll/pipeline/agentic/environment_worker.py``) import each env's
``env_manager_cls`` by its dotted path and the manager calls ``gem.make(env_type, ...)`` in that worker
process. Naming the manager through this module, e.g.::

    env_manager_cls: gem_adapters.roll.env_managers.StepChatEnvManager

runs ``register_gem_core_envs()`` in the worker before any env is built, so ``env_type:
gem_core/game:Sudoku-v0-easy`` (or a bare id that gem-llm does not register) resolves to gem_core.
ROLL's classes are re-exported unchanged; ``StepChatEnvManager`` is ROLL's ``StepEnvManager`` with the
conversation in its prompt (below). Importing this module needs ROLL on the path.

ROLL's ``ProxyEnvManager`` is not re-exported: the env worker recognises it by the substring
``proxy_env_manager`` in the configured path.
"""

import torch
from roll.distributed.scheduler.protocol import DataProto
from roll.pipeline.agentic.env_manager.base_env_manager import RolloutCache
from roll.pipeline.agentic.env_manager.step_concat_env_manager import StepConcatEnvManager
from roll.pipeline.agentic.env_manager.step_env_manager import StepEnvManager
from roll.pipeline.agentic.env_manager.token_mask_utils import custom_apply_chat_template
from roll.pipeline.agentic.env_manager.traj_env_manager import TrajEnvManager
from roll.utils.hash_utils import compute_object_hash
from tensordict import TensorDict

from gem_adapters.roll.registration import register_gem_core_envs

register_gem_core_envs()


class StepChatEnvManager(StepEnvManager):
    """One training sample per turn (ROLL's ``StepEnvManager``, what ``step_reinforce`` needs) whose prompt
    is the episode so far as a chat: the system template, then each earlier turn's observation (user) and
    reply (assistant), then the current observation, as TRL, verl and OpenRLHF prompt a multi-turn episode.

    ROLL has no setting for that: ``StepConcatEnvManager``'s ``history_length`` joins the earlier
    observations into one user message without the replies (gem's ``concat`` wrapper),
    ``StepEnvManager``'s history keeps only the invalid replies, and ``TrajEnvManager`` prompts with the
    whole chat but makes one sample per episode. Here ``history_length`` (the env's ``custom_envs`` key that
    ROLL's step managers read) keeps the last ``history_length - 1`` turns before the current one; ``1``
    prompts with the current observation alone. Each observation is rendered with ``agent_template``
    (``{observation}`` or ``{current_observation}``; ``{turn_idx}``, ``{actions_left}`` and ``{suffix}``
    as ``TrajEnvManager`` renders them), the first one after a non-empty ``env_instruction``."""

    def format_messages(self, rollout_cache: RolloutCache) -> DataProto:
        history = rollout_cache.history
        current = history[-1]
        system = (
            []
            if self.agent_system_template is None
            else [{"role": "system", "content": self.agent_system_template}]
        )
        # This turn's new messages: make_decision appends the reply and hands the LLM proxy every entry's
        # messages, so the system template goes with the first entry only (the conversation, once).
        current["messages"] = [*(system if len(history) == 1 else []), self._user_message(rollout_cache)]
        keep = max(int(self.cfg_template.get("history_length", 1)) - 1, 0)
        earlier = history[max(len(history) - 1 - keep, 0) : -1]
        turns = [m for entry in earlier for m in entry["messages"] if m["role"] != "system"]
        prompt_ids = custom_apply_chat_template(
            messages=[*system, *turns, current["messages"][-1]],
            tokenizer=self.tokenizer,
            add_generation_prompt=True,
            skip_mock_system_prompt=self.pipeline_config.skip_mock_system_prompt,
        )
        current["prompt_ids"] = prompt_ids  # the turn's sample prompt (StepEnvManager.formulate_rollouts)
        current["state_hash"] = compute_object_hash(current["observation"])  # GiGPO's state, as ROLL's
        input_ids = torch.tensor([prompt_ids], dtype=torch.long)
        attention_mask = torch.ones_like(input_ids)
        lm_input = DataProto()
        lm_input.batch = TensorDict(
            {
                "input_ids": input_ids,
                "attention_mask": attention_mask,
                "position_ids": attention_mask.cumsum(-1) - 1,
            },
            batch_size=1,
        )
        return lm_input

    def _user_message(self, rollout_cache: RolloutCache) -> dict:
        """The current observation through ``agent_template``, the episode's first after its
        ``env_instruction`` when that is not empty."""
        current = rollout_cache.history[-1]
        content = self.agent_template.format(
            observation=current["observation"],
            current_observation=current["observation"],
            turn_idx=rollout_cache.step + 1,
            actions_left=current.get("actions_left"),
            suffix=current.get("suffix", ""),
            max_response_length=self.env_config["max_tokens_per_step"],
        )
        instruction = rollout_cache.history[0].get("env_instruction") if rollout_cache.step == 0 else None
        return {"role": "user", "content": f"{instruction}\n{content}" if instruction else content}


__all__ = ["StepChatEnvManager", "StepConcatEnvManager", "StepEnvManager", "TrajEnvManager"]
