"""verl 0.9 glue: GEM episodes as verl agent-loop samples, the shared estimators as verl estimators.

* ``rows``: tasks into the parquet that ``data.train_files`` reads (the whole task per row).
* ``rollout.GemAgentLoop`` ("gem_agent"): plays one episode per dataset row through verl's
  ``server_manager``; per-turn rewards travel in ``rm_scores`` (one per turn, on its last action id:
  ``token_rewards``).
* ``advantages``: ``gem_rebn``, ``gem_grpo``, ``gem_dr_grpo``, ``gem_rloo``, ``gem_reinforce``,
  ``gem_gigpo``, ... for ``algorithm.adv_estimator``; registered in every verl process by the
  ``verl.plugins`` entry point (``plugin``).
* ``state_keys``: each turn's env state key from the agent loop's sample to the estimators that need
  them (GiGPO): the ``gem_state_keys`` field and a pinned patch of verl's v1 advantage step.
* ``cpu``: verl's own trainer on CPU. ``policy_server.PolicyServer``: the server-manager interface
  served by a gem policy (CPU runs, tests).

``examples/train_verl.py`` launches ``verl.trainer.main_ppo`` with all of it. Importing this package
imports nothing from verl; the submodules ``rollout`` and ``advantages`` need it installed.
"""
