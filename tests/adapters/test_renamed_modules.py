"""The adapters' modules renamed to the common layout stay importable under their old names, as the
same module object, with a DeprecationWarning naming the new one."""

from __future__ import annotations

import importlib
import sys

import pytest

RENAMED = {
    "gem_adapters.verl.dataset": ("gem_adapters.verl.rows", "verl"),
    "gem_adapters.verl.estimators": ("gem_adapters.verl.advantages", "verl"),
    "gem_adapters.verl.agent_loop": ("gem_adapters.verl.rollout", "verl.experimental.agent_loop"),
    "gem_adapters.openrlhf.dataset": ("gem_adapters.openrlhf.rows", "openrlhf"),
    "gem_adapters.openrlhf.estimator": ("gem_adapters.openrlhf.advantages", "openrlhf"),
    "gem_adapters.openrlhf.agent": ("gem_adapters.openrlhf.rollout", "openrlhf.utils.agent"),
}


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_old_name_is_the_new_module_with_a_warning(old):
    new, framework = RENAMED[old]
    pytest.importorskip(framework)
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
