"""Episodes, token in / token out: what a model saw and generated, as exact token ids.

An ``Episode`` is a list of ``Turn``s. Each turn holds the observation, the ids the template and env
added before the action (``prompt_ids``), the action's ids exactly as generated (``action_ids``),
their logprobs, the reward and the env's flags. Laid end to end, the turns are the episode's token
sequence. Its layouts:

  ``to_sequence()``         the sequence with a loss mask (1 on generated tokens, 0 on env and
                            template tokens) and the span of each turn's action
  ``to_prompt_response()``  the same cut before the first action: the prompt, and the response that
                            holds every action (the one-sample-per-episode form of TRL, verl, OpenRLHF)
  ``to_turn_samples()``     one sample per turn: the full context before the action, and the action

``Episode``s are built turn by turn by ``gem_adapters.episodes.episode_builder.EpisodeBuilder`` (from a
``gem_adapters.episodes.chat_renderer.ChatRenderer``), stored by ``gem_adapters.episodes.jsonl`` and summarised by
``gem_adapters.episodes.episode_stats``; ``rescore`` replaces the rewards of stored episodes.

Images: an observation may be a ``gem_core.observation.MultimodalObservation`` (text + PNG images);
``Episode.images()`` lists the images of the sequence, and ``to_dict`` stores them as base64 PNG.
"""

from __future__ import annotations

import copy
import itertools
import math
import numbers
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from gem_core.observation import MultimodalObservation


@dataclass
class Turn:
    """One action and the env's answer to it."""

    observation: str | MultimodalObservation  # what the model answered to
    action: str  # the generated text (without a generated end-of-turn token), as sent to the env
    prompt_ids: list[int]  # env/template tokens appended before this action (mask 0)
    action_ids: list[int]  # the generated ids exactly as sampled (mask 1)
    logprobs: list[float] | None = None  # one per action id, from the policy
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    finish_reason: str = "stop"  # "stop": ended on a stop token; "length": cut off by max_new_tokens
    # The env's state key before this action (``gem_core.Env.state_key()``, or ``info["state_key"]``
    # of the env's previous answer); None: the env names no state. GiGPO groups turns by it.
    state_key: Any = None
    # The chat role the observation was rendered with: "user", or "tool" for a tool's result.
    observation_role: str = "user"


@dataclass
class TokenSequence:
    """An episode as one sequence; ``turn_spans[k]`` is ``(start, end)`` of turn ``k``'s action ids."""

    token_ids: list[int]
    loss_mask: list[int]
    turn_spans: list[tuple[int, int]]
    logprobs: list[float] | None  # aligned with token_ids (0.0 where mask is 0); None if a turn has none


@dataclass
class TurnSample:
    """One turn as a stand-alone sample: the full context before the action, and the action."""

    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float] | None
    reward: float
    turn_index: int
    finish_reason: str


