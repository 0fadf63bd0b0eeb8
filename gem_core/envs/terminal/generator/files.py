"""The terminal tasks of the category "files": create, rename, find, archive and delete files."""

from __future__ import annotations

from collections import Counter
from typing import Any

from gem_core.envs.terminal.generator.parts import lines, task


def create_file() -> dict[str, Any]:
    return task(
        "CreateFile",
        "files",
        "Create a file named hello.txt that contains exactly one line: Hello, terminal!",
        {"README": "Your workspace. Create hello.txt here.\n"},
        [{"type": "file_equals", "path": "hello.txt", "content": "Hello, terminal!\n"}],
        ["echo 'Hello, terminal!' > hello.txt"],
    )


def rename_extensions() -> dict[str, Any]:
    notes = {f"notes/{w}.txt": f"note about {w}\n" for w in ("alpha", "beta", "gamma")}
    return task(
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


def find_large_files() -> dict[str, Any]:
    sizes = {
        "data/a.bin": 1500,
        "data/b.bin": 200,
        "data/sub/c.bin": 4000,
        "data/sub/d.txt": 999,
        "data/e.txt": 1001,
    }
    files = {path: "x" * (size - 1) + "\n" for path, size in sizes.items()}
    return task(
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


def archive_directory() -> dict[str, Any]:
    project = {
        "project/main.py": "print('hi')\n",
        "project/README.md": "# Project\n",
        "project/lib/util.py": "X = 1\n",
    }
    return task(
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


def merge_parts() -> dict[str, Any]:
    parts = {f"part{i}.txt": lines(f"chapter {i} line {k}" for k in range(1, 4)) for i in (1, 2, 3)}
    return task(
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


def count_extensions() -> dict[str, Any]:
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
    return task(
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


def make_executable() -> dict[str, Any]:
    scripts = {
        "scripts/build.sh": "echo build\n",
        "scripts/test.sh": "echo test\n",
        "scripts/notes.txt": "n\n",
        "scripts/data.csv": "a,b\n",
    }
    return task(
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


def make_layout() -> dict[str, Any]:
    return task(
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
