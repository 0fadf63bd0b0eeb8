"""Trained baselines across environments: one resumable runner, one command per table.

    python -m benchmarks.baselines run envs          # the campaign of the ``envs`` table (hours)
    python -m benchmarks.baselines run envs --rows game:Mastermind-v1-easy   # one env's rows
    python -m benchmarks.baselines report envs       # table.csv, README table, grid PNG from the results
    python -m benchmarks.baselines smoke             # every row for 2 steps, 1 seed: seconds per step
    python -m benchmarks.baselines plan              # planned steps and predicted machine-hours
    python -m benchmarks.baselines run mixture --workers 2   # one policy on 4 envs at once (results/.../mixture/)
    python -m benchmarks.baselines.untrained         # the untrained table: random, solver, SmolLM2 zero-shot

``rows.py`` defines the rows (env, policy, warm-up, estimators, seeds, steps), ``train_run.py`` one run
(one seed of one row and estimator through TRL's ``GEMGRPOTrainer``), ``results.py`` the result files
and the interval math, ``runner.py`` the command line. Results: ``benchmarks/results/baselines_trained/``.
"""
