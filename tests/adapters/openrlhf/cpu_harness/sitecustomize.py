"""Runs at the start of every Python process with this folder on PYTHONPATH (the OpenRLHF CPU harness):
with GEM_OPENRLHF_CPU_HARNESS=1 it installs the import-time shims of ``gem_openrlhf_cpu``; otherwise it
does nothing. Ray workers and vLLM's engine-core subprocess inherit PYTHONPATH from the driver."""

import os

if os.environ.get("GEM_OPENRLHF_CPU_HARNESS") == "1":
    import gem_openrlhf_cpu

    gem_openrlhf_cpu.install()
