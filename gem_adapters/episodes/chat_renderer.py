"""ChatRenderer: chat-template rendering of an episode, incremental and token-exact.

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

Tool results: an env marks an observation as a tool's result with ``info["use_tool"] = True`` on the
step that produced it (``gem_core.wrappers.ToolEnvWrapper`` does). Such an observation goes back
through the template's own tool role (``{"role": "tool", "content": ...}``: Qwen's
``<tool_response>`` inside a user turn, Llama 3's ``ipython`` header, Mistral's ``[TOOL_RESULTS]``),
with the same incremental, token-exact rendering as a user turn; ``Turn.observation_role`` records
the role. ``tool_role`` is ``"tool"`` when the template renders a tool message after an assistant
turn from its content alone and ends that turn as it does before a user turn; otherwise (a template
without a tool role, or one that demands more, e.g. a call id) it is ``"user"`` and tool results are
user turns, as every other observation. The calls themselves stay in the assistant's generated text,
in the model's own format (``gem_core.tools.call_formats``).

Templates that rewrite history: some templates render an earlier assistant turn differently from the
way it was generated (Qwen3 drops the ``<think>`` block of every assistant turn before the last user
message, and reformats the last one; Llama 3 trims every assistant turn). The sequence here always
keeps the tokens as generated, which is what the model actually conditioned on during the rollout:
that is what the trainer receives, token for token, with loss on the generated ids only, and never
the template's re-rendering (re-rendered history would be text the model never saw while acting).
``rewrites_history`` says up front whether the template does this (a probe conversation with a
``<think>`` block, padded content and a later user turn, rendered once); when an episode finishes,
the template's own rendering of the whole conversation is compared with the text the renderer
produced piece by piece (one render and one string comparison, linear cost); if they differ,
``Episode.template_rewrites_history`` is True. No data is dropped and no mask is changed.

Token exactness: the sequence is the template's own tokenisation of the conversation whenever (a) the
template does not rewrite history and (b) the generated ids are the tokenizer's canonical encoding of
their text. (b) is about the model, not the renderer: a model may sample a non-canonical split
(``"hel" + "lo"``) or a token that would merge with the preceding ``\\n`` when re-encoded; the tokens
it sampled are kept.

Images: rendering a ``MultimodalObservation`` needs a multimodal processor
(``ChatRenderer(AutoProcessor.from_pretrained(...))``): the template places its image placeholder and
the processor expands it into the image tokens the model expects, so the ids are exactly what the
model and a trainer's processor see.

``shared_renderer`` keeps one renderer per (tokenizer, system prompt, template kwargs) in a process:
the per-worker cache of the trainers' agent loops, which build an episode at a time.
"""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from typing import Any

from gem_adapters.episodes.episode import chat_content, observation_images
from gem_core.observation import MultimodalObservation, text_only_error

