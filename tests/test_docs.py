"""Every code block of the README and the guides (``docs/*.md``) runs as written, in a fresh folder, in
document order, and every relative link of theirs leads somewhere.

A Python or TOML block whose first line is ``# <file>`` (``# nim_env.py``, ``# pyproject.toml``) is a
file the guide asks you to write: it is written there first, and a guide with a ``pyproject.toml`` gets
its package installed (what its ``pip install`` lines do). Then the other blocks run in order as one
script: Python blocks as they are, each line of a bash block as a command (``gem ...``,
``pytest ...``, ``python ...``), which must exit 0; ``pip install`` lines are the install above. A
TOML or YAML block that is not a file (a snippet of a larger file) must parse. The README's set-up
commands (``bash scripts/...``, ``.venv/bin/python ...``) install and train for minutes: the files they
name must exist and the scripts must parse (``bash -n``); CI runs ``bash scripts/test.sh`` itself.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GUIDES = sorted((REPO / "docs").glob("*.md"))
DOCUMENTS = [REPO / "README.md", *GUIDES]
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
FILE_HEADER = re.compile(r"# ([\w./-]+\.(?:py|toml))(?:[ ,].*)?\n")
COMMANDS = {"gem": [sys.executable, "-m", "gem_core.cli"], "pytest": [sys.executable, "-m", "pytest"]}
COMMANDS["python"] = [sys.executable]

RUNNER = """
import subprocess, sys


def _command(argv, line):
    done = subprocess.run(argv, input="", capture_output=True, text=True, timeout=900)
    print(done.stdout)
    if done.returncode != 0:
        raise SystemExit(f"the guide's command `{line}` exited {done.returncode}:\\n{done.stdout[-2000:]}\\n{done.stderr[-3000:]}")

"""


def blocks(guide: Path) -> list[tuple[str, str]]:
    return [(lang, code) for lang, code in BLOCK.findall(guide.read_text())]


def guide_script(guide: Path, folder: Path) -> str:
    """Write the guide's files into ``folder``; return the script that runs the rest, in order."""
    parts = [RUNNER]
    for index, (lang, code) in enumerate(blocks(guide)):
        header = FILE_HEADER.match(code)
        if lang in ("python", "toml") and header:
            path = folder / header.group(1)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(code)
        elif lang == "python":
            parts.append(f"# ---- block {index} ----\n{code}")
        elif lang == "bash":
            for line in filter(None, (raw.strip() for raw in code.splitlines())):
                argv = shlex.split(line)
                if argv[:2] == ["pip", "install"]:
                    continue
                if argv[0] == "bash" or argv[0].startswith(".venv"):
                    check_setup_command(argv, line)
                    continue
                assert argv[0] in COMMANDS, f"{guide.name}: no rule to run `{line}` (add one to {__name__})"
                parts.append(f"_command({[*COMMANDS[argv[0]], *argv[1:]]!r}, {line!r})")
        elif lang == "toml":
            import tomllib

            tomllib.loads(code)
        elif lang == "yaml":
            import yaml

            yaml.safe_load(code)
        else:
            assert lang == "text", f"{guide.name}: a ```{lang} block cannot be run"
    return "\n".join(parts)


def check_setup_command(argv: list[str], line: str) -> None:
    """A set-up command (``bash scripts/install.sh trl && .venv/bin/python examples/train_trl.py``): each
    command's script exists in the repository, and a bash script parses."""
    commands = [[]]
    for word in argv:
        commands.append([]) if word == "&&" else commands[-1].append(word)
    for command in commands:
        program, script = command[0], REPO / command[1]
        assert program == "bash" or program.startswith(".venv/bin/"), f"no rule to check `{line}`"
        assert script.is_file(), f"`{line}`: {command[1]} does not exist"
        if program == "bash":
            parsed = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
            assert parsed.returncode == 0, f"`{line}`: {parsed.stderr}"


@pytest.mark.parametrize("guide", DOCUMENTS, ids=[g.name for g in DOCUMENTS])
def test_the_code_blocks_run_as_written(guide, tmp_path):
    folder, site = tmp_path / "work", tmp_path / "site"
    folder.mkdir()
    script = guide_script(guide, folder)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(folder), str(REPO)])}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    if (folder / "pyproject.toml").exists():
        pip = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
        ]
        installed = subprocess.run(
            [*pip, "-t", str(site), str(folder)], capture_output=True, text=True, timeout=300
        )
        assert installed.returncode == 0, installed.stderr[-3000:]
    (tmp_path / "guide.py").write_text(script)
    # Output to files and a session of its own: a server the guide leaves behind cannot hold the test's
    # pipes open, and is killed with the session.
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with out.open("w") as stdout, err.open("w") as stderr:
        guide_run = subprocess.Popen(
            [sys.executable, str(tmp_path / "guide.py")],
            cwd=folder,
            env=env,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            returncode = guide_run.wait(timeout=1800)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(guide_run.pid, signal.SIGKILL)
    assert returncode == 0, f"{guide.name}:\n{out.read_text()[-3000:]}\n{err.read_text()[-5000:]}"


def test_every_guide_has_code_that_runs():
    assert {g.name for g in GUIDES} >= {"adding-an-env.md", "custom-estimators.md", "migrating-from-gem.md"}
    for guide in GUIDES:
        assert any(lang in ("python", "bash") for lang, _ in blocks(guide)), guide.name


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+)$", re.M)


def anchors(document: Path) -> set[str]:
    """The anchors GitHub gives a document's headings (outside code blocks)."""
    text = BLOCK.sub("", document.read_text())
    slugs = set()
    for heading in HEADING.findall(text):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        slugs.add(slug)
    return slugs


def links(document: Path) -> list[str]:
    return LINK.findall(BLOCK.sub("", document.read_text()))


@pytest.mark.parametrize("document", DOCUMENTS, ids=[d.name for d in DOCUMENTS])
def test_every_relative_link_leads_somewhere(document):
    dead = []
    for target in links(document):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = (document.parent / path).resolve() if path else document
        missing_anchor = bool(anchor) and resolved.suffix == ".md" and anchor not in anchors(resolved)
        if not resolved.exists() or missing_anchor:
            dead.append(target)
    assert dead == [], f"{document.name}: dead links {dead}"


def test_the_readme_links_every_guide_once():
    targets = [t.partition("#")[0] for t in links(REPO / "README.md")]
    assert {f"docs/{g.name}": targets.count(f"docs/{g.name}") for g in GUIDES} == {
        f"docs/{g.name}": 1 for g in GUIDES
    }


def test_the_readme_stays_a_first_read():
    """Details belong in docs/: the README fits in 120 lines."""
    assert len((REPO / "README.md").read_text().splitlines()) <= 120
