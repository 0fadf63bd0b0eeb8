"""Observation wrappers: how the conversation so far is shown to the agent.

All of them keep the episode's history (observations and actions) and differ only in ``render``:

  ``ConcatObservations``      every observation so far, joined
  ``ObservationActionHistory`` observations and actions interleaved, as a transcript
  ``LastKTurns``              the first observation (the rules) and the last ``k`` turns
  ``ChatMessages``            a list of ``{"role", "content"}`` messages (user = env, assistant = agent)
  ``ChatTemplate``            those messages rendered by a tokenizer's chat template, ready to generate

Image observations (``gem_core.observation.MultimodalObservation``): ``ChatMessages`` shows them as
content lists with image entries (the form multimodal chat templates accept); the wrappers that render
text refuse them with a ``TypeError`` instead of dropping the images.
"""

from __future__ import annotations

from typing import Any

from gem_core.core import Env, StepResult, Wrapper
from gem_core.observation import MultimodalObservation, text_only_error


class HistoryWrapper(Wrapper):
    """Base: records ``observations`` and ``actions`` of the episode and renders them with ``render``."""

    accepts_images = False  # whether ``render`` can show a MultimodalObservation's images

    def __init__(self, env: Env):
        super().__init__(env)
        self.observations: list[str] = []
        self.actions: list[str] = []

    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, **kwargs)
        self._check(obs)
        self.observations, self.actions = [obs], []
        return self.render(), info

    def step(self, action: str) -> StepResult:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._check(obs)
        self.actions.append(action)
        self.observations.append(obs)
        return self.render(), reward, terminated, truncated, info

    def render(self) -> Any:
        raise NotImplementedError

    def _check(self, obs: Any) -> None:
        if isinstance(obs, MultimodalObservation) and not self.accepts_images:
            raise text_only_error(type(self).__name__)


class ConcatObservations(HistoryWrapper):
    def __init__(self, env: Env, separator: str = "\n\n"):
        super().__init__(env)
        self.separator = separator

    def render(self) -> str:
        return self.separator.join(self.observations)


class ObservationActionHistory(HistoryWrapper):
    """A transcript: ``Observation: ...`` / ``Action: ...`` blocks, ending with the newest observation."""

    def __init__(self, env: Env, obs_prefix: str = "Observation: ", action_prefix: str = "Your action: "):
        super().__init__(env)
        self.obs_prefix, self.action_prefix = obs_prefix, action_prefix

    def render(self) -> str:
        parts = [self.obs_prefix + self.observations[0]]
        for action, obs in zip(self.actions, self.observations[1:]):
            parts += [self.action_prefix + action, self.obs_prefix + obs]
        return "\n\n".join(parts)


class LastKTurns(HistoryWrapper):
    """The first observation (it holds the rules) plus the last ``k`` action/observation pairs."""

    def __init__(self, env: Env, k: int = 4, action_prefix: str = "Your action: "):
        super().__init__(env)
        if k < 1:
            raise ValueError("k must be at least 1")
        self.k, self.action_prefix = k, action_prefix

    def render(self) -> str:
        pairs = list(zip(self.actions, self.observations[1:]))[-self.k :]
        parts = [self.observations[0]]
        if len(self.actions) > self.k:
            parts.append(f"[{len(self.actions) - self.k} earlier turns omitted]")
        for action, obs in pairs:
            parts += [self.action_prefix + action, obs]
        return "\n\n".join(parts)


class ChatMessages(HistoryWrapper):
    """The episode as chat messages; an optional system prompt comes first. An image observation's
    content is a list: ``[{"type": "image", "image": <PIL.Image>}, ..., {"type": "text", "text": ...}]``."""

    accepts_images = True

    def __init__(self, env: Env, system_prompt: str | None = None):
        super().__init__(env)
        self.system_prompt = system_prompt

    def render(self) -> list[dict[str, Any]]:
        messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        messages.append({"role": "user", "content": _content(self.observations[0])})
        for action, obs in zip(self.actions, self.observations[1:]):
            messages += [{"role": "assistant", "content": action}, {"role": "user", "content": _content(obs)}]
        return messages


class ChatTemplate(ChatMessages):
    """The chat messages rendered by ``tokenizer.apply_chat_template`` with the generation prompt added.

    ``tokenizer`` is anything with a Hugging Face style ``apply_chat_template`` (it is not imported here).
    """

    _static_attributes = ("tokenizer",)
    accepts_images = False  # the rendered text would keep only the template's image placeholders

    def __init__(self, env: Env, tokenizer: Any, system_prompt: str | None = None, **template_kwargs: Any):
        super().__init__(env, system_prompt)
        self.tokenizer = tokenizer
        self.template_kwargs = template_kwargs

    def render(self) -> str:
        return self.tokenizer.apply_chat_template(
            super().render(), tokenize=False, add_generation_prompt=True, **self.template_kwargs
        )


def _content(obs: Any) -> Any:
    return obs.to_chat_content() if isinstance(obs, MultimodalObservation) else obs
