"""WikiGameEnv (``web:WikiGame-v0``): reach a target page by following links, offline.

The reference GEM's WikiGame (``game:WikiGame-v0-easy|hard``) plays on Wikipedia through a Kiwix or
MediaWiki server. This one plays on the encyclopedia that ships with ``qa:LocalWiki-v0`` and the
search tool (``gem_core/data/qa/corpus.jsonl``: 94 passages written for this project, shipped under
the project's licence), turned into a link graph (``link_graph``): a page links to every page whose
title (without a parenthesised qualifier) its text mentions, and to its three most similar pages by
BM25 (``gem_core.tools.search.SearchIndex``, the page's title and text as the query); links are made
two-way, so every page can reach every other (the longest shortest path is 7 clicks).

The game is the reference's: the observation shows the current page's text and its neighbouring
pages as ``\\boxed{Title}``; the action is a neighbouring page's title in ``\\boxed{}`` (matched
ignoring case and repeated spaces); ``\\boxed{<PREV_PAGE>}`` goes back where the variant allows it.
Variants (``variant=``) as in the reference: ``noregrets`` (the default: no going back),
``oneback`` (back, but not twice in a row), ``freenav`` (back at will), ``eidetic`` (any page whose
link was ever shown may be visited; no going back). Rewards are the reference's ``WikiGameReward``;
like the reference, nothing is shaped by the distance to the target:

| event                                                      | reward |
|------------------------------------------------------------|--------|
| reaching the target page (ends the episode)                | 1.0    |
| a move to another page, or a permitted step back           | -0.05  |
| a title that is not a neighbouring page, a forbidden back  | -0.2   |
| no ``\\boxed{}`` (or an empty one)                         | -0.2   |
| the last turn (``max_turns``) used without reaching it     | 0.0 (the reference's ``fail_reward``; truncated) |

Each episode draws a start page and a target page at least ``min_distance`` clicks away from it
(``self.rng``); ``info["shortest_path"]`` at reset is the number of clicks an optimal player needs.
No page is a dead end in this graph (every page has at least three links), so the reference's
dead-end rules never apply.
"""

from __future__ import annotations

import functools
import re
from collections import deque
from typing import Any

from gem_core.core import Env, StepResult
from gem_core.extras import require
from gem_core.parsing import extract_boxed, preview

SUCCESS_REWARD, STEP_REWARD, FAIL_REWARD = 1.0, -0.05, 0.0
INVALID_REWARD = FORMAT_REWARD = -0.2
PREV_PAGE = "<PREV_PAGE>"
RELATED_PAGES = 3
VARIANTS = ("noregrets", "oneback", "freenav", "eidetic")
MAX_TITLE_CHARS = 200


def _key(title: str) -> str:
    return " ".join(title.split()).casefold()


@functools.lru_cache(maxsize=1)
def link_graph() -> tuple[dict[str, str], dict[str, tuple[str, ...]]]:
    """``(texts, links)``: each page's text and its linked titles (sorted), from the QA corpus."""
    from gem_core.envs.qa import load_corpus
    from gem_core.tools.search import SearchIndex

    corpus = load_corpus()
    texts = {doc["title"]: doc["text"] for doc in corpus}
    links: dict[str, set[str]] = {title: set() for title in texts}
    names = {title: re.sub(r"\s*\(.*\)", "", title) for title in texts}
    for title, text in texts.items():
        for other, name in names.items():
            if other != title and re.search(rf"\b{re.escape(name)}\b", text, re.IGNORECASE):
                links[title].add(other)
                links[other].add(title)
    index = SearchIndex(corpus)
    for title, text in texts.items():
        hits = [
            hit["title"]
            for hit in index.search(f"{title} {text}", k=RELATED_PAGES + 1)
            if hit["title"] != title
        ]
        for other in hits[:RELATED_PAGES]:
            links[title].add(other)
            links[other].add(title)
    return texts, {title: tuple(sorted(found)) for title, found in links.items()}


