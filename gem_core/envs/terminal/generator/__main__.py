"""``python -m gem_core.envs.terminal.generator``: rewrite the shipped terminal tasks."""

from gem_core.envs.terminal.generator import write

if __name__ == "__main__":
    write()
