"""ShopEnv (``web:Shop-v0``): WebShop offline — find and buy the product an instruction describes.

The store is WebShop's, text mode: a search page, result pages of 10 products (50 results at most,
BM25 over the catalogue of ``catalog.py``), item pages with options to choose, sub-pages
(description, features, reviews) and a buy button. Pages are rendered as WebShop's simple text
observations (visible texts joined by `` [SEP] ``), after the instruction, and followed by the
admissible actions.

Actions are WebShop's, ``search[keywords]`` (on the search page) and ``click[button]`` (a button,
product id or option value shown on the page, case-insensitive), written inside ``\\boxed{}`` as in
the reference GEM's ``webshop:*`` ids (``\\boxed{click[buy now]}``); a reply that is exactly one
action (``click[buy now]``, WebShop's own format) is taken too.

| event                                                           | reward                        |
|-----------------------------------------------------------------|-------------------------------|
| ``click[buy now]`` (ends the episode)                           | WebShop's score, 0.0 to 1.0   |
| any other admissible action                                     | 0.0                           |
| an action that is not admissible on this page, or no action     | -0.1 (the episode goes on)    |
| the last turn (``max_turns``, 15 as in the reference) used      | 0.0 (truncated)               |

The score (``catalog.reward``) is WebShop's attribute, option and price matching; ``info["success"]``
is a score of 1.0, and the final ``info`` has the score's parts. Each episode draws a goal (an
instruction) from the catalogue with ``self.rng``.
"""

from __future__ import annotations

import re
from typing import Any

from gem_core.core import Env, StepResult
from gem_core.envs.web.catalog import (
    DEPARTMENTS,
    PRODUCT_WINDOW,
    Product,
    make_goal,
    products_by_asin,
    reward,
    search,
)
from gem_core.extras import require
from gem_core.parsing import extract_boxed, preview

PENALTY = -0.1
MAX_KEYWORDS_CHARS = 300
BACK_TO_SEARCH, NEXT_PAGE, PREV_PAGE, BUY_NOW = "back to search", "next >", "< prev", "buy now"
SUB_PAGES = ("description", "features", "reviews")
SEARCH_WORDS = sorted({word for types in DEPARTMENTS.values() for name in types for word in name.split()})
_ACTION = re.compile(r"(search|click)\[(.*)\]", re.IGNORECASE | re.DOTALL)


def parse_action(text: str) -> tuple[str, str] | None:
    """``(name, argument)`` of ``search[...]`` / ``click[...]``: the last ``\\boxed{}``, or the whole
    reply when it is exactly one action; the argument lowercased with spaces collapsed."""
    boxed = extract_boxed(text)
    candidate = boxed if boxed is not None else text.strip()
    match = _ACTION.fullmatch(candidate) if len(candidate) <= MAX_KEYWORDS_CHARS + 10 else None
    if match is None:
        return None
    argument = " ".join(match.group(2).lower().split())
    return (match.group(1).lower(), argument) if argument else None


