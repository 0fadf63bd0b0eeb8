"""verl plugin: registers the GEM advantage estimators in every process that imports verl.

verl loads each entry point of the ``verl.plugins`` group at ``import verl`` (unless
``VERL_USE_EXTERNAL_PLUGINS=none``), in the driver and in every Ray worker, so with gem-core
installed ``algorithm.adv_estimator=gem_rebn`` works without user code. Where entry points are
switched off, ``VERL_USE_EXTERNAL_MODULES=gem_adapters.verl.plugin`` does the same. verl swallows
errors raised while loading a plugin; ``python -c "import verl.trainer.ppo.core_algos as c;
print(sorted(c.ADV_ESTIMATOR_REGISTRY))"`` shows whether the ``gem_*`` names arrived.

It also installs the state-key transport (``gem_adapters.verl.state_keys``: a pinned patch of the v1
trainer's advantage step), with which ``gem_gigpo`` and ``gem_gigpo_no_std`` are registered.

With ``VERL_PLATFORM=cpu`` it also installs ``gem_adapters.verl.cpu`` (verl's trainer on CPU).
"""

import os

from gem_adapters.verl.advantages import register_estimators

REGISTERED = register_estimators()

if os.environ.get("VERL_PLATFORM", "").strip().lower() == "cpu":  # verl's own platform switch
    from gem_adapters.verl import cpu

    cpu.install()  # the CPU platform, the transformers rollout and the patches of verl's CUDA-only lines
