"""Extracting answers from untrusted model text. Every function is linear-time and never raises on str input."""

from __future__ import annotations

import re

_BOXED = "\\boxed"
_BRACES = re.compile(r"[{}]")


def extract_boxed(text: str) -> str | None:
    r"""The content of the last ``\boxed{...}`` (braces balanced), stripped; None if there is none."""
    if not isinstance(text, str):
        return None
    start = text.rfind(_BOXED)
    while start != -1:
        open_ = start + len(_BOXED)
        while open_ < len(text) and text[open_] == " ":
            open_ += 1
        if open_ < len(text) and text[open_] == "{":
            depth = 0
            for brace in _BRACES.finditer(text, open_):
                depth += 1 if brace.group() == "{" else -1
                if depth == 0:
                    return text[open_ + 1 : brace.start()].strip()
        start = text.rfind(_BOXED, 0, start)
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


_FENCE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n(.*?)```", re.DOTALL)


def extract_last_code_block(text: str, language: str | None = None) -> str | None:
    """The last fenced code block (optionally of ``language``); None if there is none."""
    if not isinstance(text, str):
        return None
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(text)]
    if language is not None:
        blocks = [b for b in blocks if b[0] in ("", language.lower())]
    return blocks[-1][1] if blocks else None


def preview(text: str, limit: int = 80) -> str:
    """A short, single-line, printable excerpt of untrusted text for feedback messages."""
    flat = "".join(ch if ch.isprintable() else " " for ch in str(text)[: limit * 4])
    flat = " ".join(flat.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