@dataclass
class PromptResponse:
    """An episode as one prompt/response sample: ``prompt_ids`` is everything before the first
    action (system prompt, prefix messages, first observation, generation prompt) and the response
    everything after, actions and the env and template ids between them. ``turn_spans[k]`` is
    ``(start, end)`` of action ``k`` in the response; the actions are separated runs of
    ``response_mask == 1``, so a consumer that only sees the mask finds the turns again."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float] | None  # 0.0 where the mask is 0; None if a turn has none
    turn_spans: list[tuple[int, int]]

    @property
    def token_ids(self) -> list[int]:
        """The whole sequence: prompt then response."""
        return self.prompt_ids + self.response_ids

    @property
    def logprobs(self) -> list[float] | None:
        """The logprobs of ``token_ids`` (0.0 on the prompt)."""
        if self.response_logprobs is None:
            return None
        return [0.0] * len(self.prompt_ids) + self.response_logprobs

    @property
    def sequence_spans(self) -> list[tuple[int, int]]:
        """``turn_spans`` as positions in ``token_ids``."""
        offset = len(self.prompt_ids)
        return [(start + offset, end + offset) for start, end in self.turn_spans]


@dataclass
class Episode:
    env_id: str | None = None
    seed: int | None = None
    turns: list[Turn] = field(default_factory=list)
    closing_ids: list[int] = field(default_factory=list)  # template tokens that close the last turn (mask 0)
    # the env's last observation (answered by no action)
    final_observation: str | MultimodalObservation | None = None
    system_prompt: str | None = None
    prefix_messages: list[dict[str, str]] = field(default_factory=list)  # few-shot messages before turn 1
    template_rewrites_history: bool = False
    info: dict[str, Any] = field(default_factory=dict)

    # ---- summaries --------------------------------------------------------------------------------
    @property
    def num_turns(self) -> int:
        return len(self.turns)

    @property
    def total_reward(self) -> float:
        return float(sum(t.reward for t in self.turns))

    @property
    def success(self) -> bool:
        return bool(self.turns and self.turns[-1].info.get("success", False))

    @property
    def group_id(self) -> Any:
        """Episodes that share an initial state (GRPO groups): ``info["group"]`` if set, else (env id, seed);
        hashable (a list, as JSON gives it back, is read as a tuple)."""
        group = self.info.get("group", (self.env_id, self.seed))
        return tuple(group) if isinstance(group, list) else group

    @property
    def num_generated_tokens(self) -> int:
        return sum(len(t.action_ids) for t in self.turns)

    def images(self) -> list[bytes]:
        """The PNG bytes of every image in the sequence, in order (the observations' images)."""
        return [im for t in self.turns for im in observation_images(t.observation)]

    # ---- layouts ----------------------------------------------------------------------------------
    def to_sequence(self, include_closing: bool = True) -> TokenSequence:
        """The episode as one token sequence with its loss mask and per-turn action spans.

        ``include_closing`` appends the template's end of the last turn (mask 0), which makes the
        sequence the complete rendered conversation.
        """
        ids: list[int] = []
        mask: list[int] = []
        spans: list[tuple[int, int]] = []
        has_logprobs = all(t.logprobs is not None for t in self.turns)
        logprobs: list[float] = []
        for turn in self.turns:
            ids.extend(turn.prompt_ids)
            mask.extend([0] * len(turn.prompt_ids))
            start = len(ids)
            ids.extend(turn.action_ids)
            mask.extend([1] * len(turn.action_ids))
            spans.append((start, len(ids)))
            if has_logprobs:
                logprobs.extend([0.0] * len(turn.prompt_ids))
                logprobs.extend(turn.logprobs)  # type: ignore[arg-type]
        if include_closing and self.turns:
            ids.extend(self.closing_ids)
            mask.extend([0] * len(self.closing_ids))
            logprobs.extend([0.0] * len(self.closing_ids))
        return TokenSequence(ids, mask, spans, logprobs if has_logprobs else None)

    def to_prompt_response(self, include_closing: bool = True) -> PromptResponse:
        """The sequence cut before the first action (see ``PromptResponse``). ``include_closing``
        ends the response with the template's end of the last turn (mask 0). A ``ValueError`` when the
        episode has no action (it ended before one, e.g. its first prompt filled a budget)."""
        if not self.turns:
            raise ValueError(
                f"episode of {self.env_id} (seed {self.seed}) has no action: it ended before its first one "
                f"({self.info.get('stopped_by')})"
            )
        sequence = self.to_sequence(include_closing)
        start = sequence.turn_spans[0][0]
        spans = [(a - start, b - start) for a, b in sequence.turn_spans]
        touching = any(end >= next_start for (_, end), (next_start, _) in itertools.pairwise(spans))
        if touching or any(start == end for start, end in spans):
            raise RuntimeError(
                "an action of this episode is empty or not separated from the next by env tokens"
            )
        return PromptResponse(
            prompt_ids=sequence.token_ids[:start],
            response_ids=sequence.token_ids[start:],
            response_mask=sequence.loss_mask[start:],
            response_logprobs=None if sequence.logprobs is None else sequence.logprobs[start:],
            turn_spans=spans,
        )

    def to_turn_samples(self) -> list[TurnSample]:
        """One sample per turn: every id before the action (the model's full context) and the action."""
        sequence = self.to_sequence(include_closing=False)
        return [
            TurnSample(
                prompt_ids=sequence.token_ids[:start],
                response_ids=list(turn.action_ids),
                logprobs=None if turn.logprobs is None else list(turn.logprobs),
                reward=turn.reward,
                turn_index=k,
                finish_reason=turn.finish_reason,
            )
            for k, (turn, (start, _)) in enumerate(zip(self.turns, sequence.turn_spans))
        ]

    def messages(self) -> list[dict[str, Any]]:
        """The conversation as chat messages (what a chat template renders; an image observation's
        content is a list with an ``{"type": "image"}`` placeholder per image)."""
        out = [{"role": "system", "content": self.system_prompt}] if self.system_prompt is not None else []
        out.extend(dict(m) for m in self.prefix_messages)
        for turn in self.turns:
            out.append({"role": turn.observation_role, "content": chat_content(turn.observation)})
            out.append({"role": "assistant", "content": turn.action})
        return out

    # ---- serialisation ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for turn, raw in zip(self.turns, data["turns"]):
            raw["observation"] = observation_to_json(turn.observation)
        data["final_observation"] = observation_to_json(self.final_observation)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Episode:
        known = {f.name for f in fields(cls)}
        episode = cls(**{k: v for k, v in data.items() if k in known and k != "turns"})
        episode.final_observation = observation_from_json(episode.final_observation)
        turn_fields = {f.name for f in fields(Turn)}
        episode.turns = [
            Turn(**{k: v for k, v in t.items() if k in turn_fields}) for t in data.get("turns", [])
        ]
        for turn in episode.turns:
            turn.observation = observation_from_json(turn.observation)
            turn.state_key = _from_json_key(turn.state_key)
        return episode


def rescore(
    episodes: Iterable[Episode], reward_fn: Callable[[Episode], float | Sequence[float | None]]
) -> list[Episode]:
    """Copies of ``episodes`` with new rewards: ``reward_fn(episode)`` returns the episode's
    ``turn_rewards`` (one per turn, a float or None for a turn without a reward signal, stored as
    0.0: what every estimator makes of None, ``gem_adapters.algorithms.advantages``), or a single number that
    goes on the last turn (the others get 0). The old rewards are kept in each turn's
    ``info["previous_reward"]``."""
    out = []
    for episode in episodes:
        new = copy.deepcopy(episode)
        rewards = reward_fn(episode)
        if isinstance(rewards, numbers.Real):
            rewards = [0.0] * (len(new.turns) - 1) + [float(rewards)] if new.turns else []
        rewards = [0.0 if r is None else float(r) for r in rewards]
        if len(rewards) != len(new.turns):
            raise ValueError(f"reward_fn gave {len(rewards)} rewards for {len(new.turns)} turns")
        for turn, reward in zip(new.turns, rewards):
            if not math.isfinite(reward):
                raise ValueError(f"reward_fn gave a non-finite reward {reward}; use None for no reward")
            turn.info["previous_reward"] = turn.reward
            turn.reward = reward
        out.append(new)
    return out


def _from_json_key(key: Any) -> Any:
    """A state key read back from JSON: its lists were tuples."""
    return tuple(_from_json_key(k) for k in key) if isinstance(key, list) else key


# ---- observations --------------------------------------------------------------------------------
def as_observation(obs: Any) -> str | MultimodalObservation:
    """An env's observation as an episode holds it: text, or text with images."""
    return obs if isinstance(obs, MultimodalObservation) else str(obs)


def observation_images(observation: Any) -> tuple[bytes, ...]:
    """The PNG bytes of an observation's images (empty for text)."""
    return observation.images if isinstance(observation, MultimodalObservation) else ()


def chat_content(observation: Any) -> Any:
    """A message's content: the text, or for an image observation the content list with placeholders."""
    if isinstance(observation, MultimodalObservation):
        return observation.to_chat_content(with_images=False)
    return observation


def observation_to_json(observation: Any) -> Any:
    return observation.to_json_dict() if isinstance(observation, MultimodalObservation) else observation


def observation_from_json(data: Any) -> Any:
    if isinstance(data, dict) and "images_png_base64" in data:
        return MultimodalObservation.from_json_dict(data)
    return data
