"""The light first pass of an example's command line, before torch and the trainer load.

An example parses its command line with TRL's ``TrlParser`` over its own dataclass of GEM settings and
the trainer's config class; importing that config class loads torch and transformers (seconds). This
pass reads the example's dataclass and its settings of the config's fields with ``argparse`` alone:
``--help`` answers at once, and a bad value of one of them (a type, a choice) is refused before anything
heavy loads. Every other flag is left to the full parse. ``--config file.yaml`` is read as TRL reads
it (its values become defaults).
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Mapping, Sequence


def light_parser(
    script_class: type,
    settings: Mapping[str, object],
    *,
    prog: str,
    description: str,
    config_name: str,
    helps: Mapping[str, str] | None = None,
) -> argparse.ArgumentParser:
    """An ``argparse`` parser of ``script_class``'s fields (a dataclass; a ``Literal`` field takes its
    choices) and of ``settings``, an example's defaults of fields of ``config_name``, each typed by its
    value (a bool takes ``--name`` alone or ``--name true/false``); ``helps`` adds to a setting's help."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=description,
        epilog=f"Every other flag is a field of {config_name}, read by TRL's parser: --help_all lists them "
        "all (it loads TRL and torch). --config file.yaml sets defaults, as in TRL's scripts.",
        allow_abbrev=False,
    )
    parser.add_argument("--config", help="A YAML file of settings; the command line overrides them.")
    group = parser.add_argument_group(f"this script ({script_class.__name__})")
    hints = typing.get_type_hints(script_class)
    for spec in dataclasses.fields(script_class):
        default = spec.default if spec.default is not dataclasses.MISSING else spec.default_factory()
        _add_flag(group, spec.name, default, spec.metadata.get("help", ""), hints[spec.name])
    group = parser.add_argument_group(f"this example's settings of {config_name}")
    for name, default in settings.items():
        _add_flag(group, name, default, (helps or {}).get(name, ""), type(default))
    return parser


def parse_light(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.Namespace:
    """The flags ``parser`` knows, with a ``--config`` file's values as their defaults; ``--help`` prints
    and exits, a bad value exits with status 2. Flags it does not know are left for TRL's parser."""
    known, _ = parser.parse_known_args(argv)
    if known.config:
        import yaml

        with open(known.config) as file:
            values = yaml.safe_load(file) or {}
        parser.set_defaults(**{k: v for k, v in values.items() if hasattr(known, k)})
        known, _ = parser.parse_known_args(argv)
    return known


def _add_flag(group, name: str, default: object, help: str, annotation: object) -> None:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    extra: dict = {}
    if typing.get_origin(annotation) is typing.Literal:
        extra["choices"] = list(typing.get_args(annotation))
        kind = type(extra["choices"][0])
    elif isinstance(default, bool) or annotation is bool:
        kind, extra = _boolean, {"nargs": "?", "const": True}
    elif default is None:  # an optional field: the type it has when given
        kind = args[0] if args and isinstance(args[0], type) else str
    else:
        kind = type(default)
    group.add_argument(
        f"--{name}", type=kind, default=default, help=f"{help} (default: {default})".lstrip(), **extra
    )


def _boolean(text: str) -> bool:
    if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text.lower() in ("true", "1", "yes")
