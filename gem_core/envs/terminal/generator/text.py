"""The terminal tasks of the category "text": count, filter, sort and edit lines of text files."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from gem_core.envs.terminal.generator.parts import FIRST_NAMES, WORDS, lines, task


def count_lines(rng: random.Random) -> dict[str, Any]:
    data = [f"{rng.choice(WORDS)} {rng.randint(1, 999)}" for _ in range(37)]
    return task(
        "CountLines",
        "text",
        "Count the lines of data.txt and write the number (digits only) to count.txt.",
        {"data.txt": lines(data)},
        [{"type": "file_equals", "path": "count.txt", "content": str(len(data)), "strip": True}],
        ["wc -l < data.txt > count.txt"],
    )


def sort_unique(rng: random.Random) -> dict[str, Any]:
    names = [rng.choice(FIRST_NAMES) for _ in range(40)]
    return task(
        "SortUnique",
        "text",
        "names.txt holds one name per line, with repeats. Write the distinct names, sorted "
        "alphabetically, one per line, to unique.txt.",
        {"names.txt": lines(names)},
        [{"type": "file_equals", "path": "unique.txt", "content": lines(sorted(set(names)))}],
        ["sort -u names.txt > unique.txt"],
    )


def extract_errors(rng: random.Random) -> dict[str, Any]:
    levels = ["INFO"] * 6 + ["WARN"] * 2 + ["ERROR"]
    log = [
        f"2024-03-{day:02d} 12:{minute:02d} {rng.choice(levels)} {rng.choice(WORDS)} handler {rng.choice(WORDS)}"
        for day, minute in sorted((rng.randint(1, 28), rng.randint(0, 59)) for _ in range(60))
    ]
    errors = [line for line in log if " ERROR " in line]
    assert errors
    return task(
        "ExtractErrors",
        "text",
        "app.log is a log file. Write every line that has the level ERROR to errors.log (in their "
        "original order), and write the number of those lines (digits only) to error_count.txt.",
        {"app.log": lines(log)},
        [
            {"type": "file_equals", "path": "errors.log", "content": lines(errors), "weight": 2},
            {
                "type": "file_equals",
                "path": "error_count.txt",
                "content": str(len(errors)),
                "strip": True,
            },
        ],
        ["grep ' ERROR ' app.log > errors.log", "wc -l < errors.log > error_count.txt"],
    )


def edit_config() -> dict[str, Any]:
    config = "[server]\nhost = 127.0.0.1\nport = 8080\n\n[client]\nport = 8080\nretries = 3\n"
    return task(
        "EditConfig",
        "text",
        "In config.ini, change the port of the [server] section from 8080 to 9090. Leave every other "
        "line (including the [client] port) unchanged.",
        {"config.ini": config},
        [
            {
                "type": "file_equals",
                "path": "config.ini",
                "content": config.replace("port = 8080", "port = 9090", 1),
            }
        ],
        ["sed -i '0,/^port = 8080$/s//port = 9090/' config.ini"],
    )


def top_words(rng: random.Random) -> dict[str, Any]:
    weights = [9, 7, 5, 3, 2, 2, 1, 1, 1, 1]
    vocab = rng.sample(WORDS, len(weights))
    text_words = [w for w, k in zip(vocab, weights) for _ in range(k)]
    rng.shuffle(text_words)
    text = "\n".join(
        " ".join(w.capitalize() if i % 5 == 0 else w for i, w in enumerate(text_words[j : j + 6]))
        for j in range(0, len(text_words), 6)
    )
    top = Counter(w.lower() for w in text.split()).most_common(3)
    return task(
        "TopWords",
        "text",
        "Find the 3 most frequent words in story.txt, ignoring case. Write them to top3.txt, most "
        "frequent first, one per line as 'word count' with the word in lowercase.",
        {"story.txt": text + "\n"},
        [{"type": "file_equals", "path": "top3.txt", "content": lines(f"{w} {c}" for w, c in top)}],
        [
            "tr 'A-Z' 'a-z' < story.txt | tr -s ' ' '\\n' | grep -v '^$' | sort | uniq -c "
            "| sort -k1,1nr | head -n 3 | awk '{print $2, $1}' > top3.txt"
        ],
    )


def dedupe_in_place(rng: random.Random) -> dict[str, Any]:
    items = [rng.choice(WORDS[:12]) for _ in range(25)]
    seen: list[str] = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return task(
        "DedupeInPlace",
        "text",
        "Remove the duplicate lines of list.txt in place: keep only the first occurrence of each line, "
        "in the original order.",
        {"list.txt": lines(items)},
        [{"type": "file_equals", "path": "list.txt", "content": lines(seen)}],
        ["awk '!seen[$0]++' list.txt > list.tmp && mv list.tmp list.txt"],
    )


def extract_range(rng: random.Random) -> dict[str, Any]:
    book = [f"{k:03d} {' '.join(rng.choice(WORDS) for _ in range(5))}" for k in range(1, 61)]
    return task(
        "ExtractRange",
        "text",
        "Write lines 10 to 20 (inclusive, counting from 1) of book.txt to excerpt.txt, and the last "
        "5 lines of book.txt to ending.txt.",
        {"book.txt": lines(book)},
        [
            {"type": "file_equals", "path": "excerpt.txt", "content": lines(book[9:20])},
            {"type": "file_equals", "path": "ending.txt", "content": lines(book[-5:])},
        ],
        ["sed -n '10,20p' book.txt > excerpt.txt", "tail -n 5 book.txt > ending.txt"],
    )
