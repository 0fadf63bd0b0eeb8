"""The terminal tasks of the category "scripts": write an executable script and run it."""

from __future__ import annotations

from typing import Any

from gem_core.envs.terminal.generator.parts import lines, task


def greeting_script() -> dict[str, Any]:
    return task(
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


def numbered_script() -> dict[str, Any]:
    return task(
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
