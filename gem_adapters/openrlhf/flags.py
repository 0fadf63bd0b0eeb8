"""OpenRLHF 0.11's own command line (``python -m openrlhf.cli.train_ppo_ray``), parsed before a launch:
a launcher takes OpenRLHF's flags as they are, checks them with OpenRLHF's parser (a misspelt flag or a
bad value stops it before anything starts) and lays its defaults under the user's.

OpenRLHF has no function that builds that parser: ``train_ppo_ray`` builds it inline, in its
``if __name__ == "__main__":`` block, and the module imports Ray, DeepSpeed and vLLM (CUDA builds) at
the top, so importing it is slow where it works at all. ``train_ppo_ray_parser`` therefore reads the
installed file and runs the statements of that block that come before ``parser.parse_args()`` (every
``add_argument``, unchanged) with the only two names they use, ``argparse`` and ``datetime``: OpenRLHF's
own parser in a fraction of a second, nothing of OpenRLHF imported (``importlib.util.find_spec`` runs the
empty ``openrlhf/__init__.py`` and ``openrlhf/cli/__init__.py``). It follows whatever the installed
OpenRLHF declares; it refuses abbreviated flags, which OpenRLHF would expand, so that a typo never
silently becomes another flag.

``parse_flags`` reads flags into ``Flag`` entries keyed by their destination (``"data.max_len"``), and
``merge_flags`` puts a launcher's defaults (``{"--data.max_len": 2048, "--train.colocate_all": True}``)
under the user's flags: a default is dropped where the user gives the same setting, so the command
names every setting once.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import importlib.util
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

MODULE = "openrlhf.cli.train_ppo_ray"
AGENT_FUNC_PATH = Path(__file__).resolve().with_name("agent_func.py")  # for --train.agent_func_path


class Flag(NamedTuple):
    """One setting of the command line: the option as given, its tokens and the value OpenRLHF parses."""

    option: str
    tokens: tuple[str, ...]
    value: Any


def train_ppo_ray_source() -> Path:
    """The installed ``openrlhf/cli/train_ppo_ray.py`` (SystemExit when OpenRLHF is not installed)."""
    try:
        spec = importlib.util.find_spec(MODULE)
    except ModuleNotFoundError:
        spec = None
    if spec is None or spec.origin is None:
        raise SystemExit(
            f"{MODULE} is not installed: pip install --no-deps openrlhf==0.11.2 (see the README)"
        )
    return Path(spec.origin)


def train_ppo_ray_parser(source: Path | None = None) -> argparse.ArgumentParser:
    """``train_ppo_ray``'s argparse parser, built by its own statements (see the module docstring)."""
    source = train_ppo_ray_source() if source is None else source
    tree = ast.parse(source.read_text(encoding="utf-8"))
    main = next((n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)), None)
    if main is None:
        raise RuntimeError(f"{source}: no `if __name__ == '__main__':` block to build the parser from")
    body: list[ast.stmt] = []
    for node in main.body:
        if "parser.parse_args(" in ast.unparse(node):
            break
        body.append(node)
    else:
        raise RuntimeError(f"{source}: the __main__ block never calls parser.parse_args()")
    namespace: dict[str, Any] = {"argparse": argparse, "datetime": datetime.datetime}
    exec(compile(ast.Module(body=body, type_ignores=[]), str(source), "exec"), namespace)
    parser = namespace.get("parser")
    if not isinstance(parser, argparse.ArgumentParser):
        raise RuntimeError(f"{source}: the __main__ block builds no argparse parser named `parser`")
    parser.prog = f"python -m {MODULE}"
    parser.usage = f"{parser.prog} [--section.name VALUE ...]"  # not its 170-line list of every flag
    parser.allow_abbrev = False
    return parser


def parse_flags(argv: Sequence[str], parser: argparse.ArgumentParser | None = None) -> dict[str, Flag]:
    """``argv`` as ``train_ppo_ray`` flags, keyed by destination (a setting given twice: the last).
    Each option is checked by OpenRLHF's parser: an unknown one, a bad value or a stray word is its
    usage error (SystemExit 2)."""
    parser = train_ppo_ray_parser() if parser is None else parser
    segments: list[list[str]] = []
    for token in argv:
        if token == "--":  # argparse's end of options: train_ppo_ray takes no positional arguments
            continue
        if token.startswith("--") or not segments:
            segments.append([token])
        else:
            segments[-1].append(token)
    flags: dict[str, Flag] = {}
    for segment in segments:
        option = segment[0].split("=", 1)[0]
        action = parser._option_string_actions.get(option)  # exact: abbreviations are refused
        if action is None or action.dest == "help":
            parser.error(f"unrecognized arguments: {' '.join(segment)}")
        value = getattr(parser.parse_args(segment), action.dest)  # a bad value exits here
        flags.pop(action.dest, None)
        flags[action.dest] = Flag(option, tuple(segment), value)
    return flags


def as_argv(settings: Mapping[str, Any]) -> list[str]:
    """``{"--data.max_len": 2048, "--train.colocate_all": True, "--x": [1, 2]}`` as tokens: True is a
    switch given, False or None a flag left out, a list or tuple its items after the option."""
    argv: list[str] = []
    for option, value in settings.items():
        if value is True:
            argv.append(option)
        elif isinstance(value, (list, tuple)):
            argv += [option, *map(str, value)]
        elif value is not None and value is not False:
            argv.append(f"{option}={value}")
    return argv


def merge_flags(
    defaults: Mapping[str, Any], argv: Sequence[str], parser: argparse.ArgumentParser | None = None
) -> dict[str, Flag]:
    """``defaults`` (an option -> value mapping, ``as_argv``) less the settings ``argv`` gives again, then
    ``argv``'s flags: the user's win. Both are checked by OpenRLHF's parser (``parse_flags``)."""
    parser = train_ppo_ray_parser() if parser is None else parser
    given = parse_flags(argv, parser)
    kept = {d: f for d, f in parse_flags(as_argv(defaults), parser).items() if d not in given}
    return {**kept, **given}


def command_args(flags: Mapping[str, Flag]) -> list[str]:
    """The tokens of ``flags``, in order."""
    return [token for flag in flags.values() for token in flag.tokens]
