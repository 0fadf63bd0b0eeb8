import pytest


@pytest.fixture(scope="module")
def ray_cluster():
    """One local Ray instance for a whole test module (starting one takes seconds), then shut down."""
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False)
    yield ray
    if started:
        ray.shutdown()
