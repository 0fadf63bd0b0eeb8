"""Vision-language episodes: image observations from the env to the policy and on to a trainer.

The path of an image (``gem_core.observation.MultimodalObservation``, e.g. ``math:GeometryFigures-v0``):

1. ``ChatRenderer(processor)`` (``gem_adapters.episodes.chat_renderer``) renders the observation with the
   processor's chat template and expands its image placeholder into the model's image tokens, so the
   episode's ids are exactly what the model and a trainer's processor see. ``builder.context()``
   returns those ids with the images attached (``PromptIds.images``).
2. ``VisionLanguagePolicy`` generates from such prompts with a Hugging Face vision-language model:
   the image tensors come from the processor (``vision_inputs``), the logprobs are the raw ones, as in
   ``TransformersPolicy``. ``rollout(env_ids, VisionLanguagePolicy(model, processor),
   ChatRenderer(processor))`` then plays image envs as it plays text envs.
3. A trainer scores ``prompt_ids + completion_ids`` with the same image tensors:
   ``vision_inputs(processor, [episode_images(e) for e in episodes])`` gives them for a batch.

Training a VLM with TRL (1.16) takes no code of its own: ``GEMGRPOTrainer(model, config,
tasks_dataset("math:GeometryFigures-v0-easy", n), processing_class=processor)``
(``gem_adapters.trl``). Its ``rollout_func`` plays the episodes with ``VisionLanguagePolicy``; TRL
builds the image tensors of its forward pass from the dataset rows (their ``images`` column), not
from the rollout, so ``tasks_dataset`` puts each task's ``first_observation_images(env_id, seed)``
there (with the conversational ``prompt`` TRL requires with images). That covers every env whose
images are all in its first observation (all single-turn image envs):
``images_only_in_first_prompt(episode)`` checks it, and the ``rollout_func`` refuses an episode that
shows images in later turns, which cannot reach TRL's forward pass.

``tiny_llava(tokenizer)`` builds a randomly initialised ~3M-parameter LLaVA (CLIP vision tower +
Llama) and its processor offline, for tests.
"""

from __future__ import annotations

import copy
import io
import secrets
from collections.abc import Sequence
from typing import Any

from gem_adapters.episodes.episode import Episode, observation_images
from gem_adapters.policies.base import Generation, Policy, SamplingParams
from gem_adapters.policies.transformers_policy import sample
from gem_adapters.runtime.models import tiny_llama_config

# ChatML (SmolLM2's turn format) that also renders content lists, an image entry as <image>.
IMAGE_CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}{{ '<image>' }}"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{{ '<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def decode_images(images: Sequence[Any]) -> list[Any]:
    """PNG bytes (or PIL images) as RGB PIL images."""
    from PIL import Image

    return [
        im.convert("RGB") if isinstance(im, Image.Image) else Image.open(io.BytesIO(im)).convert("RGB")
        for im in images
    ]


def episode_images(episode: Episode) -> list[Any]:
    """The images of an episode's token sequence, in order, as PIL images."""
    return decode_images(episode.images())


def images_only_in_first_prompt(episode: Episode) -> bool:
    """True when every image of the episode is in its first observation (what TRL's ``rollout_func``
    path can train on)."""
    return len(episode.images()) == len(
        observation_images(episode.turns[0].observation) if episode.turns else ()
    )


def first_observation_images(env_id: str, seed: int, **env_kwargs: Any) -> list[Any]:
    """The images of the first observation of ``env_id`` reset with ``seed`` (PIL; empty for text)."""
    import gem_core

    with gem_core.make(env_id, **env_kwargs) as env:
        obs, _ = env.reset(seed=seed)
    return decode_images(observation_images(obs))


def vision_inputs(
    processor: Any, images: Sequence[Sequence[Any]], return_tensors: str = "pt"
) -> dict[str, Any]:
    """The image tensors a vision-language model needs for a batch (``images[i]``: sample i's images,
    PNG bytes or PIL, in sequence order), as the processor computes them for the same images in a
    prompt: e.g. ``pixel_values`` (+ ``image_sizes``, ``pixel_attention_mask`` or
    ``image_grid_thw``, by model). Token-level fields are left out: the ids come from the episode."""
    flat = [decode_images(per_sample) for per_sample in images]
    if not any(flat):
        return {}
    placeholder = processor.image_token
    texts = [placeholder * len(per_sample) for per_sample in flat]
    encoded = processor(
        text=texts, images=[im for per_sample in flat for im in per_sample], return_tensors=return_tensors
    )
    token_level = {"input_ids", "attention_mask", "token_type_ids", "mm_token_type_ids"}
    return {k: v for k, v in encoded.items() if k not in token_level}


