"""The reference GEM's wrapper names (``gem.wrappers.wrapper_factory``), mapped onto gem_core's wrappers.

Code written for the reference — ``get_wrapper_fns("concat", tokenizer=tok)`` or
``WRAPPER_FACTORY["concat_chat"](env, tokenizer=tok)`` — runs unchanged. Each name keeps the
reference's settings:

| name | gem_core wrapper |
|------|------------------|
| ``python_tool`` | ``ToolEnvWrapper`` with ``PythonTool(timeout=5)``, ``tool_reward=0.05``, ``tool_success_reward=0.25``, ``max_tool_uses=5`` |
| ``python_tool_no_int_reward`` | the same with no tool rewards |
| ``python_tool_no_int_reward_last_line_error`` | the same: gem_core's tool shows the whole stderr (the traceback), not only its last line |
| ``search_tool`` | ``ToolEnvWrapper`` with ``SearchTool(k=3, timeout=5)`` (gem_core's local index unless ``url``), ``tool_reward=0.3``, ``max_tool_uses=5`` |
| ``search_tool_no_int_reward`` | the same with no tool rewards |
| ``concat`` | ``ReferenceObservation(include_action=False, include_chat_template=False)`` |
| ``concat_with_action`` | ``ReferenceObservation(include_action=True, include_chat_template=False)`` |
| ``concat_chat`` | ``ReferenceObservation(include_action=True, include_chat_template=True)``, needs ``tokenizer`` |
| ``concat_chat_on_reset`` | ``ReferenceObservation(include_action=True, include_chat_template=False, apply_chat_template_on_reset=True)``, needs ``tokenizer`` |
| ``episode_tracking`` | ``EpisodeTrackingWrapper``: the reference's ``step_counter``/``cumulative_rewards`` info keys (and ``EpisodeStatistics``' ``info["episode"]``) |

Tools are built when a wrapper is (one per env), not when this module is imported.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from gem_core.core import Env
from gem_core.wrappers.episode_tracking_wrapper import EpisodeTrackingWrapper
from gem_core.wrappers.reference_observation import ReferenceObservation
from gem_core.wrappers.tools import ToolEnvWrapper


def _python_tool(
    env: Env, tool_reward: float, tool_success_reward: float, **tool_kwargs: Any
) -> ToolEnvWrapper:
    from gem_core.tools.python import PythonTool

    tools = [PythonTool(timeout=5, **tool_kwargs)]
    return ToolEnvWrapper(
        env, tools, tool_reward=tool_reward, tool_success_reward=tool_success_reward, max_tool_uses=5
    )


def _search_tool(env: Env, tool_reward: float, **tool_kwargs: Any) -> ToolEnvWrapper:
    from gem_core.tools.search import SearchTool

    tools = [SearchTool(k=3, timeout=5, **tool_kwargs)]
    return ToolEnvWrapper(env, tools, tool_reward=tool_reward, tool_success_reward=0.0, max_tool_uses=5)


WRAPPER_FACTORY = {
    "python_tool": partial(_python_tool, tool_reward=0.05, tool_success_reward=0.25),
    "python_tool_no_int_reward": partial(_python_tool, tool_reward=0.0, tool_success_reward=0.0),
    "python_tool_no_int_reward_last_line_error": partial(
        _python_tool, tool_reward=0.0, tool_success_reward=0.0
    ),
    "search_tool": partial(_search_tool, tool_reward=0.3),
    "search_tool_no_int_reward": partial(_search_tool, tool_reward=0.0),
    "concat": partial(ReferenceObservation, include_action=False, include_chat_template=False),
    "concat_chat": partial(ReferenceObservation, include_action=True, include_chat_template=True),
    "concat_with_action": partial(ReferenceObservation, include_action=True, include_chat_template=False),
    "concat_chat_on_reset": partial(
        ReferenceObservation,
        include_action=True,
        include_chat_template=False,
        apply_chat_template_on_reset=True,
    ),
    "episode_tracking": EpisodeTrackingWrapper,
}

TOKENIZER_REQUIRED = ["concat_chat", "concat_chat_on_reset"]


def get_wrapper_fns(wrappers: str, tokenizer: Any = None) -> list:
    """The wrappers named in the comma-separated ``wrappers`` (e.g. ``"python_tool,concat_chat"``), in
    order; ``tokenizer`` goes to those that need one."""
    fns = []
    for name in filter(None, (w.strip() for w in (wrappers or "").split(","))):
        if name not in WRAPPER_FACTORY:
            raise KeyError(f"unknown wrapper {name!r}; choose from {sorted(WRAPPER_FACTORY)}")
        fn = WRAPPER_FACTORY[name]
        fns.append(
            partial(fn, tokenizer=tokenizer) if name in TOKENIZER_REQUIRED and tokenizer is not None else fn
        )
    return fns
