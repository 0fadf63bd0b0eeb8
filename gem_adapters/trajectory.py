"""Trajectories, token in / token out: episodes as the exact token ids a model saw and generated.

An ``Episode`` is a list of ``Turn``s. Each turn holds the observation, the ids the template and env
added before the action (``prompt_ids``), the action's ids exactly as generated (``action_ids``),
their logprobs, the reward and the env's flags. Laid end to end, the turns are the episode's token
sequence; ``Episode.to_sequence()`` returns it with a loss mask (1 on generated tokens, 0 on
env and template tokens) and the span of each turn's action, and ``Episode.to_turn_samples()``
gives one sample per turn (the full context before the action + the action).

Rendering is incremental. ``ChatRenderer`` renders the first observation once (after the system
prompt and any few-shot ``prefix_messages``); after that, the ids between an action and the next
generation are the suffix of a short fixed probe conversation (``system?, prefix?, user, assistant,
user(observation)``) after the probe assistant's content: the end of the assistant turn, the user
turn and the generation prompt. Each turn costs time proportional to its own length, so an episode
costs time linear in its length (re-rendering the whole history every turn, as the reference GEM
does, is quadratic). Templates that inject a default system prompt or need one are handled by the
probe, which starts the way a real conversation does. When the template inserts user text verbatim
(checked at construction on awkward samples), the probe is rendered once and split around the
observation, so a turn costs one tokenizer call and no template render at all.

End of turn: a policy stops on ``renderer.stop_token_ids`` (the template's end-of-turn token) and
that token stays in ``action_ids`` with mask 1: the model learnt to end its turn. When the model is
cut off by ``max_new_tokens`` instead, the renderer appends the whole end-of-turn text the template
expects (e.g. ``<|im_end|>\\n``) as template tokens with mask 0, so the sequence stays a well-formed
conversation; ``Turn.finish_reason`` records which happened.

Templates that rewrite history: some templates render an earlier assistant turn differently from the
way it was generated (Qwen3 drops the ``<think>`` block of every assistant turn before the last user
message, and reformats the last one). The sequence here always keeps the tokens as generated, which
is what the model actually conditioned on. When an episode finishes, the template's own rendering of
the whole conversation is compared with the text the renderer produced piece by piece (one render and
one string comparison, linear cost); if they differ, ``Episode.template_rewrites_history`` is True.
No data is dropped and no mask is changed.

Token exactness: the sequence is the template's own tokenisation of the conversation whenever (a) the
template does not rewrite history and (b) the generated ids are the tokenizer's canonical encoding of
their text. (b) is about the model, not the renderer: a model may sample a non-canonical split
(``"hel" + "lo"``) or a token that would merge with the preceding ``\\n`` when re-encoded; the tokens
it sampled are kept.

Record and replay: ``write_jsonl`` / ``read_jsonl`` store episodes one per line (texts, ids,
logprobs, rewards, info, env id, seed); ``rescore`` replaces the rewards of stored episodes.

Images: an observation may be a ``gem_core.observation.MultimodalObservation`` (text + PNG images).
Rendering one needs a multimodal processor (``ChatRenderer(AutoProcessor.from_pretrained(...))``):
the template places its image placeholder and the processor expands it into the image tokens the
model expects, so the ids are exactly what the model and a trainer's processor see. ``context()``
returns ``PromptIds``, a list of ids that also carries ``.images`` (the PNG bytes its image tokens
stand for, in order), which an image-aware policy reads (``gem_adapters.multimodal``); text policies
just see the ids. ``Episode.images()`` lists the images of the sequence, and the JSONL form stores
them as base64 PNG.
"""

from __future__ import annotations

import copy
import io
import json
import math
import numbers
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from gem_core.observation import MultimodalObservation, text_only_error

_USER_PROBE = "GEMPROBEUSERq7"
_ASSISTANT_PROBE = "GEMPROBEASSISTANTz9"


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
        """Episodes that share an initial state (GRPO groups): ``info["group"]`` if set, else (env id, seed)."""
        return self.info.get("group", (self.env_id, self.seed))

    @property
    def num_generated_tokens(self) -> int:
        return sum(len(t.action_ids) for t in self.turns)

    def images(self) -> list[bytes]:
        """The PNG bytes of every image in the sequence, in order (the observations' images)."""
        return [
            im
            for t in self.turns
            if isinstance(t.observation, MultimodalObservation)
            for im in t.observation.images
        ]

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
            out.append({"role": "user", "content": _chat_content(turn.observation)})
            out.append({"role": "assistant", "content": turn.action})
        return out

    # ---- serialisation ----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for turn, raw in zip(self.turns, data["turns"]):
            raw["observation"] = _observation_to_json(turn.observation)
        data["final_observation"] = _observation_to_json(self.final_observation)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Episode:
        known = {f.name for f in fields(cls)}
        episode = cls(**{k: v for k, v in data.items() if k in known and k != "turns"})
        episode.final_observation = _observation_from_json(episode.final_observation)
        turn_fields = {f.name for f in fields(Turn)}
        episode.turns = [
            Turn(**{k: v for k, v in t.items() if k in turn_fields}) for t in data.get("turns", [])
        ]
        for turn in episode.turns:
            turn.observation = _observation_from_json(turn.observation)
        return episode