@functools.cache
def distances_to(target: str) -> dict[str, int]:
    """Clicks from every page to ``target`` (links are two-way, so a search from the target gives them).
    Cached and shared: do not modify."""
    _, links = link_graph()
    distance, queue = {target: 0}, deque([target])
    while queue:
        page = queue.popleft()
        for other in links[page]:
            if other not in distance:
                distance[other] = distance[page] + 1
                queue.append(other)
    return distance


class WikiGameEnv(Env[str]):
    """The Wikipedia game over the shipped corpus (see the module docstring)."""

    _static_attributes = ("targets",)

    def __init__(self, max_turns: int = 10, variant: str = "noregrets", min_distance: int = 2):
        if variant not in VARIANTS:
            raise ValueError(f"invalid variant {variant!r}; valid options are {list(VARIANTS)}")
        if max_turns < 1 or min_distance < 1:
            raise ValueError("max_turns and min_distance must be at least 1")
        require("bm25s", package="bm25s", extra="tools", needed_by="web:WikiGame-v0's link graph")
        self.max_turns, self.variant, self.min_distance = max_turns, variant, min_distance
        texts, _ = link_graph()
        self.targets = [t for t in sorted(texts) if max(distances_to(t).values()) >= min_distance]
        if not self.targets:
            raise ValueError(f"no two pages are {min_distance} clicks apart (min_distance)")
        self.start = self.target = self.current = ""
        self.history: list[str] = []
        self.backtracked = False
        self.seen: list[str] = []  # eidetic: every title whose link was shown, in order
        self.turn = 0

    # ---- the Env API ---------------------------------------------------------------------------
    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        self.target = self.rng.choice(self.targets)
        distance = distances_to(self.target)
        self.start = self.current = self.rng.choice(
            sorted(t for t in distance if distance[t] >= self.min_distance)
        )
        self.history, self.backtracked, self.seen, self.turn = [self.start], False, [], 0
        self._remember_links()
        return self._instructions(), {"shortest_path": distance[self.start], "target": self.target}

    def step(self, action: str) -> StepResult:
        self.turn += 1
        guess = extract_boxed(action)
        if not guess:
            feedback = f"At turn {self.turn}, you did not provide a valid page title. Your reply was: {preview(action) or '(empty)'}"
            return self._go_on(feedback, FORMAT_REWARD, {"format_error": True})
        if guess == PREV_PAGE:
            return self._back()
        page = self._resolve(guess)
        if page is None:
            return self._go_on(self._invalid_text(guess), INVALID_REWARD, {"invalid_move": True})
        self.current = page
        self.history.append(page)
        self.backtracked = False
        self._remember_links()
        if page == self.target:
            text = f"Congratulations! You have reached the target page '{self.target}' in {self.turn} turns."
            return text, SUCCESS_REWARD, True, False, {"success": True}
        return self._go_on(f"At turn {self.turn}, you navigated to the '{page}' page.", STEP_REWARD, {})

    def sample_random_action(self) -> str:
        return f"\\boxed{{{self.action_rng.choice(self.valid_pages())}}}"

    def solve_action(self) -> str:
        """The next page on a shortest path to the target."""
        distance = distances_to(self.target)
        return f"\\boxed{{{min(self.valid_pages(), key=lambda t: (distance[t], t))}}}"

    # ---- rules ---------------------------------------------------------------------------------
    def valid_pages(self) -> list[str]:
        """The titles the next move may name (the current page's links; eidetic: every link seen)."""
        return list(self.seen) if self.variant == "eidetic" else list(link_graph()[1][self.current])

    def _remember_links(self) -> None:
        known = set(self.seen)
        self.seen += [t for t in link_graph()[1][self.current] if t not in known]

    def _resolve(self, guess: str) -> str | None:
        if len(guess) > MAX_TITLE_CHARS:
            return None
        wanted = _key(guess)
        return next((t for t in self.valid_pages() if _key(t) == wanted), None)

    def _invalid_text(self, guess: str) -> str:
        shown = preview(guess, 80)
        lowered = guess[:MAX_TITLE_CHARS].casefold()
        close = next((t for t in self.valid_pages() if lowered and lowered in t.casefold()), None)
        hint = (
            f"Did you mean '{close}'? "
            if close
            else "and neither could it be construed as a valid neighboring page title of it. "
        )
        return (
            f"At turn {self.turn}, you guessed '{shown}', which is neither a neighboring page of "
            f"'{self.current}', {hint}You must match exactly one of the neighboring page titles to navigate there."
        )

    def _back(self) -> StepResult:
        if self.variant in ("noregrets", "eidetic"):
            text = f"At turn {self.turn}, you attempted to backtrack to the previous page, but backtracking is not allowed in this variant of the Wikipedia Game."
            return self._go_on(text, INVALID_REWARD, {"invalid_move": True})
        if len(self.history) < 2:
            text = f"At turn {self.turn}, you attempted to backtrack to the previous page, but there is no previous page that you can return to."
            return self._go_on(text, INVALID_REWARD, {"invalid_move": True})
        if self.variant == "oneback" and self.backtracked:
            text = f"At turn {self.turn}, you attempted to backtrack to the previous page, but you have already backtracked once and cannot do so again."
            return self._go_on(text, INVALID_REWARD, {"invalid_move": True})
        self.history.pop()
        self.current = self.history[-1]
        self.backtracked = True
        return self._go_on(
            f"At turn {self.turn}, you backtracked to the previous page '{self.current}'.", STEP_REWARD, {}
        )

    # ---- text ----------------------------------------------------------------------------------
    def _rules(self) -> str:
        if self.variant in ("noregrets", "eidetic"):
            rules = "Choose wisely, as you may NOT backtrack; you can only visit neighboring pages (though you may revisit pages)."
            if self.variant == "eidetic":
                rules += " You may visit any page whose link you have seen so far in this game."
            return rules
        rules = f"If you wish, you may respond \\boxed{{{PREV_PAGE}}} to return to the previous page; this counts towards your maximum number of turns."
        return rules + (" You may NOT backtrack twice in a row." if self.variant == "oneback" else "")

    def _current_page(self) -> str:
        texts, _ = link_graph()
        neighbours = "\n".join(f"- \\boxed{{{t}}}" for t in self.valid_pages())
        left = self.max_turns - self.turn
        return (
            f"You are currently on the '{self.current}' page. Your target page is '{self.target}'.\n"
            f"Here is the page:\n{texts[self.current]}\n"
            f"This page has the following neighboring pages:\n{neighbours}\n"
            f"You have {left} turn{'s' if left != 1 else ''} left. Enter the title of the neighboring page you want to navigate to."
        )

    def _instructions(self) -> str:
        texts, _ = link_graph()
        return (
            f"You are playing the Wikipedia Game, and must reach the target page within {self.max_turns} turns.\n"
            "A neighboring page is any page linked from the current page. You start at a page and must "
            "navigate to the target page by visiting neighboring pages. To visit a neighboring page, enter "
            "its exact title wrapped in \\boxed{} (for example, \\boxed{Python (programming language)}).\n"
            f"{self._rules()}\n"
            f"You started at '{self.start}' and your target page is '{self.target}'.\n"
            f"Here is the target page:\n{texts[self.target]}\n\n{self._current_page()}"
        )

    def _go_on(self, text: str, reward: float, info: dict[str, Any]) -> StepResult:
        if self.turn >= self.max_turns:
            info["success"] = False
            text += f"\nAt turn {self.turn}, you have reached the maximum number of turns without reaching the target page '{self.target}'."
            return text, FAIL_REWARD, False, True, info
        return f"{text}\n{self._current_page()}", reward, False, False, info
