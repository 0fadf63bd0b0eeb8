"""The reference GEM's 12 games (``gem-llm`` 0.1.0, Apache-2.0), rule for rule.

Each module reproduces one game of the reference — rules text, move syntax, coordinates, rewards,
termination and word lists — and lists in its docstring the reference's bugs it keeps and the few
places it deviates (never crashing on untrusted text; Sokoban's level generator). ``base.py`` has the
turn structure they share. ``tests/compat`` plays the same moves through these and the installed
reference and asserts the same observations, rewards and flags at every turn.
"""