class ChatRenderer:
    """Renders observations into token ids incrementally, with ``tokenizer``'s chat template (or
    ``chat_template``). ``template_kwargs`` go to the template (e.g. ``enable_thinking=False``).

    ``prefix_messages`` (chat messages, e.g. a demonstration: a user turn and the assistant's answer)
    are rendered after the system prompt and before the first observation, as the template renders
    them. They are context: their tokens belong to the first turn's ``prompt_ids`` (mask 0), and every
    episode keeps a copy in ``Episode.prefix_messages``, so ``Episode.messages()`` is the whole
    conversation the model saw.

    ``check_template`` compares, when an episode finishes, the template's full rendering with the
    sequence and sets ``Episode.template_rewrites_history`` (one render per episode, linear cost).
    """

    def __init__(
        self,
        tokenizer: Any,
        system_prompt: str | None = None,
        *,
        chat_template: str | None = None,
        template_kwargs: dict[str, Any] | None = None,
        check_template: bool = True,
        prefix_messages: Sequence[dict[str, str]] | None = None,
    ):
        # A multimodal processor (it has an image processor) renders image observations; its own
        # tokenizer does everything else.
        self.processor = tokenizer if hasattr(tokenizer, "image_processor") else None
        self.tokenizer = tokenizer = tokenizer.tokenizer if self.processor is not None else tokenizer
        self.system_prompt = system_prompt
        self.prefix_messages = [_message(m) for m in prefix_messages or ()]
        self.chat_template = chat_template
        self.template_kwargs = dict(template_kwargs or {})
        self.check_template = check_template
        system = [{"role": "system", "content": system_prompt}] if system_prompt is not None else []
        self._head = [*system, *self.prefix_messages]
        # The Rust tokenizer directly, when the transformers wrapper would add nothing but overhead.
        backend = getattr(tokenizer, "_tokenizer", None)
        plain = backend is not None and not getattr(tokenizer, "split_special_tokens", False)
        self._backend = backend if plain and hasattr(backend, "encode_batch") else None
        self._continuation_parts: tuple[str, str] | None = None
        probe = [
            *self._head,
            {"role": "user", "content": _USER_PROBE},
            {"role": "assistant", "content": _ASSISTANT_PROBE},
        ]
        self.closing_text = _after_probe(self.render(probe, add_generation_prompt=False))
        self.closing_ids = self.encode(self.closing_text)
        if self.continuation("x")[: len(self.closing_ids)] != self.closing_ids:
            raise ValueError("this chat template ends an assistant turn differently when a user turn follows")
        self._continuation_parts = self._split_continuation()
        special = set(getattr(tokenizer, "all_special_ids", [])) | set(tokenizer.get_added_vocab().values())
        stops = [self.closing_ids[0]] if self.closing_ids and self.closing_ids[0] in special else []
        eos = getattr(tokenizer, "eos_token_id", None)
        if eos is not None and eos not in stops:
            stops.append(int(eos))
        self.stop_token_ids: tuple[int, ...] = tuple(stops)

    # ---- template access --------------------------------------------------------------------------
    def render(self, messages: list[dict[str, Any]], add_generation_prompt: bool) -> str:
        """The template's text for ``messages`` (what a full re-render gives)."""
        templater = self.processor if getattr(self.processor, "chat_template", None) else self.tokenizer
        return templater.apply_chat_template(
            messages,
            tokenize=False,
            add_generation_prompt=add_generation_prompt,
            chat_template=self.chat_template,
            **self.template_kwargs,
        )

    def encode(self, text: str, images: Sequence[bytes] = ()) -> list[int]:
        """``text``'s ids; with ``images`` (PNG bytes), the processor expands the text's image
        placeholders into the image tokens the model expects."""
        if images:
            from PIL import Image

            pictures = [Image.open(io.BytesIO(im)).convert("RGB") for im in images]
            encoded = self.processor(text=[text], images=pictures, add_special_tokens=False)
            return [int(i) for i in encoded["input_ids"][0]]
        if self._backend is not None:
            return self._backend.encode(text, add_special_tokens=False).ids
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        if self._backend is not None:
            return self._backend.decode(list(ids), skip_special_tokens=False)
        return self.tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    # ---- the incremental pieces -------------------------------------------------------------------
    def first_prompt(self, observation: str | MultimodalObservation) -> list[int]:
        """Ids of the system prompt (if any), the prefix messages, the first user turn and the
        generation prompt."""
        return self.encode(self.first_prompt_text(observation), _images(observation))

    def continuation(self, observation: str | MultimodalObservation) -> list[int]:
        """Ids after an assistant turn's content up to the next generation: the end of the assistant
        turn, the user turn holding ``observation`` and the generation prompt. Constant-size probe."""
        return self.encode(self.continuation_text(observation), _images(observation))

    def first_prompt_text(self, observation: str | MultimodalObservation) -> str:
        return self.render(
            [*self._head, {"role": "user", "content": self._content(observation)}], add_generation_prompt=True
        )

    def continuation_text(self, observation: str | MultimodalObservation) -> str:
        if self._continuation_parts is not None and isinstance(observation, str):
            before, after = self._continuation_parts
            return before + observation + after
        return self._render_continuation(observation)

    def _content(self, observation: str | MultimodalObservation) -> Any:
        if isinstance(observation, MultimodalObservation) and self.processor is None:
            raise text_only_error("a ChatRenderer built from a text tokenizer")
        return _chat_content(observation)

    def _render_continuation(self, observation: str | MultimodalObservation) -> str:
        messages = [
            *self._head,
            {"role": "user", "content": _USER_PROBE},
            {"role": "assistant", "content": _ASSISTANT_PROBE},
            {"role": "user", "content": self._content(observation)},
        ]
        return _after_probe(self.render(messages, add_generation_prompt=True))

    def _split_continuation(self) -> tuple[str, str] | None:
        """The continuation as fixed text around the observation, if the template inserts user content
        verbatim (checked on awkward samples); then a turn costs no template render at all."""
        marker = "GEMPROBEOBSERVATIONk4"
        text = self._render_continuation(marker)
        if text.count(marker) != 1:
            return None
        before, after = text.split(marker)
        samples = [
            "",
            " x ",
            "\n\nlines\n",
            "{{ '}}' }}{% raw %}",
            "<think>a</think>",
            "<tool_response>r</tool_response>",
        ]
        if any(self._render_continuation(s) != before + s + after for s in samples):
            return None
        return before, after

    def generated_closing(self, action_ids: Sequence[int]) -> int:
        """How many of the template's end-of-turn ids the action already ends with (usually 1 or 0)."""
        for k in range(min(len(self.closing_ids), len(action_ids)), 0, -1):
            if list(action_ids[-k:]) == self.closing_ids[:k]:
                return k
        return 0

    def start(
        self, observation: str | MultimodalObservation, *, env_id: str | None = None, seed: int | None = None
    ) -> EpisodeBuilder:
        """Begin an episode at its first observation."""
        return EpisodeBuilder(self, observation, env_id=env_id, seed=seed)


