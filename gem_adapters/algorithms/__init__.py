"""The algorithms: per-turn advantage estimators and their placement on tokens (``advantages``), the
learner's shared-prefix forward (``prefix_tree``) and scripted warm-up episodes (``warmup``)."""
