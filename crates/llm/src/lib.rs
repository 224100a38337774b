//! LLM generation on etwgpu: KV cache, SDPA decode, sampling, tokenizer (filled in by the LLM work).
