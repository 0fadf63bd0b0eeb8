"""GuessTheNumber (our design): binary search wins, and each guess says whether it used the hints."""

from gem_core import make


def test_binary_search_wins_within_log2_turns_and_is_always_consistent():
    for seed in range(30):
        env = make("game:GuessTheNumber-v1-hard", seed=seed)  # 1-50 in 7 turns
        env.reset(seed=seed)
        low, high, turns = 1, 50, 0
        while True:
            guess = (low + high) // 2
            _, reward, terminated, truncated, info = env.step(f"\\boxed{{{guess}}}")
            turns += 1
            assert info["consistent_with_hints"] is True
            if terminated or truncated:
                break
            low, high = (guess + 1, high) if "higher" in _ else (low, guess - 1)
        assert reward == 1.0 and info["success"] and turns <= 6


def test_a_guess_the_hints_rule_out_is_flagged():
    for seed in range(20):
        env = make("game:GuessTheNumber-v1-easy", seed=seed)
        env.reset(seed=seed)
        target = env.unwrapped.target
        if target in (4, 5, 6):
            continue
        *_, info = env.step("\\boxed{5}")
        assert info["consistent_with_hints"] is True
        ruled_out = 4 if target > 5 else 6  # the hint says the number is on the other side
        *_, info = env.step(f"\\boxed{{{ruled_out}}}")
        assert info["consistent_with_hints"] is False and not info.get("invalid_move")
        *_, info = env.step(f"\\boxed{{{target}}}")
        assert info["consistent_with_hints"] is True and info["success"]


def test_invalid_moves_carry_no_consistency_flag():
    env = make("game:GuessTheNumber-v1-easy", seed=1)
    env.reset(seed=1)
    *_, info = env.step("\\boxed{99}")
    assert "consistent_with_hints" not in info and info["invalid_move"]
