"""Extracting answers from untrusted model text. Every function is linear-time and never raises on str input.

Linear means one left-to-right pass (plus regular expressions that cannot backtrack): a reply made of
100,000 unbalanced ``\\boxed{`` or of one long run of spaces costs about as much as any other reply of
that length. ``tests/test_parsing.py`` checks it by comparing the time of inputs of size N and 4N.
"""

from __future__ import annotations

import re

# "\boxed", optional spaces, "{": the spaces are a run of one character class followed by a
# different one, so the match cannot backtrack.
_BOXED_OPEN = re.compile(r"\\boxed *\{")
_BRACES = re.compile(r"[{}]")


def extract_boxed(text: str) -> str | None:
    r"""The content of the last ``\boxed{...}`` (braces balanced), stripped; None if there is none.

    "Last" is by where ``\boxed`` starts: ``\boxed{a \boxed{b}}`` gives ``b``; a ``\boxed{`` whose
    brace never closes is skipped, so ``\boxed{a} \boxed{b`` gives ``a``. Braces are matched in one
    pass with a stack of open positions.
    """
    if not isinstance(text, str):
        return None
    opens = [m.end() - 1 for m in _BOXED_OPEN.finditer(text)]  # positions of their "{", increasing
    if not opens:
        return None
    wanted = set(opens)
    close_of: dict[int, int] = {}
    stack: list[int] = []
    for brace in _BRACES.finditer(text, opens[0]):
        if brace.group() == "{":
            stack.append(brace.start())
        elif stack:
            start = stack.pop()
            if start in wanted:
                close_of[start] = brace.start()
    for start in reversed(opens):
        if start in close_of:
            return text[start + 1 : close_of[start]].strip()
    return None


def extract_tag(text: str, tag: str) -> str | None:
    """The content of the last ``<tag>...</tag>``, stripped; None if there is none."""
    if not isinstance(text, str):
        return None
    close = text.rfind(f"</{tag}>")
    if close == -1:
        return None
    open_ = text.rfind(f"<{tag}>", 0, close)
    if open_ == -1:
        return None
    return text[open_ + len(tag) + 2 : close].strip()


# An opening fence: ``` then an optional language name, each run of blanks next to a different
# character class (no two adjacent runs can trade characters, so no backtracking), then a newline.
_FENCE_OPEN = re.compile(r"```[ \t]*(?:([\w+-]+)[ \t]*)?\n")


def extract_last_code_block(text: str, language: str | None = None) -> str | None:
    """The last fenced code block (optionally of ``language``); None if there is none.

    Blocks are read left to right: an opening fence, its body up to the next ```, then the search goes
    on after that closing fence.
    """
    if not isinstance(text, str):
        return None
    wanted = None if language is None else ("", language.lower())
    found = None
    position = 0
    while True:
        opening = _FENCE_OPEN.search(text, position)
        if opening is None:
            break
        close = text.find("```", opening.end())
        if close == -1:
            break
        lang = (opening.group(1) or "").lower()
        if wanted is None or lang in wanted:
            found = text[opening.end() : close]
        position = close + 3
    return found


def preview(text: str, limit: int = 80) -> str:
    """A short, single-line, printable excerpt of untrusted text for feedback messages."""
    flat = "".join(ch if ch.isprintable() else " " for ch in str(text)[: limit * 4])
    flat = " ".join(flat.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
