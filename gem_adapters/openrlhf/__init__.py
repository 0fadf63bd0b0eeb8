"""OpenRLHF 0.11 glue: GEM episodes from OpenRLHF's agent executor, per-turn estimators in its trainer.

* ``rollout.GemAgentExecutor`` (a ``MultiTurnAgentExecutor``) with ``rollout.GemEnvInstance`` (an
  ``AgentInstanceBase``): one token-exact GEM episode per sample, the env chosen by the row's label;
  ``agent_func.py`` is the file for ``--train.agent_func_path``.
* ``advantages``: ReBN (and GRPO, Dr.GRPO, RLOO, REINFORCE, GiGPO on the state keys the executor
  sends) on per-turn rewards, replacing
  ``RemoteExperienceMaker.compute_advantages_and_returns``; its docstring says how OpenRLHF's own
  ``reinforce`` with ``gamma`` differs.
* ``config``: ``GemOpenRLHFConfig``, the one configuration of a run (the estimator, CPU), the
  environment variables that carry it and their one reader; ``hook``: how it reaches OpenRLHF's Ray
  workers (``RAY_RUNTIME_ENV_HOOK``) and the estimator swap there (a pinned ``Patch``).
* ``rows``: tasks into the prompt JSONL (the whole task per row, as the label).
* ``flags``: ``train_ppo_ray``'s own argparse parser, built from its source without importing it (Ray,
  vLLM), to check a launcher's flags and lay its defaults under the user's.

``examples/train_openrlhf.py`` launches ``openrlhf.cli.train_ppo_ray`` with all of it. Importing this
package imports nothing from OpenRLHF; ``rollout`` needs it installed (``pip install --no-deps
openrlhf==0.11.2``, see README) and ``hook.install`` its trainer modules (GPU machines).
"""
