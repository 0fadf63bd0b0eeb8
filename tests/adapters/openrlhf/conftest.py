"""Episodes played through OpenRLHF's agent-executor interface, once per session.

The executor is built from ``gem_adapters/openrlhf/agent_func.py`` by OpenRLHF's own loader, with
``GEM_OPENRLHF_ESTIMATOR`` set as ``gem_adapters.openrlhf.hook`` sets it in the engine actors. Each
prompt row is played twice, as ``--rollout.n_samples_per_prompt 2`` does, through ``PolicyEngine``:
a tiny random transformers model (format errors, cut-off turns, an episode stopped by the context
budget) and, on GuessTheNumber rows, a scripted player that guesses 1, 2, 3, ... (wins on seed 1).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

MAX_LEN = 420  # --data.max_len
TURN_CAP = 8  # --rollout.max_new_tokens
SYSTEM_PROMPT = "Answer with \\boxed{...}."
AGENT_FUNC = Path(__file__).resolve().parents[3] / "gem_adapters" / "openrlhf" / "agent_func.py"


def openrlhf_sampling_params():
    """What ``SamplesGenerator`` builds for the engines (logprobs on, as with IS correction)."""
    from tests.adapters.openrlhf.policy_engine import EngineSamplingParams

    return EngineSamplingParams(
        max_tokens=TURN_CAP,
        temperature=1.0,
        top_p=1.0,
        top_k=-1,
        min_tokens=1,
        skip_special_tokens=False,
        logprobs=1,
    )


def scripted_guesser(tokenizer):
    """Guesses 1, 2, 3, ... in turn: ``\\boxed{k}<|im_end|>``, k = 1 + the actions in the context."""
    from gem_adapters.policies.base import as_policy

    end = tokenizer.convert_tokens_to_ids("<|im_end|>")

    def play(prompts, params):
        out = []
        for prompt in prompts:
            k = tokenizer.decode(prompt).count("<|im_start|>assistant")
            ids = [*tokenizer.encode(f"\\boxed{{{k}}}", add_special_tokens=False), end]
            out.append((ids, [0.0] * len(ids)))  # a deterministic player: probability 1
        return out

    return as_policy(play)


@pytest.fixture(scope="session")
def played(tokenizer, tiny_model):
    """``[(row, player, output)]`` for GuessTheNumber seeds 0, 1 and Mastermind seed 2."""
    pytest.importorskip("openrlhf.utils.agent")
    from gem_adapters.episodes.tasks import make_tasks
    from gem_adapters.openrlhf.config import ESTIMATOR_ENV
    from gem_adapters.openrlhf.rows import task_rows
    from gem_adapters.policies.transformers_policy import TransformersPolicy
    from tests.adapters.openrlhf.policy_engine import PolicyEngine

    from .openrlhf_source import load_agent_executor

    rows = task_rows(make_tasks("game:GuessTheNumber-v1-easy", 2, first_seed=0, system_prompt=SYSTEM_PROMPT))
    rows += task_rows(make_tasks("game:Mastermind-v1-easy", 1, first_seed=2, system_prompt=SYSTEM_PROMPT))
    engines = {
        "model": PolicyEngine(TransformersPolicy(tiny_model, tokenizer, seed=0), tokenizer),
        "script": PolicyEngine(scripted_guesser(tokenizer), tokenizer),
    }
    previous = os.environ.get(ESTIMATOR_ENV)
    os.environ[ESTIMATOR_ENV] = "rebn"
    try:
        executor = load_agent_executor(str(AGENT_FUNC))
        executor.return_episode = True

        async def play_all():
            jobs, keys = [], []
            for row in rows:
                players = ["model", "script"] if "GuessTheNumber" in row["datasource"] else ["model", "model"]
                for player in players:
                    jobs.append(
                        executor.execute(
                            prompt=row["prompt"],
                            label=row["label"],
                            sampling_params=openrlhf_sampling_params(),
                            max_length=MAX_LEN,
                            hf_tokenizer=tokenizer,
                            llm_engine=engines[player],
                        )
                    )
                    keys.append((row, player))
            return [(row, player, out) for (row, player), out in zip(keys, await asyncio.gather(*jobs))]

        return asyncio.run(play_all())
    finally:
        if previous is None:
            os.environ.pop(ESTIMATOR_ENV, None)
        else:
            os.environ[ESTIMATOR_ENV] = previous
