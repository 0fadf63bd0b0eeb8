import os

import pytest

# Tests never reach a model or dataset hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(params=[True, False], ids=["HF_HUB_OFFLINE", "no-network"])
def hub_unreachable(request, monkeypatch):
    """The Hub cannot be reached: HF_HUB_OFFLINE set (the tests' default), or unset with the Hub
    endpoint on a closed local port and no proxy, so the Hub probe itself must notice."""
    if not request.param:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
        for proxy in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(proxy, raising=False)
        monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
