"""OpenRLHF's own code from modules that cannot be imported on a CPU machine.

``openrlhf.cli.train_ppo_ray``, ``trainer.ppo_utils.samples_generator``, ``trainer.ray.vllm_engine``
and ``trainer.ppo_utils.experience_maker`` import vLLM or flash-attn at module level (CUDA-only
builds). The pieces the tests need are plain Python over torch: their source is read from the
installed package and compiled here, unchanged, with the few names they use. Nothing is rewritten,
so the tests follow whatever the installed OpenRLHF does.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(importlib.util.find_spec("openrlhf").submodule_search_locations[0])


def _tree(relative: str) -> ast.Module:
    return ast.parse((ROOT / relative).read_text())


def _compile(nodes: list[ast.stmt], namespace: dict[str, Any], filename: str) -> dict[str, Any]:
    exec(compile(ast.Module(body=nodes, type_ignores=[]), str(ROOT / filename), "exec"), namespace)
    return namespace


def _imports(relative: str) -> dict[str, Any]:
    """The names a module's top-level imports bind, for the imports that work without a GPU."""
    name = "openrlhf." + relative.removesuffix(".py").replace("/", ".")
    namespace: dict[str, Any] = {"__name__": name, "__package__": name.rpartition(".")[0]}
    for node in _tree(relative).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            with contextlib.suppress(ImportError):
                _compile([node], namespace, relative)
    return namespace


def _function(relative: str, name: str, cls: str | None = None) -> ast.FunctionDef:
    body = _tree(relative).body
    if cls is not None:
        body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == cls).body
    return next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == name)


# ---- openrlhf/cli/train_ppo_ray.py ----------------------------------------------------------------
def parse_cli(argv: list[str]) -> SimpleNamespace:
    """``train_ppo_ray``'s ``__main__`` block on ``argv``: its parser, ``hierarchize`` and every check
    it makes before ``train(args)`` (which needs GPUs and is not run)."""
    relative = "cli/train_ppo_ray.py"
    main = next(
        n for n in _tree(relative).body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)
    )
    body = list(main.body)
    last = body[-1]
    assert isinstance(last, ast.Expr) and ast.unparse(last) == "train(args)", ast.unparse(last)
    namespace = _imports(relative)
    saved = sys.argv
    sys.argv = ["train_ppo_ray", *argv]
    try:
        _compile(body[:-1], namespace, relative)
    finally:
        sys.argv = saved
    return namespace["args"]


# ---- openrlhf/trainer/ray/vllm_engine.py ----------------------------------------------------------
def load_agent_executor(agent_func_path: str) -> Any:
    """``_load_agent_executor``: how each vLLM engine actor builds the executor from the file."""
    relative = "trainer/ray/vllm_engine.py"
    node = _function(relative, "_load_agent_executor")
    return _compile([node], _imports(relative), relative)[node.name](agent_func_path)


# ---- openrlhf/trainer/ppo_utils/samples_generator.py -----------------------------------------------
def process_response_into_experience(response: dict[str, Any], max_len: int) -> Any:
    """``SamplesGenerator._process_response_into_experience``: one executor output -> ``Experience``."""
    relative = "trainer/ppo_utils/samples_generator.py"
    node = _function(relative, "_process_response_into_experience", cls="SamplesGenerator")
    fn = _compile([node], _imports(relative), relative)[node.name]
    return fn(None, response, max_len=max_len)


# ---- openrlhf/trainer/ppo_utils/experience_maker.py ------------------------------------------------
def stock_experience_maker(args: SimpleNamespace, kl_coef: float) -> Any:
    """An object with ``RemoteExperienceMaker``'s own advantage methods (and ``compute_reward`` from
    ``openrlhf.models.utils``, whose package imports flash-attn), for OpenRLHF's estimators."""
    from openrlhf.trainer.ppo_utils.kl_controller import FixedKLController
    from openrlhf.utils.logging_utils import init_logger

    namespace = _imports("models/utils.py")
    _compile([_function("models/utils.py", "compute_reward")], namespace, "models/utils.py")
    relative = "trainer/ppo_utils/experience_maker.py"
    namespace = {**_imports(relative), "compute_reward": namespace["compute_reward"]}
    namespace["logger"] = init_logger(relative)
    methods = [
        _function(relative, name, cls="RemoteExperienceMaker")
        for name in ("compute_advantages_and_returns", "get_advantages_and_returns", "get_cumulative_returns")
    ]
    _compile(methods, namespace, relative)
    maker = type("StockExperienceMaker", (), {m.name: namespace[m.name] for m in methods})()
    maker.strategy = SimpleNamespace(args=args)
    maker.advantage_estimator = args.algo.advantage.estimator
    maker.kl_ctl = FixedKLController(kl_coef)
    maker.critic_model_group = None
    return maker
