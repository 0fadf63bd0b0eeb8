"""ROLL (alibaba/ROLL) glue: gem_core envs behind the reference GEM API that ROLL's agentic pipeline uses.

ROLL builds envs with ``gem.make`` from the ``gem-llm`` package; nothing else of gem_core needs to reach it.

* ``registration.register_gem_core_envs()``: every gem_core id into gem's registry, as
  ``gem_core/<id>`` and, where gem-llm or ROLL do not own it already, as ``<id>`` (``override=True``
  takes those too);
* ``env.RollEnv``: the ``gem.Env`` that ``gem.make`` returns for them: ``env_instruction`` in the reset
  info, ``metrics`` in the step info, the episode's end as ``terminated``;
* ``special_tokens.StripSpecialTokens``: a gem_core wrapper that removes the chat template's control
  tokens (``<|im_end|>``, padding) from the ends of an action, since ROLL decodes them into the text;
* ``env_managers``: ROLL's env managers re-exported from a module that registers gem_core's envs
  when a ROLL env worker imports it, and ``StepChatEnvManager`` (one sample per turn whose prompt is the
  episode so far as a chat) (needs ROLL importable).

``examples/train_roll.py`` composes a ROLL config (``examples/roll/agentic_gem_rebn.yaml``: ReBN as
ROLL's ``step_reinforce`` with batch ``mean_std`` reward normalisation; ``agentic_gem_grpo.yaml``) with
Hydra overrides, writes it and launches ROLL's ``examples/start_agentic_pipeline.py``. Importing this package imports neither
ROLL nor gem-llm.
"""

from gem_adapters.roll.registration import NAMESPACE, register_gem_core_envs
from gem_adapters.roll.special_tokens import (
    DEFAULT_SPECIAL_TOKENS,
    StripSpecialTokens,
    strip_special_tokens,
)

__all__ = [
    "DEFAULT_SPECIAL_TOKENS",
    "NAMESPACE",
    "StripSpecialTokens",
    "register_gem_core_envs",
    "strip_special_tokens",
]
