"""GEM episodes as TRL samples: the ``rollout_func`` that plays the dataset's tasks.

TRL's ``GRPOTrainer`` hands its ``rollout_func`` a list of prompts, already repeated
``num_generations`` times, and wants one sample per entry. Here a prompt is a whole *task*
(``Task.to_json()``, see ``gem_adapters.trl.rows``), and its sample is one whole episode of that
task: the env made with the task's ``env_kwargs`` and reset with its seed; the task's
``system_prompt``, ``template_kwargs`` and ``max_turns``, when set, replace the trainer's. The
``num_generations`` copies of a task share env id, seed and env kwargs, hence the same initial state:
they form one GRPO group (``Episode.group_id``: env id and seed, and the env kwargs when the task has
any).

One episode, one sample (``episode_to_sample``)::

    prompt_ids      = system prompt + first observation + generation prompt   (everything before action 1)
    completion_ids  = action 1 | env/template ids | action 2 | ... | last action
    env_mask        =    1 1 1 |   0 0 0 0 0 0    |  1 1 1   | ... | 1 1 1
    logprobs        = the policy's logprob of each action id, 0.0 on env/template ids

``env_mask`` becomes TRL's tool mask: env and template ids get no loss. ``turn_spans`` (each
action's ``(start, end)`` in ``completion_ids``) ride in the row to the trainer's scoring step, which
puts each turn's advantage on them: the sample is laid out once per episode, here. With
``mask_truncated_completions`` the trainer masks each action cut off by ``max_turn_tokens`` (not TRL's
whole completion when its last action was cut).

Generation: with ``use_vllm`` the trainer's vLLM backend (``VLLMPolicy``, colocate or server mode,
text only); otherwise the trainer's own (unwrapped) model: a ``TransformersPolicy``, all active
episodes batched per turn by the shared rollout driver, or, when ``processing_class`` is a
multimodal processor, a ``VisionLanguagePolicy`` (``gem_adapters.policies.multimodal``).

Vision-language models (e.g. ``math:GeometryFigures-v0``): TRL builds the image tensors of its
forward pass from the dataset row's ``images`` column, not from the rollout. ``tasks_dataset``
(``gem_adapters.trl.rows``) therefore puts each task's first-observation images there, with a conversational ``prompt`` as TRL
requires (automatic when the env's first observation has images), and the ``rollout_func`` checks
that every episode shows exactly its row's images: an env that shows images in later turns is
refused. Training a VLM takes no more than a processor::

    model, processor = ...  # e.g. LlavaForConditionalGeneration and its AutoProcessor
    trainer = GEMGRPOTrainer(
        model, GEMGRPOConfig(...), tasks_dataset("math:GeometryFigures-v0-easy", 1000),
        processing_class=processor,
    )
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gem_adapters.episodes.chat_renderer import ChatRenderer
from gem_adapters.episodes.episode import Episode
from gem_adapters.episodes.tasks import Task
from gem_adapters.policies.base import Policy, SamplingParams
from gem_adapters.runtime.rollout import rollout
from gem_adapters.runtime.rollout_limits import RolloutLimits
from gem_adapters.trl.rows import prompt_task

RolloutFunc = Callable[[list[Any], Any], dict[str, Any]]


@dataclass
class EpisodeSample:
    """One episode laid out as a TRL sample; ``turn_spans`` index into ``completion_ids``."""

    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    env_mask: list[int]
    turn_spans: list[tuple[int, int]]


def episode_to_sample(episode: Episode) -> EpisodeSample:
    """The episode's ``to_prompt_response`` in TRL's names, ending at the last action (see the module
    docstring)."""
    sample = episode.to_prompt_response(include_closing=False)
    if sample.response_logprobs is None:
        raise ValueError("the policy returned no logprobs; TRL needs them for every generated id")
    return EpisodeSample(
        prompt_ids=sample.prompt_ids,
        completion_ids=sample.response_ids,
        logprobs=sample.response_logprobs,
        env_mask=sample.response_mask,
        turn_spans=sample.turn_spans,
    )


def make_rollout_func(
    renderer: ChatRenderer,
    *,
    max_turns: int | None = None,
    max_turn_tokens: int = 24,
    max_context_tokens: int | None = None,
) -> RolloutFunc:
    """A TRL ``rollout_func`` that plays one GEM episode per prompt (a ``task_prompt``).

    Besides ``prompt_ids``, ``completion_ids``, ``logprobs`` and ``env_mask`` it returns, per sample,
    ``episode`` (the ``Episode``) and ``turn_spans`` (TRL merges both into the sample's row) and, for
    the whole call, ``rollout_seconds``. An episode must show exactly the images of its prompt (its dataset row's,
    which TRL's forward pass gets): otherwise a ``ValueError`` says why.
    """

    limits = RolloutLimits(max_turns, max_turn_tokens, max_context_tokens)
    renderers: dict[str, ChatRenderer] = {}
    calls = 0

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        nonlocal calls
        if calls == 0:  # a run resumed from a checkpoint goes on with the sampling seeds it had reached
            args = trainer.args
            per_call = args.steps_per_generation * args.num_iterations
            calls = trainer.state.global_step * args.gradient_accumulation_steps // per_call
        calls += 1
        tasks = [prompt_task(p) for p in prompts]
        if trainer.use_vllm and any(_num_images(p) for p in prompts):
            raise NotImplementedError(
                "VLLMPolicy generates from token ids only: train on images with use_vllm=False"
            )
        sampling = SamplingParams(
            max_new_tokens=max_turn_tokens,
            temperature=trainer.temperature,
            top_p=trainer.top_p,
            top_k=trainer.top_k or 0,
        )
        started = time.perf_counter()
        episodes: list[Episode | None] = [None] * len(tasks)
        # Each call samples from its own generator: reproducible, and the global torch RNG is untouched.
        seed = (trainer.args.seed * 1_000_003 + calls) * 1_009 + trainer.accelerator.process_index
        with _policy_for(trainer, seed) as policy:
            for settings, indices in _by_presentation(tasks).items():
                played = _play(
                    [tasks[i] for i in indices],
                    policy,
                    _renderer_for(renderer, renderers, settings),
                    limits if settings.max_turns is None else replace(limits, max_turns=settings.max_turns),
                    sampling,
                )
                for i, episode in zip(indices, played):
                    if tasks[i].env_kwargs:  # the same env id and seed with other kwargs: another start
                        episode.info["group"] = [tasks[i].env_id, tasks[i].seed, _kwargs_key(tasks[i])]
                    episodes[i] = episode
        elapsed = time.perf_counter() - started
        output = rollout_output(episodes, elapsed)  # type: ignore[arg-type]
        for prompt, episode in zip(prompts, episodes):
            _check_images(prompt, episode)  # type: ignore[arg-type]
        return output

    return rollout_func


@dataclass(frozen=True)
class _Presentation:
    """What of a task the renderer and the limits see (tasks that differ only in env and seed share it)."""

    system_prompt: str | None
    template_kwargs: str  # JSON text
    max_turns: int | None


def _by_presentation(tasks: Sequence[Task]) -> dict[_Presentation, list[int]]:
    """The indices of ``tasks`` grouped by presentation, in order: one batched rollout per group."""
    groups: dict[_Presentation, list[int]] = defaultdict(list)
    for i, task in enumerate(tasks):
        template = json.dumps(task.template_kwargs, sort_keys=True)
        groups[_Presentation(task.system_prompt, template, task.max_turns)].append(i)
    return groups


def _kwargs_key(task: Task) -> str:
    return json.dumps(task.env_kwargs, sort_keys=True, default=repr)


def _renderer_for(
    renderer: ChatRenderer, cache: dict[str, ChatRenderer], settings: _Presentation
) -> ChatRenderer:
    """``renderer``, or a copy with the task's system prompt and template kwargs (built once each)."""
    if settings.system_prompt is None and settings.template_kwargs == "{}":
        return renderer
    key = json.dumps([settings.system_prompt, settings.template_kwargs])
    if key not in cache:
        cache[key] = ChatRenderer(
            renderer.processor or renderer.tokenizer,
            renderer.system_prompt if settings.system_prompt is None else settings.system_prompt,
            chat_template=renderer.chat_template,
            template_kwargs={**renderer.template_kwargs, **json.loads(settings.template_kwargs)},
            check_template=renderer.check_template,
            prefix_messages=renderer.prefix_messages,
        )
    return cache[key]


def _play(
    tasks: Sequence[Task],
    policy: Policy,
    renderer: ChatRenderer,
    limits: RolloutLimits,
    sampling: SamplingParams,
) -> list[Episode]:
    """One episode per task, the envs made with each task's kwargs."""
    from gem_core import make_vec

    envs = make_vec(
        [task.env_id for task in tasks],
        backend="sync",
        autoreset_mode="disabled",
        vec_kwargs=[task.env_kwargs for task in tasks],
    )
    try:
        return rollout(
            envs, policy, renderer, seeds=[task.seed for task in tasks], limits=limits, sampling=sampling
        )
    finally:
        envs.close()


def rollout_output(episodes: list[Episode], rollout_seconds: float) -> dict[str, Any]:
    """What a ``rollout_func`` returns to TRL for ``episodes``, one per prompt in the prompts' order."""
    samples = [episode_to_sample(e) for e in episodes]
    return {
        "prompt_ids": [s.prompt_ids for s in samples],
        "completion_ids": [s.completion_ids for s in samples],
        "logprobs": [s.logprobs for s in samples],
        "env_mask": [s.env_mask for s in samples],
        "turn_spans": [s.turn_spans for s in samples],
        "episode": episodes,
        "rollout_seconds": rollout_seconds,
    }


def _num_images(prompt: Any) -> int:
    """The images TRL put in a prompt (the dataset row's): image parts of its messages' content."""
    if isinstance(prompt, str):
        return 0
    return sum(
        isinstance(part, dict) and part.get("type") == "image"
        for message in prompt
        if not isinstance(message["content"], str)
        for part in message["content"]
    )


def _check_images(prompt: Any, episode: Episode) -> None:
    """TRL's forward pass sees the images of the episode's dataset row, not the episode's own."""
    from gem_adapters.policies.multimodal import images_only_in_first_prompt

    where = f"episode of {episode.env_id} (seed {episode.seed})"
    if not images_only_in_first_prompt(episode):
        raise ValueError(
            f"{where} shows images after its first observation; TRL's forward pass only gets the images of "
            "the dataset row (the first observation's), so this env cannot be trained through TRL's rollout_func"
        )
    shown, given = len(episode.images()), _num_images(prompt)
    if shown != given:
        raise ValueError(
            f"{where} shows {shown} image(s) but its dataset row carries {given}: build the dataset with "
            "tasks_dataset(..., images=True) so that TRL's forward pass gets the images the model saw"
        )


class _policy_for:
    """The generation backend for one call: vLLM when the trainer uses it, else the trainer's model
    (with its images when ``processing_class`` is a multimodal processor)."""

    def __init__(self, trainer: Any, seed: int):
        self.trainer, self.seed = trainer, seed
        self._context: Any = None

    def __enter__(self) -> Policy:
        trainer = self.trainer
        if trainer.use_vllm:
            from gem_adapters.trl.vllm_policy import VLLMPolicy

            return VLLMPolicy(trainer.vllm_generation)
        from trl.models.utils import unwrap_model_for_generation

        from gem_adapters.policies.transformers_policy import TransformersPolicy

        self._context = unwrap_model_for_generation(
            trainer.model_wrapped,
            trainer.accelerator,
            gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
            gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
        )
        model = self._context.__enter__()
        if hasattr(trainer.processing_class, "image_processor"):
            from gem_adapters.policies.multimodal import VisionLanguagePolicy

            return VisionLanguagePolicy(model, trainer.processing_class, seed=self.seed)
        return TransformersPolicy(
            model, trainer.processing_class, seed=self.seed, bf16=bool(trainer.args.bf16)
        )

    def __exit__(self, *exc: Any) -> None:
        if self._context is not None:
            self._context.__exit__(*exc)
