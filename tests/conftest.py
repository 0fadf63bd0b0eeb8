import os
import socket

import pytest

# Tests never reach a model or dataset hub, whatever the machine's environment says.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
# fp32 wherever a trainer would pick bf16 on its own (gem_adapters.runtime.precision), so that no test's numbers depend
# on whether this machine's CPU computes bf16 natively; tests of bf16 ask for it.
os.environ["GEM_PRECISION"] = "fp32"
# Ray starts its workers at nice 15. Beside a CPU-bound test (pytest-xdist runs two at once), such actors
# got ~3% of a core: a vector env's actors missed their step deadlines or did not start within 120 s.
# Every Ray that a test starts, in this process or a subprocess, runs its workers at the tests' priority.
os.environ["RAY_worker_niceness"] = "0"  # noqa: SIM112 (Ray reads this spelling)


@pytest.fixture
def closed_port():
    """A local TCP port that refuses connections while the test runs: bound, never listening (a port
    assumed closed, such as 9, may be open on some machine)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture
def free_port():
    """A local TCP port nothing listens on, released for the test's server to take."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(params=[True, False], ids=["HF_HUB_OFFLINE", "no-network"])
def hub_unreachable(request, monkeypatch):
    """The Hub cannot be reached: HF_HUB_OFFLINE set (the tests' default), or unset with the Hub
    endpoint on a local port that refuses connections and no proxy, so the Hub probe itself must notice."""
    if not request.param:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
        for proxy in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(proxy, raising=False)
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{request.getfixturevalue('closed_port')}")
