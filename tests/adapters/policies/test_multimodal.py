"""Vision-language episodes with a tiny LLaVA built offline: image tokens in the rendered ids, a rollout
whose logprobs a forward pass with the images reproduces, multi-turn images, JSONL. (Training through
TRL: ``tests/adapters/trl/test_trl_vision.py``.)"""

from __future__ import annotations

import asyncio
import math

import pytest

import gem_core
from gem_core.core import Env
from gem_core.observation import MultimodalObservation
from gem_core.wrappers import ChatMessages

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
Image = pytest.importorskip("PIL.Image")

from gem_adapters.episodes.chat_renderer import ChatRenderer  # noqa: E402
from gem_adapters.episodes.episode_builder import EpisodeBuilder  # noqa: E402
from gem_adapters.episodes.jsonl import read_jsonl, write_jsonl  # noqa: E402
from gem_adapters.policies.multimodal import (  # noqa: E402
    VisionLanguagePolicy,
    images_only_in_first_prompt,
    tiny_llava,
    vision_inputs,
)
from gem_adapters.runtime.rollout import arollout, rollout  # noqa: E402

ENV = "math:GeometryFigures-v0-easy"
SYSTEM = "Solve the problem."
IMAGE_TOKENS = 16  # (32 // 8) ** 2 patches of the tiny CLIP tower


def sequence_logprobs(model, processor, episodes):
    """Each episode's logprobs of its generated ids, recomputed by one forward pass over its whole
    sequence with its images (what a trainer does); aligned with the action ids, turn by turn."""
    out = []
    for episode in episodes:
        sequence = episode.to_sequence(include_closing=False)
        ids = torch.tensor([sequence.token_ids], dtype=torch.long, device=next(model.parameters()).device)
        inputs = {k: v.to(ids.device) for k, v in vision_inputs(processor, [episode.images()]).items()}
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=torch.ones_like(ids), **inputs).logits.float()
        logp = torch.log_softmax(logits[0, :-1], dim=-1).gather(1, ids[0, 1:, None])[:, 0]
        out.append([float(logp[i - 1]) for start, end in sequence.turn_spans for i in range(start, end)])
    return out


@pytest.fixture(scope="module")
def llava(tokenizer):
    return tiny_llava(tokenizer, seed=0)


@pytest.fixture(scope="module")
def renderer(llava):
    return ChatRenderer(llava[1], SYSTEM)


def image_id(processor) -> int:
    return processor.tokenizer.convert_tokens_to_ids("<image>")


def test_first_prompt_is_what_the_processor_makes_of_the_chat_messages(llava, renderer):
    _, processor = llava
    messages, _ = ChatMessages(gem_core.make(ENV), system_prompt=SYSTEM).reset(seed=3)
    expected = processor.apply_chat_template(
        messages, tokenize=True, add_generation_prompt=True, return_dict=True
    )
    obs, _ = gem_core.make(ENV).reset(seed=3)
    ids = renderer.first_prompt(obs)
    assert ids == list(expected["input_ids"][0]) and ids.count(image_id(processor)) == IMAGE_TOKENS
    assert len(expected["pixel_values"]) == 1 and expected["pixel_values"][0].shape == (3, 32, 32)


def test_a_text_tokenizer_renderer_refuses_images(tokenizer):
    obs, _ = gem_core.make(ENV).reset(seed=0)
    builder = EpisodeBuilder(ChatRenderer(tokenizer), obs)
    with pytest.raises(TypeError, match="MultimodalObservation"):
        builder.context()


def test_rollout_carries_images_to_the_model(llava, renderer):
    model, processor = llava
    policy = VisionLanguagePolicy(model, processor, seed=0)
    episodes = rollout([ENV, ENV], policy, renderer, seeds=[3, 4], max_new_tokens=8)
    for episode, seed in zip(episodes, (3, 4)):
        obs, _ = gem_core.make(ENV).reset(seed=seed)
        assert episode.turns[0].observation == obs and episode.images() == list(obs.images)
        assert episode.to_sequence().token_ids.count(image_id(processor)) == IMAGE_TOKENS
        assert not episode.template_rewrites_history and images_only_in_first_prompt(episode)
    # A forward pass over each whole sequence with its image reproduces the sampled logprobs...
    recomputed = sequence_logprobs(model, processor, episodes)
    for episode, logprobs in zip(episodes, recomputed):
        assert logprobs == pytest.approx(episode.turns[0].logprobs, abs=1e-4)
    # ...and the image matters: without it, or with the other episode's, the logprobs change.
    ids = torch.tensor([episodes[0].to_sequence(include_closing=False).token_ids])
    start, end = episodes[0].to_sequence().turn_spans[0]

    def action_logprobs(**images) -> torch.Tensor:
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=torch.ones_like(ids), **images).logits
        logp = torch.log_softmax(logits[0, :-1].float(), dim=-1).gather(1, ids[0, 1:, None])[:, 0]
        return logp[start - 1 : end - 1]

    own = action_logprobs(**vision_inputs(processor, [episodes[0].images()]))
    assert own.tolist() == pytest.approx(recomputed[0], abs=1e-5)
    other = action_logprobs(**vision_inputs(processor, [episodes[1].images()]))
    assert (own - other).abs().max() > 1e-4 and (own - action_logprobs()).abs().max() > 1e-4


