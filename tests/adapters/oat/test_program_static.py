"""The Oat program and the example, checked against Oat's installed source without importing them.

``gem_adapters/oat/program.py`` and ``examples/train_oat.py`` import vLLM, Launchpad and DeepSpeed
(through ``oat.algorithms``), which do not install on the CPU CI. What can be checked without running
them is checked here by reading them and Oat 0.2.4's source with ``ast``:

* every method GEMActor / GEMLearner override exists on their Oat base classes, with the same
  parameters, and every ``self.<name>`` they read is defined by them or by those bases;
* every ``args.<field>`` read, and every field the dataclasses set, is one of Oat's argument fields
  (``OATArgs``, ``PPOArgs``) or one GEMArgs adds; GEMArgs adds no field Oat already has unless it
  says it changes Oat's default;
* every call into gem_core / gem_adapters binds to the real signature (``inspect.Signature.bind``),
  and every call into Oat names parameters Oat's function has.

The example's command line is parsed for real (tyro over the real ``GEMArgs``) in
``test_train_oat_example.py``.

A syntax error in either file fails every test here (each parses the file).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
from pathlib import Path

import pytest

if importlib.util.find_spec("oat") is None:
    pytest.skip("oat-llm is not installed", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[3]
PROGRAM = ROOT / "gem_adapters" / "oat" / "program.py"
EXAMPLE = ROOT / "examples" / "train_oat.py"
OAT = Path(importlib.util.find_spec("oat").submodule_search_locations[0])


def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def oat_path(module: str) -> Path:
    parts = module.split(".")[1:]
    package = OAT.joinpath(*parts) / "__init__.py"
    return package if package.exists() else OAT.joinpath(*parts).with_suffix(".py")


def imported_names(tree: ast.Module) -> dict[str, str]:
    """name -> module, for every ``from module import name`` anywhere in the file."""
    return {
        alias.asname or alias.name: node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }


def find_class(name: str, module: str) -> tuple[ast.ClassDef, dict[str, str]]:
    """The ClassDef of ``name`` as seen from Oat ``module`` (following re-exports) and that file's imports."""
    tree = parse(oat_path(module))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node, imported_names(tree)
    return find_class(name, imported_names(tree)[name])


def oat_members(name: str, module: str) -> tuple[dict[str, ast.FunctionDef], set[str]]:
    """Methods (nearest definition first) and ``self.x = ...`` attributes of an Oat class and its Oat bases."""
    methods: dict[str, ast.FunctionDef] = {}
    attributes: set[str] = set()
    node, imports = find_class(name, module)
    for item in node.body:
        if isinstance(item, ast.FunctionDef):
            methods.setdefault(item.name, item)
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            attributes.add(item.target.id)
    attributes |= self_assignments(node)
    for base in node.bases:
        if isinstance(base, ast.Name) and imports.get(base.id, "").startswith("oat"):
            base_methods, base_attributes = oat_members(base.id, imports[base.id])
            for key, value in base_methods.items():
                methods.setdefault(key, value)
            attributes |= base_attributes
    return methods, attributes


def self_assignments(node: ast.AST) -> set[str]:
    return {
        target.attr
        for n in ast.walk(node)
        if isinstance(n, (ast.Assign, ast.AnnAssign))
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        for target in ast.walk(t)
        if isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    }


def dataclass_fields(node: ast.ClassDef) -> set[str]:
    return {i.target.id for i in node.body if isinstance(i, ast.AnnAssign) and isinstance(i.target, ast.Name)}


def classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}


def parameters(function: ast.FunctionDef) -> list[str]:
    return [a.arg for a in function.args.posonlyargs + function.args.args]


@pytest.fixture(scope="module")
def program():
    return parse(PROGRAM)


@pytest.fixture(scope="module")
def oat_arg_fields():
    return dataclass_fields(find_class("OATArgs", "oat.args")[0]) | dataclass_fields(
        find_class("PPOArgs", "oat.algorithms.ppo")[0]
    )


