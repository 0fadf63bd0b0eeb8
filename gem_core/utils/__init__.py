"""The reference gem's ``gem.utils`` modules under the same paths, as thin adapters over gem_core:
``parsing``, ``qa_em``, ``math_grader``, ``sandbox``, ``seeding``, ``constants``
(``docs/migrating-from-gem.md`` lists every reference name and where it lives here)."""
