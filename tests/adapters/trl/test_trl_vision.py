"""GEMGRPOTrainer trains a vision-language model on image observations with nothing but a processor:
a tiny LLaVA built offline, ``math:GeometryFigures-v0-easy``, a real GRPO step on the CPU.

A random model answers no geometry question, so every reward is 0 and so is every advantage: the
step changes no weight. The test shows instead that the step's forward passes got the rollout's
images (the vision tower ran on them, TRL's recomputed logprobs equal the rollout's) and that its
loss sends gradient into the vision tower once advantages are nonzero.
"""

from __future__ import annotations

import math
import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("PIL.Image")

import gem_core  # noqa: E402
from gem_adapters.policies.multimodal import (  # noqa: E402
    first_observation_images,
    images_only_in_first_prompt,
    tiny_llava,
    vision_inputs,
)
from gem_adapters.trl import (  # noqa: E402
    GEMGRPOConfig,
    GEMGRPOTrainer,
    parse_task_prompt,
    task_prompt,
    tasks_dataset,
)
from tests.adapters.policies.test_multimodal import FigureTwice  # noqa: E402

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
ENV = "math:GeometryFigures-v0-easy"
TWO_FIGURES = "test:FigureTwice-v0"
GAME = "game:GuessTheNumber-v1-easy"
IMAGE_TOKENS = 16  # (32 // 8) ** 2 patches of the tiny CLIP tower


class ProbeTrainer(GEMGRPOTrainer):
    """Records TRL's scored batch, the inputs of its loss, and every call of the vision tower."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.scored, self.loss_inputs, self.vision_calls = [], [], []

        def record(module, args, kwargs, output):
            pixels = args[0] if args else kwargs["pixel_values"]
            self.vision_calls.append((torch.is_grad_enabled(), pixels.detach().clone()))

        self.model.model.vision_tower.register_forward_hook(record, with_kwargs=True)

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)  # adds each row's episode to inputs
        self.scored.append(([dict(row) for row in inputs], output))
        return output

    def _compute_loss(self, model, inputs):
        self.loss_inputs.append(inputs)
        return super()._compute_loss(model, inputs)


def make_trainer(tokenizer, tmp_path, env_id=ENV, images=None):
    model, processor = tiny_llava(tokenizer, seed=0)
    config = GEMGRPOConfig(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        num_generations=2,
        max_steps=1,
        num_iterations=2,  # makes TRL recompute the sampling logprobs with its own forward pass
        max_turn_tokens=6,
        report_to=[],
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
    )
    dataset = tasks_dataset(env_id, 4, first_seed=5, images=images)
    return ProbeTrainer(model=model, args=config, train_dataset=dataset, processing_class=processor)


def test_image_tasks_carry_their_first_observation_images():
    rows = tasks_dataset(ENV, 2, first_seed=5)  # images detected from the env's first observation
    assert rows["prompt"] == [[{"role": "user", "content": task_prompt(ENV, s)}] for s in (5, 6)]
    for images, seed in zip(rows["images"], (5, 6)):
        (expected,) = first_observation_images(ENV, seed)
        assert len(images) == 1 and images[0].convert("RGB").tobytes() == expected.tobytes()
    # What TRL hands the rollout_func: the images moved into the user message's content.
    content = [
        {"type": "image", "image": rows["images"][0][0]},
        {"type": "text", "text": task_prompt(ENV, 5)},
    ]
    multimodal = [{"role": "user", "content": content}]
    assert parse_task_prompt(rows["prompt"][0]) == parse_task_prompt(multimodal) == (ENV, 5)
    text = tasks_dataset(GAME, 2)
    assert "images" not in text.column_names and text["prompt"][0] == task_prompt(GAME, 0)
    assert "images" not in tasks_dataset(ENV, 2, images=False).column_names


@pytest.fixture(scope="module")
def vision_run(tokenizer, tmp_path_factory):
    trainer = make_trainer(tokenizer, tmp_path_factory.mktemp("vision"))
    result = trainer.train()
    return trainer, result


def test_grpo_step_forward_passes_see_the_rollout_images(vision_run):
    trainer, result = vision_run
    processor = trainer.processing_class
    image_id = processor.tokenizer.convert_tokens_to_ids("<image>")
    (rows, batch) = trainer.scored[0]
    episodes = [row["episode"] for row in rows]
    # The episodes were played on the figures, one per task, as the dataset row holds it.
    for row, episode in zip(rows, episodes):
        env_id, seed = parse_task_prompt(row["prompt"])
        obs, _ = gem_core.make(env_id).reset(seed=seed)
        assert (
            episode.seed == seed
            and episode.images() == list(obs.images)
            and images_only_in_first_prompt(episode)
        )
    assert episodes[0].images() != episodes[2].images()  # two tasks, two figures
    assert (batch["prompt_ids"] == image_id).sum(dim=1).tolist() == [IMAGE_TOKENS] * 4
    # TRL's image tensors (from the dataset rows) are the episodes' own...
    own = vision_inputs(processor, [e.images() for e in episodes])["pixel_values"]
    assert batch["num_images"] == [1] * 4 and torch.equal(batch["pixel_values"], own)
    # ...so its recomputed logprobs equal the rollout's on every generated token.
    mask = batch["completion_mask"] * batch["tool_mask"]
    gap = ((batch["old_per_token_logps"] - batch["sampling_per_token_logps"]).abs() * mask).max()
    assert mask.sum() > 0 and float(gap) < 1e-4
    # The loss's forward pass (the one call with gradients) ran the vision tower on the batch's images.
    (inputs,) = trainer.loss_inputs
    with_grad = [pixels for grad, pixels in trainer.vision_calls if grad]
    assert len(with_grad) == 1 and torch.equal(with_grad[0], inputs["pixel_values"])
    assert math.isfinite(result.training_loss)
    # With nonzero advantages, that loss trains the vision tower and the projector.
    assert torch.all(inputs["advantages"] == 0)  # no reward yet: the step itself moved nothing
    model = trainer.model
    model.zero_grad()
    trainer._compute_loss(model, {**inputs, "advantages": torch.ones_like(inputs["advantages"])}).backward()
    for part in (model.model.vision_tower, model.model.multi_modal_projector):
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in part.parameters())


@pytest.mark.parametrize(
    ("env_id", "images", "error"),
    [
        (TWO_FIGURES, None, "shows images after its first observation"),
        (ENV, False, r"carries 0: build the dataset with tasks_dataset\(..., images=True\)"),
    ],
)
def test_episodes_whose_images_trl_cannot_see_are_refused(tokenizer, tmp_path, env_id, images, error):
    gem_core.register(TWO_FIGURES, FigureTwice, description="test env: a figure in each of two turns")
    try:
        trainer = make_trainer(tokenizer, tmp_path, env_id=env_id, images=images)
        with pytest.raises(ValueError, match=error):
            trainer.train()
    finally:
        gem_core.unregister(TWO_FIGURES)
