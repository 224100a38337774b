"""Tiny Llama programs through ExecuTorch's own `export_llama` with `--vulkan`.

The `.pte` comes from the command-line tool, run as a subprocess with the flags
recorded in the manifest. The goldens come from the same module the tool
exports, rebuilt in this process by the tool's own preparation step (checkpoint
load, source transforms, torchao quantization) and run eagerly with its own KV
cache: prefill, then greedy decode steps that feed back the eager argmax.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

import torch

from fixture_io import Call, FixtureResult

PARAMS = {
    "dim": 64,
    "n_layers": 2,
    "n_heads": 4,
    "n_kv_heads": 2,
    "hidden_dim": 128,
    "vocab_size": 128,
    "norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "use_scaled_rope": False,
}
MAX_LEN = 32
PREFILL_LEN = 5
DECODE_STEPS = 3
CHECKPOINT_SEED = 1234
PROMPT_SEED = 4321   # one prompt for all variants, so their logits can be compared

BASE_FLAGS = [
    "-kv", "--use_sdpa_with_kv_cache", "--vulkan", "-d", "fp32",
    "--max_seq_length", str(MAX_LEN), "--max_context_length", str(MAX_LEN),
]

VARIANTS = {
    "llama_tiny_fp32": ([], "fp32 weights"),
    "llama_tiny_q4": (["-qmode", "4w", "-G", "32", "-E", "4,32"],
                      "4-bit group-32 weight-only linears (et_vk.linear_q4gsw) and a 4-bit "
                      "group-32 embedding (et_vk.embedding_q4gsw)"),
    "llama_tiny_8da4w": (["-qmode", "8da4w", "-G", "32"],
                         "8-bit dynamic per-row activations x 4-bit group-32 weights "
                         "(torchao.choose_qparams_affine + et_vk.linear_dq8ca_q4gsw)"),
    "llama_tiny_fp16": (["--vulkan-force-fp16"],
                        "fp32 weights exported with force_fp16: every tensor on the device, KV "
                        "caches included, is float16; method I/O stays float32"),
    "llama_tiny_q4_fp16": (["-qmode", "4w", "-G", "32", "-E", "4,32", "--vulkan-force-fp16"],
                           "llama_tiny_q4's 4-bit group-32 linears and embedding, exported with "
                           "force_fp16: activations, scales and KV caches are float16 on the "
                           "device; method I/O stays float32"),
    "llama_tiny_8da4w_fp16": (["-qmode", "8da4w", "-G", "32", "--vulkan-force-fp16"],
                              "llama_tiny_8da4w's int8 dynamic activations x 4-bit group-32 "
                              "weights, exported with force_fp16: activations, scales and KV "
                              "caches are float16 on the device; method I/O stays float32"),
    "llama_tiny_static": (["--disable_dynamic_shape"],
                          "llama_tiny_fp32's weights exported with dynamic shapes disabled: a "
                          "static forward(tokens int64 [1,1], input_pos int64 [1]), so the prompt "
                          "is fed one token at a time"),
}

# Variants whose forward takes one token per call (no dynamic sequence length).
SINGLE_TOKEN = {"llama_tiny_static"}


def make_checkpoint(path: Path) -> None:
    """Seeded random weights with non-trivial norm scales, saved as a state dict."""
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    torch.manual_seed(CHECKPOINT_SEED)
    model = construct_transformer(
        ModelArgs(max_seq_len=MAX_LEN, max_context_len=MAX_LEN, **PARAMS))
    sd = model.state_dict()
    g = torch.Generator().manual_seed(CHECKPOINT_SEED + 1)
    with torch.no_grad():
        for key, value in sd.items():
            if key.endswith("norm.weight"):
                value.copy_(1.0 + 0.2 * torch.randn(value.shape, generator=g))
    torch.save({k: v.contiguous() for k, v in sd.items()}, path)


def _llm_config(flags: list[str]):
    from executorch.examples.models.llama.export_llama_lib import build_args_parser
    from executorch.extension.llm.export.config.llm_config import LlmConfig

    return LlmConfig.from_args(build_args_parser().parse_args(flags))


def eager_module(flags: list[str]) -> torch.nn.Module:
    """The module export_llama lowers, before torch.export: quantized, KV cache zeroed."""
    from executorch.examples.models.llama.export_llama_lib import _prepare_for_llama_export

    return _prepare_for_llama_export(_llm_config(flags)).model.eval()


def reference_module(ckpt: Path) -> torch.nn.Module:
    """The plain example Transformer with its own (non-custom-op) KV cache."""
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    model = construct_transformer(ModelArgs(
        max_seq_len=MAX_LEN, max_context_len=MAX_LEN, max_batch_size=1, use_kv_cache=True,
        use_sdpa_with_kv_cache_op=False, enable_dynamic_shape=True, **PARAMS))
    model.load_state_dict(torch.load(ckpt), strict=False)
    return model.eval()


def greedy_calls(model: torch.nn.Module, prompt: torch.Tensor,
                 single_token: bool = False) -> list[Call]:
    """Prefill (in one call, or one call per prompt token when
    `single_token`), then greedy decode steps feeding back the argmax."""
    calls = []
    pos = 0
    feeds = list(prompt.split(1, dim=1)) if single_token else [prompt]
    with torch.no_grad():
        while len(calls) < len(feeds) + DECODE_STEPS:
            tokens = feeds[len(calls)] if len(calls) < len(feeds) else next_token
            input_pos = torch.tensor([pos], dtype=torch.int64)
            logits = model(tokens.clone(), {"input_pos": input_pos.clone()})
            if isinstance(logits, tuple):
                logits = logits[0]
            calls.append(Call(inputs=[tokens.clone(), input_pos], outputs=[logits.clone()]))
            pos += tokens.shape[1]
            next_token = logits.argmax(dim=-1).reshape(1, 1).to(torch.int64)
    return calls


def replay(model: torch.nn.Module, calls: list[Call]) -> float:
    """Runs the recorded inputs through another module; max |logit diff|."""
    worst = 0.0
    with torch.no_grad():
        for call in calls:
            out = model(call.inputs[0].clone(), {"input_pos": call.inputs[1].clone()})
            if isinstance(out, tuple):
                out = out[0]
            worst = max(worst, float((out - call.outputs[0]).abs().max()))
    return worst


def llama_fixture(name: str, verify: bool = True) -> FixtureResult:
    extra, what = VARIANTS[name]
    with tempfile.TemporaryDirectory(prefix=f"etwgpu_{name}_") as tmp:
        tmp_path = Path(tmp)
        ckpt, params = tmp_path / "ckpt.pth", tmp_path / "params.json"
        make_checkpoint(ckpt)
        params.write_text(json.dumps(PARAMS))
        flags = ["-c", str(ckpt), "-p", str(params), *BASE_FLAGS, *extra]
        out_name = tmp_path / "model.pte"
        cmd = [sys.executable, "-m", "executorch.examples.models.llama.export_llama",
               *flags, "--output_name", str(out_name)]
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        if proc.returncode != 0 or not out_name.exists():
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
            raise RuntimeError(f"export_llama failed ({proc.returncode}):\n{tail}")
        pte = out_name.read_bytes()

        g = torch.Generator().manual_seed(PROMPT_SEED)
        prompt = torch.randint(0, PARAMS["vocab_size"], (1, PREFILL_LEN), generator=g,
                               dtype=torch.int64)
        single = name in SINGLE_TOKEN
        calls = greedy_calls(eager_module(flags), prompt, single)
        notes = []
        if verify:
            # A second, independently built copy must replay the same logits.
            notes.append(f"rebuilt exported module replays goldens: max |diff| "
                         f"{replay(eager_module(flags), calls):.3g}")
            if not extra or extra == ["--disable_dynamic_shape"]:
                notes.append(f"plain Transformer (no custom ops) vs goldens: max |diff| "
                             f"{replay(reference_module(ckpt), calls):.3g}")
        tokens = [int(c.inputs[0].reshape(-1)[-1]) for c in calls[-DECODE_STEPS:]]
        notes.append(f"prompt {prompt.tolist()[0]}, greedy tokens {tokens}")

    recorded = ["-c", "ckpt.pth", "-p", "params.json", *BASE_FLAGS, *extra]
    export = {
        "api": "python -m executorch.examples.models.llama.export_llama",
        "flags": recorded,
        "params": PARAMS,
        "checkpoint": f"random, torch.manual_seed({CHECKPOINT_SEED}) then "
                      "construct_transformer default init; norm weights 1 + 0.2*N(0,1)",
        "prompt_seed": PROMPT_SEED,
    }
    prefill = (f"{PREFILL_LEN} single-token prefill calls (input_pos 0..{PREFILL_LEN - 1})"
               if single else f"prefill of {PREFILL_LEN} tokens at input_pos 0")
    description = (
        f"ExecuTorch's Llama example, dim {PARAMS['dim']}, {PARAMS['n_layers']} layers, "
        f"{PARAMS['n_heads']} heads / {PARAMS['n_kv_heads']} KV heads, hidden "
        f"{PARAMS['hidden_dim']}, vocab {PARAMS['vocab_size']}, context {MAX_LEN}; {what}. "
        f"forward(tokens int64 [1,{1 if single else 'S'}], input_pos int64 [1]) -> logits "
        f"float32 [1,vocab] of the last token; KV cache inside the delegate. Calls in order "
        f"on one loaded method: {prefill}, then {DECODE_STEPS} single-token "
        f"decode steps (input_pos {PREFILL_LEN}..) feeding the eager argmax.")
    return FixtureResult(name=name, description=description, export=export, pte=pte,
                         calls=calls, stateful=True, notes=notes)


def _bind(name: str) -> Callable[..., FixtureResult]:
    return lambda verify=True: llama_fixture(name, verify)


FIXTURES: dict[str, Callable[..., FixtureResult]] = {n: _bind(n) for n in VARIANTS}
