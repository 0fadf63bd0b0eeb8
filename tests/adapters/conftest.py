"""Shared fixtures: the offline SmolLM2 tokenizer (loaded once per session), a tiny model over its
vocabulary."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tokenizer():
    from gem_adapters.runtime.models import load_tokenizer

    return load_tokenizer("smollm2")


@pytest.fixture(scope="session")
def tiny_model(tokenizer):
    from gem_adapters.runtime.models import tiny_causal_lm

    return tiny_causal_lm(tokenizer, seed=0)