class ShopEnv(Env[str]):
    """WebShop over the generated catalogue (see the module docstring)."""

    def __init__(self, max_turns: int = 15):
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        require("bm25s", package="bm25s", extra="tools", needed_by="web:Shop-v0's search")
        self.max_turns = max_turns
        self.goal: dict[str, Any] = {}
        self.turn = 0
        self.page = "search"  # search | results | item | description | features | reviews
        self.keywords = ""
        self.results: list[str] = []  # ASINs of the last search
        self.result_page = 1
        self.asin: str | None = None
        self.options: dict[str, str] = {}  # option name -> selected value
        self.opened: list[str] = []  # the products opened this episode (WebShop's session["asins"])

    # ---- the Env API ---------------------------------------------------------------------------
    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        self.goal = make_goal(self.rng)
        self.turn = 0
        self._to_search_page()
        self.opened = []
        return self._observation(), {"instruction": self.goal["instruction_text"]}

    def step(self, action: str) -> StepResult:
        self.turn += 1
        parsed = parse_action(action)
        if parsed is None:
            hint = "Reply with one action inside \\boxed{}, e.g. \\boxed{search[red running shoes]} or \\boxed{click[buy now]}."
            return self._go_on(
                f"No action found. {hint} Your reply was: {preview(action) or '(empty)'}",
                PENALTY,
                {"format_error": True},
            )
        name, argument = parsed
        if name == "search" and self.page == "search":
            self.keywords, self.results, self.result_page = argument, search(argument), 1
            self.page, self.asin, self.options = "results", None, {}
            return self._go_on("", 0.0, {})
        if name == "click" and argument in self.clickables():
            return self._click(argument)
        shown = f"{name}[{preview(argument, 60)}]"
        return self._go_on(
            f"Invalid action: {shown} is not available on this page.", PENALTY, {"invalid_move": True}
        )

    def sample_random_action(self) -> str:
        if self.page == "search":
            words = self.action_rng.sample(
                sorted({w for p in products_by_asin().values() for w in p.product_type.split()}), 2
            )
            return f"\\boxed{{search[{' '.join(words)}]}}"
        return f"\\boxed{{click[{self.action_rng.choice(self.clickables())}]}}"

    def solve_action(self) -> str:
        """Search for the instruction's product type, attributes and options; open the first listing not yet
        opened whose title has them all under the price limit; choose the instruction's options (going
        back to the results if one is missing); buy."""
        goal = self.goal
        if self.page == "search":
            words = [goal["product_type"], *goal["attributes"], *goal["options"].values()]
            return f"\\boxed{{search[{' '.join(words)}]}}"
        if self.page == "results":
            for asin in self._page_results():
                product = products_by_asin()[asin]
                title = product.title.lower()
                fits = all(a in title for a in goal["attributes"]) and goal["product_type"] in title
                if fits and product.price <= goal["price_upper"] and asin not in self.opened:
                    return f"\\boxed{{click[{asin}]}}"
            more = self.result_page * PRODUCT_WINDOW < len(self.results)
            return f"\\boxed{{click[{NEXT_PAGE if more else BACK_TO_SEARCH}]}}"
        if self.page == "item":
            product = self._product()
            values = product.option_values
            if any(v not in values for v in goal["options"].values()):
                return f"\\boxed{{click[{PREV_PAGE}]}}"
            for value in goal["options"].values():
                if self.options.get(values[value]) != value:
                    return f"\\boxed{{click[{value}]}}"
            return f"\\boxed{{click[{BUY_NOW}]}}"
        return f"\\boxed{{click[{PREV_PAGE}]}}"

    # ---- pages ---------------------------------------------------------------------------------
    def clickables(self) -> list[str]:
        """The buttons of the current page, as ``click[...]`` takes them."""
        if self.page == "results":
            buttons = [BACK_TO_SEARCH]
            if self.result_page > 1:
                buttons.append(PREV_PAGE)
            if self.result_page * PRODUCT_WINDOW < len(self.results):
                buttons.append(NEXT_PAGE)
            return buttons + self._page_results()
        if self.page == "item":
            return [BACK_TO_SEARCH, PREV_PAGE, *self._product().option_values, *SUB_PAGES, BUY_NOW]
        if self.page in SUB_PAGES:
            return [BACK_TO_SEARCH, PREV_PAGE]
        return []

    def _click(self, button: str) -> StepResult:
        if button == BACK_TO_SEARCH:
            self._to_search_page()
        elif button == NEXT_PAGE:
            self.result_page += 1
        elif button == PREV_PAGE:
            if self.page == "results":
                self.result_page -= 1
            elif self.page == "item":
                self.page, self.asin, self.options = "results", None, {}
            else:
                self.page = "item"
        elif self.page == "results":
            self.page, self.asin, self.options = "item", button, {}
            self.opened.append(button)
        elif button in SUB_PAGES:
            self.page = button
        elif button == BUY_NOW:
            return self._buy()
        else:  # an option value
            self.options[self._product().option_values[button]] = button
        return self._go_on("", 0.0, {})

    def _buy(self) -> StepResult:
        score, parts = reward(self._product(), self.goal, self.options)
        score = round(score, 4)
        text = f"Thank you for shopping with us! [SEP] Your score (min 0.0, max 1.0) [SEP] {score}"
        return text, score, True, False, {"success": score >= 1.0, "score": score, "asin": self.asin, **parts}

    def _to_search_page(self) -> None:
        self.page, self.keywords, self.results, self.result_page, self.asin, self.options = (
            "search",
            "",
            [],
            1,
            None,
            {},
        )

    def _product(self) -> Product:
        return products_by_asin()[self.asin]  # type: ignore[index]

    def _page_results(self) -> list[str]:
        start = (self.result_page - 1) * PRODUCT_WINDOW
        return self.results[start : start + PRODUCT_WINDOW]

    def page_text(self) -> str:
        """The current page as WebShop's simple text observation."""
        if self.page == "search":
            return "WebShop [SEP] Instruction: [SEP] " + self.goal["instruction_text"] + " [SEP] Search"
        parts = ["Back to Search"]
        if self.page == "results":
            if self.result_page > 1:
                parts.append("< Prev")
            parts.append(f"Page {self.result_page} (Total results: {len(self.results)})")
            if self.result_page * PRODUCT_WINDOW < len(self.results):
                parts.append("Next >")
            for asin in self._page_results():
                product = products_by_asin()[asin]
                parts += [product.asin, product.title, f"${product.price:.2f}"]
            return " [SEP] ".join(parts)
        product = self._product()
        parts.append("< Prev")
        if self.page == "item":
            for name, values in product.options:
                parts += [name, *values]
            parts += [product.title, f"Price: ${product.price:.2f}", f"Rating: {product.rating}"]
            parts += ["Description", "Features", "Reviews", "Buy Now"]
        elif self.page == "description":
            parts.append(product.description)
        elif self.page == "features":
            parts += list(product.features)
        else:
            parts += list(product.reviews)
        return " [SEP] ".join(parts)

    def _observation(self) -> str:
        if self.page == "search":
            actions = "search[your keywords]"
        else:
            actions = ", ".join(f"click[{c}]" for c in self.clickables())
        selected = ""
        if self.page == "item" and self.options:
            selected = "\nSelected options: " + ", ".join(f"{k}: {v}" for k, v in self.options.items())
        left = self.max_turns - self.turn
        return (
            f"Instruction: {self.goal['instruction_text']}\n"
            f"Page: {self.page_text()}{selected}\n"
            f"Available actions: {actions}\n"
            f"You have {left} turn{'s' if left != 1 else ''} left. Reply with one action inside \\boxed{{}}, "
            "e.g. \\boxed{search[red running shoes]} or \\boxed{click[buy now]}."
        )

    def _go_on(self, note: str, reward_value: float, info: dict[str, Any]) -> StepResult:
        truncated = self.turn >= self.max_turns
        if truncated:
            info["success"] = False
            return (
                f"{note}\nNo turns left: the episode is over without a purchase.".strip(),
                float(reward_value),
                False,
                True,
                info,
            )
        text = self._observation()
        return (f"{note}\n{text}" if note else text), float(reward_value), False, False, info