class FigureTwice(Env):
    """Two turns, each showing a figure (the second in the env's feedback), then a text verdict."""

    def reset(self, seed=None, **kwargs):
        super().reset(seed)
        self.turn, self.colors = 0, [self.rng.choice(["red", "green", "blue"]) for _ in range(2)]
        return self._figure("What colour is this square?", 0), {}

    def _figure(self, text, k):
        return MultimodalObservation.from_images(text, [Image.new("RGB", (20, 20), self.colors[k])])

    def step(self, action):
        self.turn += 1
        if self.turn == 1:
            return self._figure("And this one?", 1), 0.0, False, False, {}
        return "Done.", 0.0, True, False, {}

    def sample_random_action(self):
        return "red"


def test_images_in_later_turns_join_the_context(llava, renderer):
    from gem_core.vector.sync import SyncVectorEnv

    model, processor = llava
    vec = SyncVectorEnv([FigureTwice], autoreset_mode="disabled")
    (episode,) = rollout(
        vec, VisionLanguagePolicy(model, processor, seed=1), renderer, seeds=[7], max_new_tokens=4
    )
    assert episode.num_turns == 2 and len(episode.images()) == 2 and not images_only_in_first_prompt(episode)
    assert episode.images() == [*episode.turns[0].observation.images, *episode.turns[1].observation.images]
    sequence = episode.to_sequence()
    assert sequence.token_ids.count(image_id(processor)) == 2 * IMAGE_TOKENS
    assert all(
        sequence.loss_mask[i] == 0 for i, t in enumerate(sequence.token_ids) if t == image_id(processor)
    )
    assert not episode.template_rewrites_history
    (recomputed,) = sequence_logprobs(model, processor, [episode])
    assert recomputed == pytest.approx([lp for t in episode.turns for lp in t.logprobs], abs=1e-4)


def test_context_ids_carry_their_images(renderer):
    env = FigureTwice()
    obs, _ = env.reset(seed=2)
    builder = EpisodeBuilder(renderer, obs)
    assert builder.context().images == obs.images
    builder.add_action(renderer.encode("red") + [renderer.stop_token_ids[0]])
    feedback = env.step("red")
    builder.add_feedback(*feedback)
    assert builder.context().images == obs.images + feedback[0].images
    episode = builder.finish()  # the second figure was shown but never answered: it leaves the context
    assert episode.images() == list(obs.images) and builder.ids.images == obs.images


def test_jsonl_keeps_the_images(llava, renderer, tmp_path):
    model, processor = llava
    episodes = rollout(
        [ENV], VisionLanguagePolicy(model, processor, seed=2), renderer, seeds=[5], max_new_tokens=4
    )
    path = tmp_path / "episodes.jsonl"
    write_jsonl(path, episodes)
    (loaded,) = read_jsonl(path)
    assert isinstance(loaded.turns[0].observation, MultimodalObservation)
    assert loaded.turns[0].observation == episodes[0].turns[0].observation
    assert loaded.to_sequence() == episodes[0].to_sequence() and loaded.messages() == episodes[0].messages()


def test_arollout_plays_image_envs_like_rollout(llava, renderer):
    model, processor = llava
    (sync,) = rollout(
        [ENV], VisionLanguagePolicy(model, processor, seed=4), renderer, seeds=[9], max_new_tokens=5
    )
    (asynchronous,) = asyncio.run(
        arollout([ENV], VisionLanguagePolicy(model, processor, seed=4), renderer, seeds=[9], max_new_tokens=5)
    )
    assert asynchronous.to_sequence() == sync.to_sequence() and asynchronous.images() == sync.images()


def test_the_policy_never_samples_an_image_placeholder(renderer, tokenizer):
    """A policy that prefers the image token above all still writes none: one in a completion would stand
    for an image the batch does not hold, and the learner's forward over the episode would fail."""
    model, processor = tiny_llava(tokenizer, seed=0)
    placeholder = image_id(processor)
    hook = model.lm_head.register_forward_hook(
        lambda module, args, out: out.index_fill(-1, torch.tensor([placeholder]), 1e4)
    )
    try:
        episodes = rollout(
            [ENV, ENV],
            VisionLanguagePolicy(model, processor, seed=0),
            renderer,
            seeds=[3, 4],
            max_new_tokens=8,
        )
    finally:
        hook.remove()
    for episode in episodes:
        assert episode.to_sequence().token_ids.count(placeholder) == IMAGE_TOKENS  # the prompt's, no more
        assert placeholder not in episode.turns[0].action_ids
        assert all(math.isfinite(lp) for lp in episode.turns[0].logprobs)
