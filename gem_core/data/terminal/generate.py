"""Generate the terminal tasks (``python gem_core/data/terminal/generate.py``), deterministically.

Each task is ``{"name", "category", "instruction", "files", "checks", "solution"}``:

  files     ``{relative path: text}`` written into the empty workspace at the start of an episode
  checks    what must hold at the end, each ``{"type", ..., "weight"}`` (see ``gem_core/envs/terminal/tasks.py``)
  solution  a reference list of shell commands; the tests run it and expect every check to pass

The expected contents in the checks are computed here in Python from the generated files, so a
reference solution written in shell is tested against an independent computation.

Guards: a check that already passes in a workspace where nothing was done (the task's files as
given), where everything was destroyed (empty), or where the inputs were emptied (each file
truncated) is marked ``"guard": true``: it is something to keep, not progress, and a task's score is 0
unless a check that is not a guard passes (``gem_core/envs/terminal/tasks.py``). Guards are found by
running the real grader on those three workspaces in temporary directories; a task whose every check
is a guard is an error.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

WORDS = [
    "apple",
    "river",
    "stone",
    "cloud",
    "maple",
    "tiger",
    "ocean",
    "lemon",
    "pixel",
    "rocket",
    "amber",
    "cedar",
    "delta",
    "ember",
    "falcon",
    "glacier",
    "harbor",
    "island",
    "jasper",
    "kernel",
    "lantern",
    "meadow",
    "nectar",
    "orbit",
    "prism",
    "quartz",
    "raven",
    "saffron",
    "timber",
    "umbra",
    "velvet",
    "willow",
    "xenon",
    "yarrow",
    "zephyr",
]
FIRST_NAMES = [
    "ada",
    "alan",
    "barbara",
    "claude",
    "donald",
    "edsger",
    "frances",
    "grace",
    "john",
    "ken",
    "linus",
    "margaret",
    "niklaus",
]


def task(name, category, instruction, files, checks, solution):
    return {
        "name": name,
        "category": category,
        "instruction": instruction,
        "files": files,
        "checks": checks,
        "solution": solution,
    }


def lines(items) -> str:
    return "".join(f"{item}\n" for item in items)


def build(rng: random.Random) -> list[dict]:
    tasks = []

    tasks.append(
        task(
            "CreateFile",
            "files",
            "Create a file named hello.txt that contains exactly one line: Hello, terminal!",
            {"README": "Your workspace. Create hello.txt here.\n"},
            [{"type": "file_equals", "path": "hello.txt", "content": "Hello, terminal!\n"}],
            ["echo 'Hello, terminal!' > hello.txt"],
        )
    )

    data = [f"{rng.choice(WORDS)} {rng.randint(1, 999)}" for _ in range(37)]
    tasks.append(
        task(
            "CountLines",
            "text",
            "Count the lines of data.txt and write the number (digits only) to count.txt.",
            {"data.txt": lines(data)},
            [{"type": "file_equals", "path": "count.txt", "content": str(len(data)), "strip": True}],
            ["wc -l < data.txt > count.txt"],
        )
    )

    notes = {f"notes/{w}.txt": f"note about {w}\n" for w in ("alpha", "beta", "gamma")}
    tasks.append(
        task(
            "RenameExtensions",
            "files",
            "Rename every .txt file in the notes/ directory to the same name with the extension .md "
            "(for example notes/alpha.txt becomes notes/alpha.md). Leave other files alone.",
            {**notes, "notes/todo.log": "keep me\n"},
            [
                *(
                    {"type": "file_equals", "path": p[:-4] + ".md", "content": c, "weight": 1}
                    for p, c in notes.items()
                ),
                {
                    "type": "command",
                    "cmd": "find notes -type f | sort",
                    "stdout": lines(sorted([*(p[:-4] + ".md" for p in notes), "notes/todo.log"])),
                    "weight": 2,
                },
            ],
            ['cd notes && for f in *.txt; do mv "$f" "${f%.txt}.md"; done'],
        )
    )

    names = [rng.choice(FIRST_NAMES) for _ in range(40)]
    tasks.append(
        task(
            "SortUnique",
            "text",
            "names.txt holds one name per line, with repeats. Write the distinct names, sorted "
            "alphabetically, one per line, to unique.txt.",
            {"names.txt": lines(names)},
            [{"type": "file_equals", "path": "unique.txt", "content": lines(sorted(set(names)))}],
            ["sort -u names.txt > unique.txt"],
        )
    )

    levels = ["INFO"] * 6 + ["WARN"] * 2 + ["ERROR"]
    log = [
        f"2024-03-{day:02d} 12:{minute:02d} {rng.choice(levels)} {rng.choice(WORDS)} handler {rng.choice(WORDS)}"
        for day, minute in sorted((rng.randint(1, 28), rng.randint(0, 59)) for _ in range(60))
    ]
    errors = [line for line in log if " ERROR " in line]
    assert errors
    tasks.append(
        task(
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
    )

    config = "[server]\nhost = 127.0.0.1\nport = 8080\n\n[client]\nport = 8080\nretries = 3\n"
    tasks.append(
        task(
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
    )

    regions = ["north", "south", "east", "west"]
    sales = [(rng.choice(regions), rng.choice(WORDS), rng.randint(5, 500)) for _ in range(30)]
    tasks.append(
        task(
            "SumColumn",
            "data",
            "sales.csv has the header region,product,amount. Write the sum of the amount column "
            "(an integer, digits only) to total.txt.",
            {"sales.csv": "region,product,amount\n" + lines(f"{r},{p},{a}" for r, p, a in sales)},
            [
                {
                    "type": "file_equals",
                    "path": "total.txt",
                    "content": str(sum(a for _, _, a in sales)),
                    "strip": True,
                }
            ],
            ["awk -F, 'NR > 1 {s += $3} END {print s}' sales.csv > total.txt"],
        )
    )

    by_region = Counter()
    for r, _, a in sales:
        by_region[r] += a
    tasks.append(
        task(
            "GroupBySum",
            "data",
            "sales.csv has the header region,product,amount. Write one line 'region,total' per region "
            "with the sum of its amounts, sorted by region name, to totals.csv (no header).",
            {"sales.csv": "region,product,amount\n" + lines(f"{r},{p},{a}" for r, p, a in sales)},
            [
                {
                    "type": "file_equals",
                    "path": "totals.csv",
                    "content": lines(f"{r},{by_region[r]}" for r in sorted(by_region)),
                }
            ],
            [
                "tail -n +2 sales.csv | awk -F, '{s[$1] += $3} END {for (r in s) print r \",\" s[r]}' "
                "| sort > totals.csv"
            ],
        )
    )

    weights = [9, 7, 5, 3, 2, 2, 1, 1, 1, 1]
    vocab = rng.sample(WORDS, len(weights))
    text_words = [w for w, k in zip(vocab, weights) for _ in range(k)]
    rng.shuffle(text_words)
    text = "\n".join(
        " ".join(w.capitalize() if i % 5 == 0 else w for i, w in enumerate(text_words[j : j + 6]))
        for j in range(0, len(text_words), 6)
    )
    top = Counter(w.lower() for w in text.split()).most_common(3)
    tasks.append(
        task(
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
    )

    sizes = {
        "data/a.bin": 1500,
        "data/b.bin": 200,
        "data/sub/c.bin": 4000,
        "data/sub/d.txt": 999,
        "data/e.txt": 1001,
    }
    files = {path: "x" * (size - 1) + "\n" for path, size in sizes.items()}
    tasks.append(
        task(
            "FindLargeFiles",
            "files",
            "List every file under data/ (at any depth) that is larger than 1000 bytes. Write their paths "
            "as data/..., sorted, one per line, to large.txt.",
            files,
            [
                {
                    "type": "file_equals",
                    "path": "large.txt",
                    "content": lines(sorted(p for p, s in sizes.items() if s > 1000)),
                }
            ],
            ["find data -type f -size +1000c | sort > large.txt"],
        )
    )

    project = {
        "project/main.py": "print('hi')\n",
        "project/README.md": "# Project\n",
        "project/lib/util.py": "X = 1\n",
    }
    tasks.append(
        task(
            "ArchiveDirectory",
            "files",
            "Create a gzip-compressed tar archive named backup.tar.gz of the project/ directory, so that "
            "the paths inside it start with project/. Keep project/ itself in place.",
            project,
            [
                {
                    "type": "command",
                    "cmd": "tar -tzf backup.tar.gz | grep -v '/$' | sort",
                    "stdout": lines(sorted(project)),
                    "weight": 2,
                },
                {
                    "type": "python",
                    "code": "import os, tarfile\n"
                    "with tarfile.open('backup.tar.gz', 'r:gz') as tar:\n"
                    "    assert tar.extractfile('project/main.py').read() == b\"print('hi')\\n\"\n"
                    "assert os.path.isfile('project/lib/util.py')",
                },
            ],
            ["tar -czf backup.tar.gz project"],
        )
    )

    tasks.append(
        task(
            "GreetingScript",
            "scripts",
            "Write an executable bash script greet.sh such that ./greet.sh NAME prints exactly "
            "'Hello, NAME!' (NAME may contain spaces when quoted, e.g. ./greet.sh \"Ada Lovelace\").",
            {},
            [
                {"type": "command", "cmd": "test -x greet.sh"},
                {"type": "command", "cmd": "./greet.sh World", "stdout": "Hello, World!"},
                {"type": "command", "cmd": "./greet.sh 'Ada Lovelace'", "stdout": "Hello, Ada Lovelace!"},
            ],
            ["printf '#!/bin/bash\\necho \"Hello, $1!\"\\n' > greet.sh", "chmod +x greet.sh"],
        )
    )

    parts = {f"part{i}.txt": lines(f"chapter {i} line {k}" for k in range(1, 4)) for i in (1, 2, 3)}
    tasks.append(
        task(
            "MergeParts",
            "files",
            "Concatenate part1.txt, part2.txt and part3.txt (in that order) into full.txt, then delete "
            "the three part files.",
            parts,
            [
                {"type": "file_equals", "path": "full.txt", "content": "".join(parts.values()), "weight": 2},
                *({"type": "file_absent", "path": p} for p in parts),
            ],
            ["cat part1.txt part2.txt part3.txt > full.txt", "rm part1.txt part2.txt part3.txt"],
        )
    )

    src = {
        "src/app.py": "",
        "src/util.py": "",
        "src/core/model.py": "",
        "src/core/schema.sql": "",
        "src/web/index.html": "",
        "src/web/style.css": "",
        "src/web/app.js": "",
        "src/web/vendor/lib.js": "",
        "src/docs/guide.md": "",
    }
    ext_counts = Counter(p.rsplit(".", 1)[1] for p in src)
    tasks.append(
        task(
            "CountExtensions",
            "files",
            "Count the files under src/ (at any depth) by file extension. Write one line 'extension count' "
            "per extension (without the dot), sorted by extension, to ext_counts.txt.",
            {p: f"// {p}\n" for p in src},
            [
                {
                    "type": "file_equals",
                    "path": "ext_counts.txt",
                    "content": lines(f"{e} {ext_counts[e]}" for e in sorted(ext_counts)),
                }
            ],
            ["find src -type f | sed 's/.*\\.//' | sort | uniq -c | awk '{print $2, $1}' > ext_counts.txt"],
        )
    )

    scripts = {
        "scripts/build.sh": "echo build\n",
        "scripts/test.sh": "echo test\n",
        "scripts/notes.txt": "n\n",
        "scripts/data.csv": "a,b\n",
    }
    tasks.append(
        task(
            "MakeExecutable",
            "files",
            "Make every .sh file in scripts/ executable (by its owner at least) and no other file there.",
            scripts,
            [
                {
                    "type": "command",
                    "cmd": "find scripts -type f -perm -u+x | sort",
                    "stdout": "scripts/build.sh\nscripts/test.sh",
                }
            ],
            ["chmod u+x scripts/*.sh"],
        )
    )

    items = [rng.choice(WORDS[:12]) for _ in range(25)]
    seen: list[str] = []
    for item in items:
        if item not in seen:
            seen.append(item)
    tasks.append(
        task(
            "DedupeInPlace",
            "text",
            "Remove the duplicate lines of list.txt in place: keep only the first occurrence of each line, "
            "in the original order.",
            {"list.txt": lines(items)},
            [{"type": "file_equals", "path": "list.txt", "content": lines(seen)}],
            ["awk '!seen[$0]++' list.txt > list.tmp && mv list.tmp list.txt"],
        )
    )

    tasks.append(
        task(
            "MakeLayout",
            "files",
            "Create the directories build/bin, build/lib and build/include, and an empty file build/.keep.",
            {},
            [
                {"type": "dir_exists", "path": "build/bin"},
                {"type": "dir_exists", "path": "build/lib"},
                {"type": "dir_exists", "path": "build/include"},
                {"type": "file_equals", "path": "build/.keep", "content": ""},
            ],
            ["mkdir -p build/bin build/lib build/include", "touch build/.keep"],
        )
    )

    customers = {i: name for i, name in enumerate(rng.sample(FIRST_NAMES, 5), start=1)}
    orders = [(100 + k, rng.randint(1, 5), rng.randint(10, 90)) for k in range(20)]
    spent = Counter()
    for _, cid, amount in orders:
        spent[customers[cid]] += amount
    tasks.append(
        task(
            "JoinTables",
            "data",
            "customers.csv has the header id,name and orders.csv the header id,customer_id,amount. Write "
            "one line 'name,total' per customer with the sum of their order amounts, sorted by name, to "
            "spent.csv (no header).",
            {
                "customers.csv": "id,name\n" + lines(f"{i},{n}" for i, n in customers.items()),
                "orders.csv": "id,customer_id,amount\n" + lines(f"{o},{c},{a}" for o, c, a in orders),
            },
            [
                {
                    "type": "file_equals",
                    "path": "spent.csv",
                    "content": lines(f"{n},{spent[n]}" for n in sorted(spent)),
                }
            ],
            [
                "awk -F, 'FNR == 1 {next} NR == FNR {name[$1] = $2; next} {s[name[$2]] += $3} "
                'END {for (n in s) print n "," s[n]}\' customers.csv orders.csv | sort > spent.csv'
            ],
        )
    )

    book = [f"{k:03d} {' '.join(rng.choice(WORDS) for _ in range(5))}" for k in range(1, 61)]
    tasks.append(
        task(
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
    )

    tasks.append(
        task(
            "NumberedScript",
            "scripts",
            "Write an executable script count.sh that takes a number N and prints the numbers 1 to N, "
            "one per line, each followed by ' even' or ' odd' (for example '3 odd'). Then run it with "
            "N=6 and save its output to out.txt.",
            {},
            [
                {"type": "command", "cmd": "./count.sh 4", "stdout": "1 odd\n2 even\n3 odd\n4 even"},
                {"type": "command", "cmd": "./count.sh 1", "stdout": "1 odd"},
                {
                    "type": "file_equals",
                    "path": "out.txt",
                    "content": lines(f"{k} {'even' if k % 2 == 0 else 'odd'}" for k in range(1, 7)),
                },
            ],
            [
                "printf '%s\\n' '#!/bin/bash' 'for ((i = 1; i <= $1; i++)); do' "
                "'  if ((i % 2)); then echo \"$i odd\"; else echo \"$i even\"; fi' 'done' > count.sh",
                "chmod +x count.sh",
                "./count.sh 6 > out.txt",
            ],
        )
    )

    temperatures = {
        f"{city}": [rng.randint(-5, 35) for _ in range(7)] for city in ("oslo", "lima", "rome", "kyiv")
    }
    hottest = max(temperatures, key=lambda c: max(temperatures[c]))
    assert len({max(t) for t in temperatures.values()}) == len(temperatures), "no ties"
    tasks.append(
        task(
            "HottestCity",
            "data",
            "readings/ has one file per city (named CITY.txt) with one temperature per line. Write the name "
            "of the city with the highest single reading (just the name) to hottest.txt, and create "
            "report.txt with one line 'CITY MAX' per city, sorted by city name.",
            {f"readings/{c}.txt": lines(t) for c, t in temperatures.items()},
            [
                {"type": "file_equals", "path": "hottest.txt", "content": hottest, "strip": True},
                {
                    "type": "file_equals",
                    "path": "report.txt",
                    "content": lines(f"{c} {max(temperatures[c])}" for c in sorted(temperatures)),
                },
            ],
            [
                'for f in readings/*.txt; do c=$(basename "$f" .txt); echo "$c $(sort -n "$f" | tail -n 1)"; '
                "done | sort > report.txt",
                "sort -k2,2n report.txt | tail -n 1 | cut -d' ' -f1 > hottest.txt",
            ],
        )
    )
    return tasks


def degenerate_workspaces(files: dict[str, str]) -> dict[str, dict[str, str]]:
    """The workspaces that doing nothing or destroying things leaves: ``{name: {path: text}}``."""
    return {"untouched": dict(files), "emptied": {}, "inputs truncated": dict.fromkeys(files, "")}


def passing_checks(files: dict[str, str], checks: list[dict]) -> set[int]:
    """The indices of ``checks`` that pass in a workspace holding ``files`` (the env's own grader)."""
    from gem_core.envs.terminal.tasks import GRADER, RESULT_MARKER

    with tempfile.TemporaryDirectory() as workspace:
        for path, text in files.items():
            full = Path(workspace, path)
            full.parent.mkdir(parents=True, exist_ok=True)
            full.write_text(text, encoding="utf-8")
        run = subprocess.run(
            [sys.executable, "-c", GRADER],
            input=json.dumps(checks),
            capture_output=True,
            text=True,
            cwd=workspace,
            timeout=120,
        )
    results = json.loads(run.stdout.rsplit(RESULT_MARKER, 1)[1])
    return {i for i, result in enumerate(results) if result["passed"]}


def mark_guards(task: dict) -> None:
    checks = [{k: v for k, v in c.items() if k != "guard"} for c in task["checks"]]
    guards = set()
    for files in degenerate_workspaces(task["files"]).values():
        guards |= passing_checks(files, checks)
    if len(guards) == len(checks):
        sys.exit(f"task {task['name']}: every check passes without doing the task")
    for i, check in enumerate(task["checks"]):
        check.pop("guard", None)
        if i in guards:
            check["guard"] = True


def main() -> None:
    tasks = build(random.Random(20241121))
    names = [t["name"] for t in tasks]
    if len(set(names)) != len(names):
        sys.exit("task names must be unique")
    for t in tasks:
        mark_guards(t)
    out = Path(__file__).with_name("tasks.json")
    out.write_text(json.dumps(tasks, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(tasks)} tasks to {out}")


if __name__ == "__main__":
    main()