def media_token_ids(model: Any, processor: Any) -> list[int]:
    """The ids of the model's image and video placeholder tokens (its config's, else its processor's)."""
    ids = set()
    for name in ("image_token_id", "image_token_index", "video_token_id", "video_token_index"):
        value = getattr(model.config, name, None)
        if isinstance(value, int) and value >= 0:
            ids.add(value)
    for name in ("image_token", "video_token"):
        token = getattr(processor, name, None)
        if token:
            token_id = processor.tokenizer.convert_tokens_to_ids(token)
            if isinstance(token_id, int) and token_id != processor.tokenizer.unk_token_id:
                ids.add(token_id)
    return sorted(ids)


class VisionLanguagePolicy(Policy):
    """Sampling from a Hugging Face vision-language model; a prompt's images are its ``.images``
    (``PromptIds`` from ``ChatRenderer(processor)``; a plain id list is a text-only prompt).

    One prompt at a time with a key/value cache (a reference backend for tests and small runs; serve
    large VLMs with vLLM). Sampling and logprobs as in ``TransformersPolicy``: raw logprobs, the
    policy's own ``torch.Generator``, stop ids default to the tokenizer's EOS.
    """

    def __init__(self, model: Any, processor: Any, *, seed: int | None = None):
        import torch

        self.model, self.processor = model, processor
        self.device = next(model.parameters()).device
        self.generator = torch.Generator(self.device).manual_seed(
            secrets.randbits(63) if seed is None else seed
        )
        eos = processor.tokenizer.eos_token_id
        self.default_stop_ids = () if eos is None else (int(eos),)
        self.media_token_ids = media_token_ids(model, processor)

    def generate(self, prompts: Sequence[Sequence[int]], params: SamplingParams) -> list[Generation]:
        import torch

        generator = self.generator
        if params.seed is not None:
            generator = torch.Generator(self.device).manual_seed(params.seed)
        was_training = self.model.training
        self.model.eval()
        try:
            return [self._generate_one(prompt, params, generator) for prompt in prompts]
        finally:
            self.model.train(was_training)

    def _generate_one(self, prompt: Sequence[int], params: SamplingParams, generator: Any) -> Generation:
        import torch

        if len(prompt) == 0:
            raise ValueError("every prompt needs at least one token")
        stop_ids = set(params.stop_token_ids if params.stop_token_ids is not None else self.default_stop_ids)
        inputs = {
            k: v.to(self.device)
            for k, v in vision_inputs(self.processor, [getattr(prompt, "images", ())]).items()
        }
        step_ids = torch.tensor([list(prompt)], dtype=torch.long, device=self.device)
        length = step_ids.shape[1]
        tokens: list[int] = []
        logprobs: list[float] = []
        past = None
        with torch.no_grad():
            for _ in range(params.max_new_tokens):
                mask = torch.ones((1, length), dtype=torch.long, device=self.device)
                out = self.model(
                    input_ids=step_ids, attention_mask=mask, past_key_values=past, use_cache=True, **inputs
                )
                inputs = {}  # the image features are in the cache after the first step
                past = out.past_key_values
                logits = out.logits[:, -1, :].float()
                # A media placeholder is never an action: one in a completion (a random policy samples
                # it) would stand for an image the batch does not hold, and the learner's forward fails.
                logits[:, self.media_token_ids] = float("-inf")
                next_id = sample(logits, params, generator)
                tokens.append(int(next_id[0]))
                logprobs.append(float(torch.log_softmax(logits, dim=-1)[0, next_id[0]]))
                if tokens[-1] in stop_ids:
                    return Generation(tokens, logprobs, "stop")
                step_ids = next_id[:, None]
                length += 1
        return Generation(tokens, logprobs, "length")


def tiny_llava(tokenizer: Any, seed: int = 0, image_size: int = 32, patch_size: int = 8) -> tuple[Any, Any]:
    """A randomly initialised small LLaVA over ``tokenizer``'s vocabulary plus an ``<image>`` token,
    and its processor (CLIP image preprocessing, ``IMAGE_CHAT_TEMPLATE``); offline, for fast tests.
    An image becomes ``(image_size // patch_size) ** 2`` image tokens. ``tokenizer`` is not modified."""
    import torch
    from transformers import (
        CLIPVisionConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    try:
        from transformers import CLIPImageProcessorPil as ImageProcessor  # no torchvision needed
    except ImportError:
        from transformers import CLIPImageProcessor as ImageProcessor

    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<image>"]})
    image_processor = ImageProcessor(
        size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}
    )
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=patch_size,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=IMAGE_CHAT_TEMPLATE,
    )
    vision = CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=image_size,
        patch_size=patch_size,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=tiny_llama_config(tokenizer),
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlavaForConditionalGeneration(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model, processor
