"""play(): a scripted person plays GuessTheNumber in the 'terminal' by reading only what is printed."""

import re

import pytest

from gem_core.play import as_action, play

pytestmark = pytest.mark.timeout(60)  # a broken loop in play() would wait for input forever


def typed(*lines):
    """An input function that types ``lines`` one by one, then ends the input (Ctrl-D)."""
    queue = list(lines)

    def input_fn(prompt):
        if not queue:
            raise EOFError
        return queue.pop(0)

    return input_fn


class BinarySearchPlayer:
    """Reads the printed feedback and answers with plain numbers, as a person would type them."""

    def __init__(self, low, high, after_game=(":h", ":q")):
        self.low, self.high = low, high
        self.printed: list[str] = []
        self.after_game = list(after_game)
        self.guess = None

    def print(self, *args):
        self.printed.append(" ".join(map(str, args)))

    def input(self, prompt):
        last = self.printed[-2] if len(self.printed) >= 2 else ""
        if any("You won!" in line or "Out of turns" in line for line in self.printed):
            if not self.after_game:
                raise EOFError
            return self.after_game.pop(0)
        if self.guess is not None:
            if "is higher" in last:
                self.low = self.guess + 1
            elif "is lower" in last:
                self.high = self.guess - 1
        self.guess = (self.low + self.high) // 2
        return str(self.guess)


@pytest.mark.parametrize("seed", range(5))
def test_a_scripted_person_wins_guess_the_number(seed):
    person = BinarySearchPlayer(1, 50)
    summary = play("game:GuessTheNumber-v1-hard", seed=seed, input_fn=person.input, print_fn=person.print)
    out = "\n".join(person.printed)
    assert summary.success and summary.finished
    assert summary.total_reward == pytest.approx(1.0)  # wrong guesses 0.0, the right one +1.0
    assert "You won!" in out and f"in {summary.turns} turn" in out
    assert "I am thinking of an integer between 1 and 50" in out
    # :h printed every action, boxed automatically, with its reward
    history = [line for line in person.printed if re.match(r"\s*\d+\. \\boxed\{\d+\}  ->  ", line)]
    assert len(history) == summary.turns
    assert history[-1].endswith("+1.000")


def test_restart_history_and_quit():
    printed = []
    lines = typed(":h", "\\boxed{25} after some thought", "hello", ":h", ":r", ":q", "never read")
    summary = play("game:GuessTheNumber-v1-hard", seed=3, input_fn=lines, print_fn=printed.append)
    out = "\n".join(printed)
    assert "No moves yet." in out
    assert "1. \\boxed{25} after some thought" in out  # a typed \boxed action is sent as is
    assert "(format_error)" not in out.split("hello")[0]
    assert "2. \\boxed{hello}  ->  -0.100" in out  # wrapped, then penalised as not an integer
    assert out.count("=== <game:GuessTheNumber-v1-hard> (seed 3) ===") == 2  # the restart
    assert summary.turns == 0 and summary.history == []  # the summary is the restarted episode's


def test_out_of_turns_and_end_of_input():
    printed = []
    lines = typed("1", "2", "3", "4", "5")  # seed 0 hides 7: four wrong guesses use up the turns
    summary = play("game:GuessTheNumber-v1-easy", seed=0, input_fn=lines, print_fn=printed.append)
    assert summary.finished and not summary.success and summary.turns == 4
    assert any("=== Out of turns. Return +0.000 in 4 turns." in p for p in printed)
    assert "The episode is over" in printed[-1]  # the fifth line was not played; then the input ended


def test_format_errors_are_reported():
    printed = []
    lines = typed(":raw no box at all", ":q")
    summary = play("game:GuessTheNumber-v1-easy", seed=0, input_fn=lines, print_fn=printed.append)
    assert summary.total_reward == pytest.approx(-0.1)
    assert any("(format_error)" in p for p in printed)


def test_as_action():
    assert as_action(" 7 ") == "\\boxed{7}"
    assert as_action("I think \\boxed{7}") == "I think \\boxed{7}"
    assert as_action(":raw <search>x</search>") == "<search>x</search>"
