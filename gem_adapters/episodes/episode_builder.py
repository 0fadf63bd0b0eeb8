"""EpisodeBuilder: one episode recorded as it is played, on a ``ChatRenderer``.

``EpisodeBuilder(renderer, first observation)`` starts one; ``context()`` is what the policy
continues from (a ``PromptIds``: the ids, and the images their image tokens stand for),
``add_action`` records the generated ids, ``add_feedback`` the env's answer, ``finish`` closes the
last turn and returns the ``Episode``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.episodes.episode import Episode, Turn, observation_images
from gem_core.observation import MultimodalObservation


class EpisodeBuilder:
    """Accumulates one episode as it is played; ``context()`` is what the policy continues from.

    ``EpisodeBuilder(renderer, first_observation, env_id=..., seed=..., state_key=...)`` begins the
    episode (``state_key``: the env's, see ``Turn.state_key``). Call order: ``context()`` -> ``add_action(...)`` -> ``add_feedback(...)`` -> ``context()`` -> ... ->
    ``finish()``. Appending is amortised constant time per token.
    """

    def __init__(
        self,
        renderer: ChatRenderer,
        observation: str | MultimodalObservation,
        *,
        env_id: str | None = None,
        seed: int | None = None,
        state_key: Any = None,
    ):
        self.renderer = renderer
        self.episode = Episode(
            env_id=env_id,
            seed=seed,
            system_prompt=renderer.system_prompt,
            prefix_messages=[dict(m) for m in renderer.prefix_messages],
        )
        self.ids = PromptIds()
        self.done = False
        self._observation: str | MultimodalObservation | None = observation
        self._prompt_ids: list[int] | None = None
        self._closed = 0  # end-of-turn ids the previous action generated itself
        self._texts: list[str] = []  # the rendered text, piece by piece (for the template check)
        self._state_key = state_key  # the env's state key for the observation awaiting an action
        self._role = "user"  # the chat role of that observation: "user", or "tool" for a tool's result

    def context(self) -> PromptIds:
        """Every id so far plus the prompt for the current observation (rendered once, on first call),
        with the images of those ids in ``.images``. The list is the builder's own: read it, do not
        modify it."""
        if self.done or self._observation is None:
            raise RuntimeError("the episode has no observation awaiting an action")
        if self._prompt_ids is None:
            images = observation_images(self._observation)
            if self.episode.turns:
                text = self.renderer.continuation_text(self._observation, self._role)
                ids = self.renderer.encode(text, images)
                if ids[: self._closed] != self.renderer.closing_ids[: self._closed]:
                    raise RuntimeError(
                        "the template's end of turn tokenises differently before this observation"
                    )
                self._prompt_ids = ids[self._closed :]
            else:
                text = self.renderer.first_prompt_text(self._observation)
                self._prompt_ids = self.renderer.encode(text, images)
            self._texts.append(text)
            self.ids.extend(self._prompt_ids)
            self.ids.images += images
        return self.ids

    def add_action(
        self, token_ids: Sequence[int], logprobs: Sequence[float] | None = None, finish_reason: str = "stop"
    ) -> str:
        """Record the generated ids for the current observation; returns the action text for the env."""
        self.context()
        action_ids = [int(t) for t in token_ids]
        if logprobs is not None and len(logprobs) != len(action_ids):
            raise ValueError(f"{len(logprobs)} logprobs for {len(action_ids)} generated ids")
        self._closed = self.renderer.generated_closing(action_ids)
        text = self.renderer.decode(action_ids[: len(action_ids) - self._closed])
        self.episode.turns.append(
            Turn(
                observation=self._observation,  # type: ignore[arg-type]
                action=text,
                prompt_ids=self._prompt_ids,  # type: ignore[arg-type]
                action_ids=action_ids,
                logprobs=None if logprobs is None else [float(x) for x in logprobs],
                finish_reason=finish_reason,
                state_key=self._state_key,
                observation_role=self._role,
            )
        )
        self.ids.extend(action_ids)
        self._texts.append(text)
        self._observation = self._prompt_ids = None
        return text

    def add_feedback(
        self,
        observation: str | MultimodalObservation,
        reward: float | None,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any] | None = None,
        state_key: Any = None,
    ) -> None:
        """Record the env's answer to the last action. ``reward`` None (an env with no reward signal
        for this turn) is stored as 0.0 (``gem_adapters.algorithms.advantages``); ``state_key`` is the env's state
        key after the action, which the next turn records. ``info["use_tool"]`` marks ``observation`` as
        a tool's result, rendered with the template's tool role (``ChatRenderer.tool_role``)."""
        if not self.episode.turns or self._observation is not None:
            raise RuntimeError("add_feedback follows add_action")
        reward = 0.0 if reward is None else float(reward)
        if not math.isfinite(reward):
            raise ValueError(f"the env returned a non-finite reward {reward}; use None for no reward")
        turn = self.episode.turns[-1]
        turn.reward, turn.terminated, turn.truncated = reward, bool(terminated), bool(truncated)
        turn.info = dict(info or {})
        self._observation = observation
        self._state_key = state_key
        self._role = self.renderer.observation_role(info)
        self.done = bool(terminated or truncated)

    def finish(self, reason: str | None = None) -> Episode:
        """Close the last turn and return the episode. ``reason`` (e.g. ``"max_turns"``) marks an
        episode the driver stopped: its last turn is flagged truncated."""
        if self._prompt_ids is not None:  # a prompt was rendered but never answered
            del self.ids[len(self.ids) - len(self._prompt_ids) :]
            self.ids.images = self.ids.images[
                : len(self.ids.images) - len(observation_images(self._observation))
            ]
            self._texts.pop()
            self._prompt_ids = None
        episode = self.episode
        episode.final_observation = self._observation
        if episode.turns:
            episode.closing_ids = self.renderer.closing_ids[self._closed :]
            self.ids.extend(episode.closing_ids)
        if reason is not None:
            episode.info["stopped_by"] = reason
            if episode.turns and not (episode.turns[-1].terminated or episode.turns[-1].truncated):
                episode.turns[-1].truncated = True
        if self.renderer.check_template and episode.turns:
            rendered = self.renderer.render(episode.messages(), add_generation_prompt=False)
            episode.template_rewrites_history = rendered != "".join(
                [*self._texts, self.renderer.closing_text]
            )
        self.done = True
        self._observation = None
        return episode


class PromptIds(list):
    """Token ids to generate from (a plain ``list`` of ints), with ``images``: the PNG bytes of the
    images whose tokens the ids hold, in order (empty for text)."""

    images: tuple[bytes, ...] = ()