class EpisodeBuilder:
    """Accumulates one episode as it is played; ``context()`` is what the policy continues from.

    Call order: ``context()`` -> ``add_action(...)`` -> ``add_feedback(...)`` -> ``context()`` -> ... ->
    ``finish()``. Appending is amortised constant time per token.
    """

    def __init__(
        self,
        renderer: ChatRenderer,
        observation: str | MultimodalObservation,
        *,
        env_id: str | None = None,
        seed: int | None = None,
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

    def context(self) -> PromptIds:
        """Every id so far plus the prompt for the current observation (rendered once, on first call),
        with the images of those ids in ``.images``. The list is the builder's own: read it, do not
        modify it."""
        if self.done or self._observation is None:
            raise RuntimeError("the episode has no observation awaiting an action")
        if self._prompt_ids is None:
            images = _images(self._observation)
            if self.episode.turns:
                text = self.renderer.continuation_text(self._observation)
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
            )
        )
        self.ids.extend(action_ids)
        self._texts.append(text)
        self._observation = self._prompt_ids = None
        return text

    def add_feedback(
        self,
        observation: str | MultimodalObservation,
        reward: float,
        terminated: bool,
        truncated: bool,
        info: dict[str, Any] | None = None,
    ) -> None:
        """Record the env's answer to the last action."""
        if not self.episode.turns or self._observation is not None:
            raise RuntimeError("add_feedback follows add_action")
        turn = self.episode.turns[-1]
        turn.reward, turn.terminated, turn.truncated = float(reward), bool(terminated), bool(truncated)
        turn.info = dict(info or {})
        self._observation = observation
        self.done = bool(terminated or truncated)

    def finish(self, reason: str | None = None) -> Episode:
        """Close the last turn and return the episode. ``reason`` (e.g. ``"max_turns"``) marks an
        episode the driver stopped: its last turn is flagged truncated."""
        if self._prompt_ids is not None:  # a prompt was rendered but never answered
            del self.ids[len(self.ids) - len(self._prompt_ids) :]
            self.ids.images = self.ids.images[: len(self.ids.images) - len(_images(self._observation))]
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


