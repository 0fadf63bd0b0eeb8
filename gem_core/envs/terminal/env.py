"""TerminalEnv: the agent works in a sandboxed bash shell until it says the task is done.

Action format (documented in the first observation):

* a command is the last ```bash (or ```sh, ```shell, or untagged) fenced block of the reply, or the
  last ``<bash>...</bash>``, whichever ends later; it runs as ``bash -c`` in the workspace and the
  next observation shows its exit code, stdout and stderr (each clipped to ``max_output_chars``,
  keeping the head and the tail, with a marker saying how much was cut);
* ``<done/>`` (or ``\\boxed{done}``) outside the command ends the episode; a reply may hold a last
  command and ``<done/>``: the command runs first.

Every command is a fresh shell starting in the workspace: files persist through the episode, shell
variables, ``cd`` and background processes do not. The workspace starts with the task's files and
is emptied at the next reset. Isolation is the Python tool's sandbox (``backend.SandboxBackend``):
no network, an unprivileged uid, resource limits, nothing writable but the workspace.

| event                                               | reward                                    |
|-----------------------------------------------------|-------------------------------------------|
| a command                                           | 0.0                                       |
| a reply with neither a command nor ``<done/>``      | -0.1 (counts as a turn)                   |
| ``<done/>``, or the last turn (``max_turns``) used  | the weighted fraction of checks passing   |

``info`` of the final step has ``success`` (every check passed), ``score`` and per-check ``checks``.

Snapshots: the workspace lives outside the Python object, so ``get_state`` includes a tar archive
of it (made inside the sandbox) and ``set_state`` restores that into this env's own workspace;
``spawn(same_state=True)`` therefore gives an independent copy with the same files.

Ids: ``terminal:<Task>-v0`` for each shipped task, ``terminal:Mixed-v0`` draws a task per episode.
"""

from __future__ import annotations

import copy
import re
import shlex
from collections.abc import Callable
from typing import Any

from gem_core.core import Env, StepResult
from gem_core.envs.terminal.backend import SandboxBackend, TerminalBackend
from gem_core.envs.terminal.tasks import TASKS_FILE, grade, load_tasks
from gem_core.parsing import extract_boxed, preview
from gem_core.tools.base import fence
from gem_core.tools.sandbox import ExecResult, SandboxLimits

FORMAT_PENALTY = -0.1
SHELL_FENCES = ("", "bash", "sh", "shell")
_DONE = re.compile(r"<\s*done\s*/?\s*>", re.IGNORECASE)


def find_command(text: str) -> tuple[str, int, int] | None:
    """``(command, start, end)`` of the reply's last shell block (fenced or ``<bash>``); None if none."""
    found = None
    fences = [m.start() for m in re.finditer("```", text)]
    for open_, close in zip(fences[::2], fences[1::2]):  # fences pair up in order
        header_end = text.find("\n", open_ + 3, close)
        if header_end != -1 and text[open_ + 3 : header_end].strip().lower() in SHELL_FENCES:
            found = (text[header_end + 1 : close], open_, close + 3)
    close = text.rfind("</bash>")
    open_ = text.rfind("<bash>", 0, close) if close != -1 else -1
    if open_ != -1 and (found is None or close + 7 > found[2]):
        found = (text[open_ + 6 : close], open_, close + 7)
    if found is None or not found[0].strip():
        return None
    return found


def says_done(text: str) -> bool:
    """Whether ``text`` holds ``<done/>`` or ``\\boxed{done}``."""
    boxed = extract_boxed(text)
    return bool(_DONE.search(text)) or (boxed is not None and boxed.lower() == "done")