_USER_PROBE = "GEMPROBEUSERq7"
_ASSISTANT_PROBE = "GEMPROBEASSISTANTz9"
_TOOL_PROBE = "GEMPROBETOOLr3"
# An assistant turn as a reasoning model writes it, padded: a template that drops or moves the think
# block, or trims the content, renders it differently once a user turn follows.
_REWRITE_PROBE = " <think>\nGEMPROBETHINKw2\n</think>\n\nGEMPROBEANSWERv5 "


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
        self._continuation_parts: dict[str, tuple[str, str] | None] = {}
        self._tool_role: str | None = None
        self._rewrites_history: bool | None = None
        probe = [
            *self._head,
            {"role": "user", "content": _USER_PROBE},
            {"role": "assistant", "content": _ASSISTANT_PROBE},
        ]
        self.closing_text = _after_probe(self.render(probe, add_generation_prompt=False))
        self.closing_ids = self.encode(self.closing_text)
        if self.continuation("x")[: len(self.closing_ids)] != self.closing_ids:
            raise ValueError("this chat template ends an assistant turn differently when a user turn follows")
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
        return self.encode(self.first_prompt_text(observation), observation_images(observation))

    def continuation(self, observation: str | MultimodalObservation, role: str = "user") -> list[int]:
        """Ids after an assistant turn's content up to the next generation: the end of the assistant
        turn, the ``role`` turn (``user`` or ``tool``) holding ``observation`` and the generation
        prompt. Constant-size probe."""
        return self.encode(self.continuation_text(observation, role), observation_images(observation))

    def first_prompt_text(self, observation: str | MultimodalObservation) -> str:
        return self.render(
            [*self._head, {"role": "user", "content": self._content(observation)}], add_generation_prompt=True
        )

    def continuation_text(self, observation: str | MultimodalObservation, role: str = "user") -> str:
        if role not in self._continuation_parts:
            self._continuation_parts[role] = self._split_continuation(role)
        parts = self._continuation_parts[role]
        if parts is not None and isinstance(observation, str):
            before, after = parts
            return before + observation + after
        return self._render_continuation(observation, role)

    @property
    def tool_role(self) -> str:
        """The role a tool's result is rendered with: ``"tool"`` when the template has a tool role that
        renders from the content alone after an assistant turn, else ``"user"`` (module docstring)."""
        if self._tool_role is None:
            self._tool_role = "tool" if self._renders_tool_results() else "user"
        return self._tool_role

    def observation_role(self, info: dict[str, Any] | None) -> str:
        """The role of the observation an env answered with ``info``: ``tool_role`` for a tool's result
        (``info["use_tool"]``), else ``"user"``."""
        return self.tool_role if isinstance(info, dict) and info.get("use_tool") else "user"

    @property
    def rewrites_history(self) -> bool:
        """Whether the template renders an earlier assistant turn otherwise than as it was written
        (dropping or moving a ``<think>`` block, trimming): probed once, on first use."""
        if self._rewrites_history is None:
            messages = [
                *self._head,
                {"role": "user", "content": _USER_PROBE},
                {"role": "assistant", "content": _REWRITE_PROBE},
                {"role": "user", "content": _USER_PROBE},
            ]
            self._rewrites_history = _REWRITE_PROBE not in self.render(messages, add_generation_prompt=True)
        return self._rewrites_history

    def _renders_tool_results(self) -> bool:
        try:
            text = self._render_continuation(_TOOL_PROBE, "tool")
        except Exception:  # the template refuses a tool message (no tool role, or it wants more fields)
            return False
        return _TOOL_PROBE in text and text.startswith(self.closing_text)

    def _content(self, observation: str | MultimodalObservation) -> Any:
        if isinstance(observation, MultimodalObservation) and self.processor is None:
            raise text_only_error("a ChatRenderer built from a text tokenizer")
        return chat_content(observation)

    def _render_continuation(self, observation: str | MultimodalObservation, role: str = "user") -> str:
        messages = [
            *self._head,
            {"role": "user", "content": _USER_PROBE},
            {"role": "assistant", "content": _ASSISTANT_PROBE},
            {"role": role, "content": self._content(observation)},
        ]
        return _after_probe(self.render(messages, add_generation_prompt=True))

    def _split_continuation(self, role: str) -> tuple[str, str] | None:
        """The continuation as fixed text around the observation, if the template inserts ``role``
        content verbatim (checked on awkward samples); then a turn costs no template render at all."""
        marker = "GEMPROBEOBSERVATIONk4"
        try:
            text = self._render_continuation(marker, role)
        except Exception:  # a role the template refuses: rendered turn by turn (and refused there)
            return None
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
        if any(self._render_continuation(s, role) != before + s + after for s in samples):
            return None
        return before, after

    def generated_closing(self, action_ids: Sequence[int]) -> int:
        """How many of the template's end-of-turn ids the action already ends with (usually 1 or 0)."""
        for k in range(min(len(self.closing_ids), len(action_ids)), 0, -1):
            if list(action_ids[-k:]) == self.closing_ids[:k]:
                return k
        return 0


def _message(message: dict[str, str]) -> dict[str, str]:
    """A copy of a chat message, checked: ``role`` and ``content`` are strings."""
    if not isinstance(message, dict) or not all(
        isinstance(message.get(key), str) for key in ("role", "content")
    ):
        raise ValueError(f"a prefix message is a dict with string 'role' and 'content', got {message!r}")
    return dict(message)


def _after_probe(text: str) -> str:
    at = text.find(_ASSISTANT_PROBE)
    if at < 0:
        raise ValueError("the chat template does not render assistant content verbatim")
    return text[at + len(_ASSISTANT_PROBE) :]


def shared_renderer(
    tokenizer: Any, system_prompt: str | None = None, template_kwargs: dict[str, Any] | None = None
) -> ChatRenderer:
    """One renderer per (tokenizer, system prompt, template kwargs) in this process, built on first
    use. The key is the tokenizer's content, not its identity: some trainers send a fresh copy of
    the tokenizer with every request (OpenRLHF)."""
    template_kwargs = dict(template_kwargs or {})
    key = (
        type(tokenizer).__name__,
        str(getattr(tokenizer, "name_or_path", "")),
        len(tokenizer),
        str(getattr(tokenizer, "chat_template", None)),
        system_prompt,
        json.dumps(template_kwargs, sort_keys=True, default=str),
    )
    renderer = _RENDERERS.get(key)
    if renderer is None:
        renderer = _RENDERERS[key] = ChatRenderer(tokenizer, system_prompt, template_kwargs=template_kwargs)
    return renderer


_RENDERERS: dict[tuple, ChatRenderer] = {}  # a renderer keeps its tokenizer alive
