"""gem-core's benchmarks and learning experiments: scripts that import the library (never copy it) and print
ratios against a baseline measured in the same run; their results and commands live in ``benchmarks/results/``.

Run a script as a module from the repository root, e.g. ``python -m benchmarks.vector_faults`` or
``python -m benchmarks.learning.train --task guess``; what two scripts share is imported from here
(``benchmarks.bootstrap``, ``benchmarks.learning.common``) or from ``gem_adapters``.
"""