def clip(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters: the head and the tail, with a marker between."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters omitted ...]\n{text[len(text) - tail :]}"


class TerminalEnv(Env[str]):
    """One terminal task per episode: ``task`` names it, or None draws one of ``tasks`` per episode.

    ``backend`` builds the workspace backend (default: ``SandboxBackend`` with ``command_timeout``).
    """

    _static_attributes = ("tasks",)

    def __init__(
        self,
        task: str | None = None,
        max_turns: int = 20,
        command_timeout: float = 10.0,
        max_output_chars: int = 4_000,
        tasks_file: str | None = None,
        backend: Callable[[], TerminalBackend] | None = None,
    ):
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        self.tasks = load_tasks(tasks_file or TASKS_FILE)
        names = [t["name"] for t in self.tasks]
        if task is not None and task not in names:
            raise ValueError(f"unknown terminal task {task!r}; choose from {names}")
        self.task_name = task
        self.max_turns = max_turns
        self.command_timeout = command_timeout
        self.max_output_chars = max_output_chars
        self._make_backend = backend
        self._backend: TerminalBackend | None = None
        self.task_index: int | None = None
        self.turn = 0

    @property
    def task(self) -> dict[str, Any] | None:
        """The current episode's task (None before the first reset)."""
        return None if self.task_index is None else self.tasks[self.task_index]

    @property
    def backend(self) -> TerminalBackend:
        """The workspace backend, started on first use."""
        if self._backend is None:
            if self._make_backend is not None:
                self._backend = self._make_backend()
            else:
                limits = SandboxLimits(
                    timeout=self.command_timeout, memory_mb=256, max_output=65_536, max_processes=16
                )
                self._backend = SandboxBackend(limits)
        return self._backend

    # ---- the episode ------------------------------------------------------------------------------
    def reset(self, seed: int | None = None, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        super().reset(seed)
        if self.task_name is None:
            self.task_index = self.rng.randrange(len(self.tasks))
        else:
            self.task_index = next(i for i, t in enumerate(self.tasks) if t["name"] == self.task_name)
        self.turn = 0
        self.backend.start(self.task["files"])
        files = ", ".join(sorted(self.task["files"])) or "(none)"
        obs = (
            "You are working in a bash shell inside a sandbox (no network), in a workspace directory.\n"
            f"Task: {self.task['instruction']}\n"
            f"Files in the workspace: {files}\n\n"
            "To run a command, put it in a ```bash code block (or between <bash> and </bash>); each reply "
            "runs its last block. Every command starts in a fresh shell in the workspace: files persist, "
            "shell variables, `cd` and background processes do not. You will see the exit code, stdout "
            "and stderr. When the task is complete, reply <done/> (it may follow a last command).\n"
            f"{self._turns_left_text()}"
        )
        return obs, {"task": self.task["name"]}

    def step(self, action: str) -> StepResult:
        self.turn += 1
        found = find_command(action)
        done = says_done(action if found is None else action[: found[1]] + action[found[2] :])
        reward, info = 0.0, {}
        if found is not None:
            feedback = self._describe(self.backend.run(found[0], timeout=self.command_timeout))
        elif done:
            feedback = ""
        else:
            feedback = (
                "Invalid format: put a command in a ```bash code block (e.g. ```bash\nls\n```), or reply "
                f"<done/> when the task is complete. Your reply was: {preview(action) or '(empty)'}"
            )
            reward, info = FORMAT_PENALTY, {"format_error": True}
        truncated = not done and self.turn >= self.max_turns
        if done or truncated:
            score, checks = grade(self.backend, self.task["checks"])
            passed = sum(c["passed"] for c in checks)
            ending = "Task finished" if done else "No turns left: the task is over"
            feedback = (
                f"{feedback}\n{ending}. {passed} of {len(checks)} checks pass (score {score:.2f}).".strip()
            )
            reward += score
            info.update(success=passed == len(checks), score=score, checks=checks)
        else:
            feedback = f"{feedback}\n{self._turns_left_text()}"
        return feedback, float(reward), done, truncated, info

    def _describe(self, result: ExecResult) -> str:
        """The command's status first, then its stdout and stderr each in a fence it cannot close
        (``gem_core.tools.base.fence``, control characters escaped): no output can pass for a status."""
        if result.error is not None:
            return f"[the command could not run: {result.error}]"
        lines = []
        if result.truncated:
            lines.append("[the command printed too much and was stopped]")
        elif result.timed_out:
            limit = self.command_timeout if result.time_limit_s is None else result.time_limit_s
            lines.append(f"[timed out after {limit:.3g} s: the command was killed]")
        elif result.signal is not None:
            lines.append(f"[killed by {result.signal}]")
        else:
            lines.append(f"exit code: {result.exit_code}")
        for name, text in (("stdout", result.stdout), ("stderr", result.stderr)):
            if text:
                lines.append(f"--- {name} ---\n{fence(clip(text, self.max_output_chars))}")
        if not result.stdout and not result.stderr:
            lines.append("(no output)")
        return "\n".join(lines)

    def _turns_left_text(self) -> str:
        left = self.max_turns - self.turn
        return f"You have {left} turn{'s' if left != 1 else ''} left."

    def sample_random_action(self) -> str:
        rng = self.action_rng
        if self.task is None:
            return "```bash\nls\n```"
        roll = rng.random()
        if roll < 0.15:
            return "<done/>"
        if roll < 0.35:
            return f"```bash\n{rng.choice(self.task['solution'])}\n```"
        name = shlex.quote(rng.choice(sorted(self.task["files"]) or ["missing.txt"]))
        return rng.choice(
            [
                "```bash\nls -R\n```",
                f"```bash\ncat {name}\n```",
                f"<bash>wc -l {name}</bash>",
                f"```sh\nhead -n {rng.randint(1, 5)} {name}\n```",
                f"```bash\necho {rng.randint(0, 99)} >> scratch.txt\n```",
            ]
        )

    # ---- snapshots and resources -----------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        skip = {"_init_args", "spec", "_backend", "_make_backend", *self._static_attributes}
        state = copy.deepcopy({k: v for k, v in vars(self).items() if k not in skip})
        state["workspace"] = self.backend.snapshot() if self.task is not None else None
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        state = dict(state)
        archive = state.pop("workspace")
        vars(self).update(copy.deepcopy(state))
        if archive is not None:
            self.backend.restore(archive)

    def close(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None
