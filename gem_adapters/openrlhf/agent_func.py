"""The file to pass as ``--train.agent_func_path``; running the module prints its path::

    --train.agent_func_path "$(python -m gem_adapters.openrlhf.agent_func)"

OpenRLHF loads this file by path in each vLLM engine actor and builds ``AgentExecutor()``: here
``GemAgentExecutor`` with ``GemEnvInstance`` (one GEM env per episode, chosen by the row's label).
For another instance class or options, write a file of your own along the same lines::

    from gem_adapters.openrlhf.rollout import GemAgentExecutor

    class AgentExecutor(GemAgentExecutor):
        def __init__(self):
            super().__init__(MyInstance)
"""

from pathlib import Path

from gem_adapters.openrlhf.rollout import GemAgentExecutor as AgentExecutor

__all__ = ["AgentExecutor"]

if __name__ == "__main__":
    print(Path(__file__).resolve())
