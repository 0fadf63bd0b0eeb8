"""ReferenceObservation: the episode so far, shown as the reference GEM's ``ObservationWrapper`` shows it.

The reference GEM (``gem-llm`` 0.1.0, Apache-2.0) renders its observation wrappers' text this way,
and models trained with it saw exactly this text, so ``WRAPPER_FACTORY``'s ``concat*`` names use it:

* ``include_action=False``: every observation so far, each ending in a newline;
* ``include_action=True``: observations and actions interleaved, each ending in a newline (an
  action is ``info["parsed_action"]`` when the env gives one);
* ``include_chat_template=True``: the same as chat messages (a tool's output as role ``tool``, when
  ``info["use_tool"]``) rendered by ``tokenizer.apply_chat_template`` with the generation prompt;
* ``apply_chat_template_on_reset=True``: the first observation alone goes through the chat template;
* then ``info["prefix"]`` is put before and ``info["suffix"]`` (the games' board) after the text;
* ``max_history_length``: only the last that many turns are kept.

``tests/compat`` checks it against the reference's wrapper text for text.
"""

from __future__ import annotations

from typing import Any

from gem_core.core import Env, StepResult
from gem_core.wrappers.observation import HistoryWrapper


def _line(text: str) -> str:
    return text if not text or text.endswith("\n") else text + "\n"


class ReferenceObservation(HistoryWrapper):
    _static_attributes = ("tokenizer",)

    def __init__(
        self,
        env: Env,
        include_action: bool = True,
        include_chat_template: bool = True,
        apply_chat_template_on_reset: bool = False,
        max_history_length: int | None = None,
        tokenizer: Any = None,
    ):
        super().__init__(env)
        if include_chat_template and apply_chat_template_on_reset:
            raise ValueError("include_chat_template and apply_chat_template_on_reset cannot both be True")
        if (include_chat_template or apply_chat_template_on_reset) and tokenizer is None:
            raise ValueError("a chat template needs a tokenizer")
        if include_chat_template and not include_action:
            raise ValueError("a chat template needs include_action=True")
        self.include_action, self.include_chat_template = include_action, include_chat_template
        self.apply_chat_template_on_reset = apply_chat_template_on_reset
        self.max_history_length, self.tokenizer = max_history_length, tokenizer
        self.tool_outputs: list[bool] = []
        self.info: dict[str, Any] = {}

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, **kwargs)
        self._check(obs)
        if self.apply_chat_template_on_reset:
            obs = self._template([{"role": "user", "content": obs}])
        self.observations, self.actions, self.tool_outputs, self.info = (
            [obs],
            [],
            [info.get("use_tool", False)],
            info,
        )
        return self.render(), info

    def step(self, action: str) -> StepResult:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._check(obs)
        self.actions.append(info.get("parsed_action", action))
        self.observations.append(obs)
        self.tool_outputs.append(info.get("use_tool", False))
        self.info = info
        return self.render(), reward, terminated, truncated, info

    def render(self) -> str:
        keep = self.max_history_length
        observations = self.observations[-(keep + 1) :] if keep else self.observations
        tools = self.tool_outputs[-(keep + 1) :] if keep else self.tool_outputs
        actions = self.actions[-keep:] if keep else self.actions
        if not self.include_action:
            text = "".join(_line(o) for o in observations)
        elif self.include_chat_template:
            messages = []
            for o, tool, a in zip(observations, tools, actions):
                messages += [
                    {"role": "tool" if tool else "user", "content": o},
                    {"role": "assistant", "content": a},
                ]
            messages.append({"role": "tool" if tools[-1] else "user", "content": observations[-1]})
            text = self._template(messages)
        else:
            text = "".join(_line(o) + _line(a) for o, a in zip(observations, actions)) + _line(
                observations[-1]
            )
        return self.info.get("prefix", "") + text + self.info.get("suffix", "")

    def _template(self, messages: list[dict[str, str]]) -> str:
        return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