def _message(message: dict[str, str]) -> dict[str, str]:
    """A copy of a chat message, checked: ``role`` and ``content`` are strings."""
    if not isinstance(message, dict) or not all(
        isinstance(message.get(key), str) for key in ("role", "content")
    ):
        raise ValueError(f"a prefix message is a dict with string 'role' and 'content', got {message!r}")
    return dict(message)


class PromptIds(list):
    """Token ids to generate from (a plain ``list`` of ints), with ``images``: the PNG bytes of the
    images whose tokens the ids hold, in order (empty for text)."""

    images: tuple[bytes, ...] = ()


def as_observation(obs: Any) -> str | MultimodalObservation:
    """An env's observation as the renderer takes it: text, or text with images."""
    return obs if isinstance(obs, MultimodalObservation) else str(obs)


def _images(observation: Any) -> tuple[bytes, ...]:
    return observation.images if isinstance(observation, MultimodalObservation) else ()


def _chat_content(observation: Any) -> Any:
    """A message's content: the text, or for an image observation the content list with placeholders."""
    if isinstance(observation, MultimodalObservation):
        return observation.to_chat_content(with_images=False)
    return observation


def _observation_to_json(observation: Any) -> Any:
    return observation.to_json_dict() if isinstance(observation, MultimodalObservation) else observation


def _observation_from_json(data: Any) -> Any:
    if isinstance(data, dict) and "images_png_base64" in data:
        return MultimodalObservation.from_json_dict(data)
    return data


def _after_probe(text: str) -> str:
    at = text.find(_ASSISTANT_PROBE)
    if at < 0:
        raise ValueError("the chat template does not render assistant content verbatim")
    return text[at + len(_ASSISTANT_PROBE) :]


# ---- record / replay ----------------------------------------------------------------------------
def write_jsonl(path: str | Path, episodes: Iterable[Episode], append: bool = False) -> int:
    """Write one episode per line; returns how many. Info values JSON cannot hold are stored as strings."""
    count = 0
    with open(path, "a" if append else "w", encoding="utf-8") as f:
        for episode in episodes:
            f.write(json.dumps(episode.to_dict(), default=_jsonable, ensure_ascii=False) + "\n")
            count += 1
    return count


def iter_jsonl(path: str | Path) -> Iterator[Episode]:
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield Episode.from_dict(json.loads(line))


def read_jsonl(path: str | Path) -> list[Episode]:
    return list(iter_jsonl(path))


def rescore(
    episodes: Iterable[Episode], reward_fn: Callable[[Episode], float | Sequence[float]]
) -> list[Episode]:
    """Copies of ``episodes`` with new rewards: ``reward_fn(episode)`` returns one reward per turn, or
    a single number that goes on the last turn (the others get 0). The old rewards are kept in each
    turn's ``info["previous_reward"]``."""
    out = []
    for episode in episodes:
        new = copy.deepcopy(episode)
        rewards = reward_fn(episode)
        if isinstance(rewards, numbers.Real):
            rewards = [0.0] * (len(new.turns) - 1) + [float(rewards)] if new.turns else []
        rewards = [float(r) for r in rewards]
        if len(rewards) != len(new.turns):
            raise ValueError(f"reward_fn gave {len(rewards)} rewards for {len(new.turns)} turns")
        for turn, reward in zip(new.turns, rewards):
            if not math.isfinite(reward):
                raise ValueError(f"reward_fn gave a non-finite reward {reward}")
            turn.info["previous_reward"] = turn.reward
            turn.reward = reward
        out.append(new)
    return out


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist"):  # numpy arrays and scalars, torch tensors
        return value.tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return str(value)
