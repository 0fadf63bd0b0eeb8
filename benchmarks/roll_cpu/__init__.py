"""ROLL's agentic pipeline on CPU, a few steps on a tiny model (``scripts/roll_cpu_attempt.sh``)."""
