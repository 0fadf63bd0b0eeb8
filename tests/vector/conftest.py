import pytest


@pytest.fixture(scope="session")
def ray_cluster():
    """One local Ray instance for the whole test session (starting one takes seconds)."""
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False)
    yield ray
    if started:
        ray.shutdown()
