"""``etwgpu.Llm`` on the tiny Llama fixtures: greedy generation reproduces
the tokens recorded from PyTorch eager (each fixture's decode calls feed the
eager argmax of the call before), streaming as it goes; text prompts
stream text; bad prompts and settings raise InputError."""

import numpy as np
import pytest

import etwgpu
from conftest import FIXTURES, TOKENIZERS


def recorded(name):
    """The prompt and the three greedy tokens of fixture ``name``."""
    d = FIXTURES / name
    prompt = [int(t) for t in np.load(d / "call0.in0.npy").reshape(-1)]
    greedy = [int(np.load(d / f"call{i}.in0.npy").reshape(-1)[0]) for i in (1, 2, 3)]
    return prompt, greedy


@pytest.mark.parametrize("name", ["llama_tiny_fp32", "llama_tiny_q4", "llama_tiny_8da4w"])
def test_greedy_tokens_match_eager(rt, name):
    prompt, greedy = recorded(name)
    llm = etwgpu.Llm(FIXTURES / name / "model.pte", runtime=rt)
    assert llm.metadata["max_context_len"] == 32 and llm.metadata["vocab_size"] == 128
    stream = llm.generate(prompt, max_new_tokens=3, stop_at_eos=False)
    assert stream.stats is None
    got = list(stream)
    assert got == greedy, f"{name}: greedy tokens vs the fixture's eager argmax"
    stats = llm.last_stream.stats
    assert stats["tokens"] == greedy and stats["prompt_tokens"] == len(prompt)
    assert stats["generated_tokens"] == 3 and stats["decode_steps"] == 2
    # Each call starts afresh: the same tokens again.
    assert list(llm.generate(prompt, max_new_tokens=3, stop_at_eos=False)) == greedy


def test_int8_activations_keep_the_tiny_q4_greedy_tokens(rt):
    prompt, greedy = recorded("llama_tiny_q4")
    plain = etwgpu.Llm(FIXTURES / "llama_tiny_q4" / "model.pte", runtime=rt, int8_activations=False)
    assert plain.metadata["int8_activations"] is False
    llm = etwgpu.Llm(FIXTURES / "llama_tiny_q4" / "model.pte", runtime=rt, int8_activations=True)
    assert llm.metadata["int8_activations"] is True
    assert list(llm.generate(prompt, max_new_tokens=3, stop_at_eos=False)) == greedy


@pytest.fixture(scope="module")
def tiny(rt):
    return etwgpu.Llm(
        FIXTURES / "llama_tiny_fp32" / "model.pte", tokenizer=TOKENIZERS / "tiny_bytelevel" / "tokenizer.json", runtime=rt
    )


def test_text_prompt_streams_the_decoded_tokens(tiny):
    text = "12345"
    ids = tiny.encode(text)
    assert ids and max(ids) < 128, ids
    pieces = list(tiny.generate(text, max_new_tokens=6, stop_at_eos=False))
    tokens = tiny.last_stream.stats["tokens"]
    assert tokens == list(tiny.generate(ids, max_new_tokens=6, stop_at_eos=False))
    assert "".join(pieces) == tiny.decode(tokens)
    assert all(isinstance(p, str) and p for p in pieces)


def test_sampling_is_seeded(tiny):
    prompt, _ = recorded("llama_tiny_fp32")
    a = list(tiny.generate(prompt, max_new_tokens=8, temperature=1.0, seed=3, stop_at_eos=False))
    b = list(tiny.generate(prompt, max_new_tokens=8, temperature=1.0, seed=3, stop_at_eos=False))
    assert a == b and len(a) == 8 and all(0 <= t < 128 for t in a)


def test_context_overflow_is_an_input_error(tiny):
    with pytest.raises(etwgpu.InputError, match="exceeds the context of 32"):
        list(tiny.generate([1, 2, 3], max_new_tokens=32))


def test_bad_prompts_and_settings(rt, tiny):
    with pytest.raises(etwgpu.InputError, match="empty"):
        list(tiny.generate([], max_new_tokens=2))
    with pytest.raises(etwgpu.InputError, match="outside the vocabulary of 128"):
        list(tiny.generate([500], max_new_tokens=2))
    with pytest.raises(etwgpu.InputError, match="temperature"):
        tiny.generate([1], temperature=-1.0)
    with pytest.raises(etwgpu.InputError, match="top_p"):
        tiny.generate([1], top_p=0.0)
    with pytest.raises(etwgpu.InputError, match="text prompt"):
        tiny.generate([1], chat=True)
    no_tokenizer = etwgpu.Llm(FIXTURES / "llama_tiny_q4" / "model.pte", runtime=rt)
    with pytest.raises(etwgpu.InputError, match="needs a tokenizer"):
        no_tokenizer.generate("hello")


def test_a_program_without_llm_metadata_is_a_format_error(rt):
    with pytest.raises(etwgpu.FormatError, match="get_max_seq_len"):
        etwgpu.Llm(FIXTURES / "mlp" / "model.pte", runtime=rt)
