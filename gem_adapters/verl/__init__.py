"""verl 0.9 glue: GEM episodes as verl agent-loop samples, the shared estimators as verl estimators.

* ``agent_loop.GemAgentLoop`` ("gem_agent"): plays one episode per dataset row through verl's
  ``server_manager``; per-turn rewards travel in ``rm_scores`` (one per turn, on its last action id).
* ``estimators``: ``gem_rebn``, ``gem_grpo``, ``gem_dr_grpo``, ``gem_rloo``, ``gem_reinforce`` for
  ``algorithm.adv_estimator``; registered in every verl process by the ``verl.plugins`` entry point
  (``plugin``).
* ``dataset``: the parquet of tasks (env id, seed, agent name) that ``data.train_files`` reads.
* ``policy_server.PolicyServer``: the server-manager interface served by a gem policy (CPU runs, tests).

``examples/train_verl.py`` launches ``verl.trainer.main_ppo`` with all of it. Importing this package
imports nothing from verl; the submodules ``agent_loop`` and ``estimators`` need it installed.
"""
