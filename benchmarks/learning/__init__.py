"""The learning experiments (``benchmarks/results/learning/README.md``): one training run per command through
TRL (``train``), verl (``verl_cpu``, ``verl_main_ppo``), OpenRLHF (``openrlhf_train_ppo_ray``) or ROLL
(``roll_agentic``), all on the small warmed-up policy of ``common``, each writing the per-step CSV of
``train.COLUMNS``; ``experiments`` runs and plots the arms."""
