import os
import shutil
import tempfile
import time

import pytest

# A test's Ray is its own: no token written to ~/.ray, no usage report.
RAY_TEST_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray instance of this test module's own, then shut down. ``address="local"``: never a
    cluster already running on the machine (nor ``RAY_ADDRESS``); its session files go to a temporary
    directory, so the machine's ``/tmp/ray`` (and the address of its latest cluster) is left alone."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():  # started by an earlier test of this process; it shuts it down itself
        yield ray
        return
    saved = {name: os.environ.get(name) for name in RAY_TEST_ENV}
    os.environ.update(RAY_TEST_ENV)
    temp_dir = tempfile.mkdtemp(prefix="gem-ray-")  # short: Ray's socket paths must fit 107 bytes
    try:
        ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=temp_dir)
        yield ray
    finally:
        ray.shutdown()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        remove_soon(temp_dir)


def remove_soon(path, seconds=10.0):
    """Remove ``path``, again until it is gone: Ray's processes write their last logs as they exit."""
    deadline = time.monotonic() + seconds
    while True:
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.exists(path) or time.monotonic() > deadline:
            return
        time.sleep(0.5)
