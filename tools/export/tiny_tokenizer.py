"""Trains the tiny byte-level BPE tokenizer in test_data/tokenizers/tiny_bytelevel/
with HuggingFace `tokenizers` (SmolLM2's layout: individual digits, GPT-2
byte-level split, ChatML special tokens) and records reference encodings of
tricky strings (cases.json) for etwgpu-llm's tokenizer test.

Run: /work/main/.venv-export/bin/python tools/export/tiny_tokenizer.py
"""

import json
import pathlib

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

OUT = pathlib.Path(__file__).resolve().parents[2] / "test_data" / "tokenizers" / "tiny_bytelevel"

CORPUS = [
    "Hello world! It's a small world, isn't it? We'll see, they've said, I'm sure, he'd know.",
    "The quick brown fox jumps over the lazy dog. THE QUICK BROWN FOX.",
    "Numbers: 12345, 3.14159, 2026-11-29, 1,000,000 and 42.",
    "Tabs\tand  double  spaces   and newlines\n\nand more\r\n lines.",
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber stra\u00dfe \u4e2d\u6587 \u65e5\u672c\u8a9e \U0001f600 emoji!",
    "def main():\n    print('hello')\n    return x + y * 2",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\nHello! How can I help?<|im_end|>\n",
] * 20

CASES = [
    "Hello world!",
    "It's a small world, isn't it? We'll see; they've said I'm sure he'd know.",
    "Numbers 12345 and 3.14 and x2y",
    "  leading spaces, trailing spaces   ",
    "Tabs\tand\n\nnewlines\r\n  indented",
    "Caf\u00e9 na\u00efve \u4e2d\u6587 \U0001f600!",
    "unseen words: zyxwvut qqq",
    "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "a<|im_end|>b<|endoftext|>",
    "",
]


def main():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(CORPUS, trainer)
    OUT.mkdir(parents=True, exist_ok=True)
    tok.save(str(OUT / "tokenizer.json"))
    cases = [{"text": t, "ids": tok.encode(t).ids} for t in CASES]
    for c in cases:
        assert tok.decode(c["ids"], skip_special_tokens=False) == c["text"], c
    (OUT / "cases.json").write_text(json.dumps(cases, ensure_ascii=False, indent=1) + "\n")


if __name__ == "__main__":
    main()
