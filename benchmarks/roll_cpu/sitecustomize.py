"""Runs at the start of every Python process with this folder on PYTHONPATH (the ROLL CPU attempt): with
GEM_ROLL_CPU=1 it arms the runtime patches of ``gem_roll_cpu`` (applied when ROLL's modules are imported);
otherwise it does nothing. Ray's workers inherit PYTHONPATH and the variable from the driver's local Ray."""

import os

if os.environ.get("GEM_ROLL_CPU") == "1":
    import gem_roll_cpu

    gem_roll_cpu.install()