@pytest.mark.parametrize(
    ("cls", "base", "required"),
    [
        ("GEMActor", "PPOMultiTurnActor", {"init", "collect_experience"}),
        ("GEMLearner", "PPOMultiTurnLearner", {"_init", "prepare_data", "process_feedback_data", "evaluate"}),
    ],
)
def test_subclasses_fit_their_oat_bases(program, cls, base, required):
    node = classes(program)[cls]
    assert [b.id for b in node.bases] == [base]
    base_methods, base_attributes = oat_members(base, imported_names(program)[base])
    own = {i.name: i for i in node.body if isinstance(i, ast.FunctionDef)}
    assert required <= set(own) and required <= set(base_methods)
    for name in set(own) & set(base_methods):
        assert parameters(own[name]) == parameters(base_methods[name]), name
    defined = set(own) | self_assignments(node) | set(base_methods) | base_attributes
    read = {
        n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
    }
    assert read - defined == set()


def test_strategy_methods_exist(program):
    strategy, _ = oat_members("DeepspeedStrategy", "oat.utils.deepspeed")
    used = {
        n.attr
        for n in ast.walk(program)
        if isinstance(n, ast.Attribute)
        and isinstance(n.value, (ast.Name, ast.Attribute))
        and (getattr(n.value, "id", None) or getattr(n.value, "attr", None)) == "strategy"
    }
    assert used and used - set(strategy) - {"args"} == set()


def test_argument_fields_exist(program, oat_arg_fields):
    example = parse(EXAMPLE)
    gem_args = dataclass_fields(classes(program)["GEMArgs"])
    # Oat fields whose default GEMArgs changes:
    changed = {"algo", "pretrain", "gamma", "num_samples", "oracle", "prompt_data"}
    assert gem_args & oat_arg_fields == changed
    assert "Args" not in classes(example)  # the example parses GEMArgs itself, Oat's fields plus GEM's
    for tree in (program, example):
        read = {
            n.attr
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute)
            and (
                (isinstance(n.value, ast.Name) and n.value.id == "args")
                or (isinstance(n.value, ast.Attribute) and n.value.attr == "args")
            )
        }
        assert read and read - oat_arg_fields - gem_args == set()


def calls(tree: ast.Module, names: dict[str, str]):
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in names
            and not any(isinstance(a, ast.Starred) for a in node.args)
            and all(k.arg for k in node.keywords)
        ):
            yield node.func.id, len(node.args), [k.arg for k in node.keywords]


def test_calls_into_gem_bind_to_the_real_signatures(program):
    ours = {
        k: v for k, v in imported_names(program).items() if v.split(".")[0] in ("gem_core", "gem_adapters")
    }
    assert "rollout" in ours and "transition_advantages" in ours and "make_vec" in ours
    checked = set()
    for name, num_args, keywords in calls(program, ours):
        target = getattr(importlib.import_module(ours[name]), name)
        inspect.signature(target).bind(*[None] * num_args, **dict.fromkeys(keywords))
        checked.add(name)
    assert {
        "rollout",
        "transition_advantages",
        "episodes_to_transitions",
        "make_vec",
        "SamplingParams",
    } <= checked


def test_calls_into_oat_name_real_parameters():
    example = parse(EXAMPLE)
    oat_calls = {k: v for k, v in imported_names(example).items() if v.startswith("oat")}
    checked = set()
    for name, num_args, keywords in calls(example, oat_calls):
        tree = parse(oat_path(oat_calls[name]))
        (function,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
        params = parameters(function)
        assert num_args <= len(params) and set(keywords) <= set(params), name
        checked.add(name)
    assert checked == {"get_program", "get_default_args", "default_args_validation"}
    program_names = set(classes(parse(PROGRAM))) | {
        n.name for n in parse(PROGRAM).body if isinstance(n, ast.FunctionDef)
    }
    from_program = {k for k, v in imported_names(example).items() if v == "gem_adapters.oat.program"}
    assert from_program and from_program <= program_names
