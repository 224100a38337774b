"""PyTorch peer for etwgpu's LLM numbers: llama-bench-style prefill and decode speed.

Runs on the lent GPU machine (torch and numpy only: no network, no Rust, no
transformers) in the same call as our Rust bench binary, so both are measured
on the same GPU on the same day.

Model: a Llama in plain PyTorch (RMSNorm, rotate-half RoPE without scaling,
GQA attention over a static preallocated KV cache, SwiGLU FFN, tied or untied
output head), random weights (normal * 0.02 from --seed, norm weights 1) in
fp16 or bf16, batch 1. Only the last position's logits are computed, as in
llama.cpp and our ExecuTorch export. Configs: `llama32_1b`, `smollm2_135m`
(the real shapes) and `tiny` (for CPU tests).

Measured, for each mode (`eager`; `compile` = torch.compile(mode=
"reduce-overhead", dynamic=True): Inductor plus CUDA graphs, one compilation
per phase, paid by the phase's first cell, and one CUDA graph per shape):
- `ppP`: one forward over a P-token prompt at positions 0..P-1. Prefill
  attends only to the prompt itself (causal SDPA), so the cache's old
  contents do not matter: it is a prefill from an empty cache.
- `tgN @ dC`: the cache is filled with C tokens (one eager prefill, not
  timed), then N single-token steps at positions C..C+N-1, each feeding its
  greedy argmax to the next, with no host sync between steps. The position is
  a device tensor, K/V are written with index_copy_ and attention reads
  cache[:kv_len] with kv_len = C+N rounded up to 256 and a mask for the
  positions not yet written, so all steps of a cell have the same shapes (one
  CUDA graph per cell); eager runs the same code.
Each cell: --warmup untimed calls (the first one's time, which includes any
compilation, is kept as `first_call_s`), then the median of --repeats timed
calls with a device synchronize before and after each. Decode reports tokens/s,
weight bytes read per token / time per token, and the K/V bytes a step needs on
average. Peak memory (torch.cuda.max_memory_allocated, reset before each
mode/phase group; it includes the weights and the cache) is reported per group.

A cell that raises is reported as "error: <reason>" and the run goes on;
cells that would start after --budget-s seconds (counted from the start,
model load included; a cell already started runs to its end), or need more
positions than --max-seq-len, are reported as skipped. Groups run in the
order eager prefill, eager decode, compile decode, compile prefill (the
riskiest last), and the JSON is rewritten after every cell, so a crash keeps
what was measured.

Usage:
  python3 tools/device/peers.py --config llama32_1b --dtype bf16 --modes eager,compile \
      --prompts 128,512 --contexts 128,8192 --decode-tokens 128 --json OUT.json
  python3 tools/device/peers.py --config tiny --device cpu --prompts 16 --contexts 16
"""
import argparse
import dataclasses
import json
import os
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn


@dataclasses.dataclass(frozen=True)
class Config:
    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    vocab: int
    rope_theta: float
    norm_eps: float
    tied: bool

    @property
    def head_dim(self):
        return self.dim // self.n_heads


CONFIGS = {
    "llama32_1b": Config(2048, 16, 32, 8, 8192, 128256, 500000.0, 1e-5, tied=True),
    "smollm2_135m": Config(576, 30, 9, 3, 1536, 49152, 100000.0, 1e-5, tied=True),
    "tiny": Config(64, 2, 4, 2, 128, 512, 10000.0, 1e-5, tied=False),
}
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
# decode attends to cache[:kv_len], kv_len a multiple of this: few shapes, aligned masks
KV_ALIGN = 256


class RMSNorm(nn.Module):
    def __init__(self, dim, eps, factory):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, **factory))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


def rope(x, cos, sin):
    """Rotate-half RoPE; x [1, t, heads, head_dim], cos/sin [t, 1, head_dim]."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    def __init__(self, cfg, max_seq, factory):
        super().__init__()
        self.n_heads, self.n_kv, self.head_dim = cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
        self.wq = nn.Linear(cfg.dim, cfg.n_heads * cfg.head_dim, bias=False, **factory)
        self.wk = nn.Linear(cfg.dim, cfg.n_kv_heads * cfg.head_dim, bias=False, **factory)
        self.wv = nn.Linear(cfg.dim, cfg.n_kv_heads * cfg.head_dim, bias=False, **factory)
        self.wo = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.dim, bias=False, **factory)
        # position-major, so cache[:, :kv_len] is contiguous for every kv_len
        for name in ("k_cache", "v_cache"):
            cache = torch.zeros(1, max_seq, cfg.n_kv_heads, cfg.head_dim, **factory)
            torch._dynamo.mark_static_address(cache)  # CUDA graphs may then mutate it in place
            self.register_buffer(name, cache, persistent=False)

    def forward(self, x, cos, sin, input_pos, mask, kv_len):
        t = x.shape[1]
        q = rope(self.wq(x).view(1, t, self.n_heads, self.head_dim), cos, sin)
        k = rope(self.wk(x).view(1, t, self.n_kv, self.head_dim), cos, sin)
        v = self.wv(x).view(1, t, self.n_kv, self.head_dim)
        self.k_cache.index_copy_(1, input_pos, k)
        self.v_cache.index_copy_(1, input_pos, v)
        group = self.n_heads // self.n_kv
        if t > 1:  # prefill from position 0: causal attention over the prompt alone
            k = k.transpose(1, 2).repeat_interleave(group, dim=1)
            v = v.transpose(1, 2).repeat_interleave(group, dim=1)
            y = F.scaled_dot_product_attention(q.transpose(1, 2), k, v, is_causal=True).transpose(1, 2)
        else:  # decode: query head h uses KV head h // group, so the group's heads are its rows
            qg = q.view(1, self.n_kv, group, self.head_dim)
            k = self.k_cache[:, :kv_len].transpose(1, 2)
            v = self.v_cache[:, :kv_len].transpose(1, 2)
            y = F.scaled_dot_product_attention(qg, k, v, attn_mask=mask)
        return self.wo(y.reshape(1, t, -1))


class FeedForward(nn.Module):
    def __init__(self, cfg, factory):
        super().__init__()
        self.w1 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False, **factory)
        self.w3 = nn.Linear(cfg.dim, cfg.ffn_dim, bias=False, **factory)
        self.w2 = nn.Linear(cfg.ffn_dim, cfg.dim, bias=False, **factory)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, cfg, max_seq, factory):
        super().__init__()
        self.attention_norm = RMSNorm(cfg.dim, cfg.norm_eps, factory)
        self.attention = Attention(cfg, max_seq, factory)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps, factory)
        self.feed_forward = FeedForward(cfg, factory)

    def forward(self, x, cos, sin, input_pos, mask, kv_len):
        x = x + self.attention(self.attention_norm(x), cos, sin, input_pos, mask, kv_len)
        return x + self.feed_forward(self.ffn_norm(x))


class Transformer(nn.Module):
    def __init__(self, cfg, max_seq, dtype, device):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.tied = cfg.tied
        self.tok_embeddings = nn.Embedding(cfg.vocab, cfg.dim, **factory)
        self.layers = nn.ModuleList(Block(cfg, max_seq, factory) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps, factory)
        self.output = None if cfg.tied else nn.Linear(cfg.dim, cfg.vocab, bias=False, **factory)
        hd = cfg.head_dim
        inv_freq = 1.0 / cfg.rope_theta ** (torch.arange(0, hd, 2, device=device, dtype=torch.float32) / hd)
        angles = torch.outer(torch.arange(max_seq, device=device, dtype=torch.float32), inv_freq)
        angles = torch.cat([angles, angles], dim=-1)
        self.register_buffer("cos", angles.cos().to(dtype), persistent=False)
        self.register_buffer("sin", angles.sin().to(dtype), persistent=False)
        self.register_buffer("positions", torch.arange(max_seq, device=device), persistent=False)

    def forward(self, tokens, input_pos, kv_len=None):
        """Logits [1, vocab] of the last token. tokens [1, t], input_pos [t] (int64, on the
        device). t > 1 is a prefill from position 0; t == 1 a decode step attending to
        cache[:kv_len], positions after input_pos masked out."""
        x = self.tok_embeddings(tokens)
        cos, sin = self.cos[input_pos].unsqueeze(1), self.sin[input_pos].unsqueeze(1)
        mask = None
        if tokens.shape[1] == 1:
            visible = self.positions[:kv_len] <= input_pos
            mask = torch.where(visible, 0.0, float("-inf")).to(x.dtype).view(1, 1, 1, kv_len)
        for layer in self.layers:
            x = layer(x, cos, sin, input_pos, mask, kv_len)
        head = self.tok_embeddings.weight if self.tied else self.output.weight
        return F.linear(self.norm(x[:, -1]), head)


def build_model(cfg, max_seq, dtype, device, seed):
    model = Transformer(cfg, max_seq, dtype, device).requires_grad_(False)
    gen = torch.Generator(device=device).manual_seed(seed)
    for p in model.parameters():
        if p.dim() > 1:
            p.normal_(0.0, 0.02, generator=gen)
    return model


def prefill_call(model, tokens, input_pos):
    return model(tokens, input_pos)


def decode_step(model, token, input_pos, kv_len):
    return model(token, input_pos, kv_len).argmax(-1, keepdim=True)


def decode_loop(step, model, first_token, start_pos, n, kv_len, compiled):
    """n greedy steps from start_pos (a [1] device tensor); returns the n tokens, on the device."""
    token, pos, out = first_token, start_pos.clone(), []
    for _ in range(n):
        if compiled:
            torch.compiler.cudagraph_mark_step_begin()
        token = step(model, token, pos, kv_len).clone()  # a CUDA graph reuses its output buffer
        out.append(token)
        pos += 1
    return torch.cat(out).view(-1)


def round_up(n, m):
    return (n + m - 1) // m * m


def short_error(e):
    lines = str(e).strip().splitlines()
    return f"error: {type(e).__name__}: {lines[0][:160] if lines else ''}".rstrip(": ")


def parse_list(text):
    return [int(x) for x in text.split(",") if x]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", choices=sorted(CONFIGS), default="llama32_1b")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    p.add_argument("--device", default="cuda")
    p.add_argument("--modes", default="eager,compile", help="comma list of eager, compile")
    p.add_argument("--prompts", type=parse_list, default=[128, 512, 1024, 2048, 4096, 8192],
                   help="prefill lengths (empty: no prefill cells)")
    p.add_argument("--contexts", type=parse_list, default=[128, 512, 1024, 2048, 4096, 8192],
                   help="decode contexts (0 allowed; empty: no decode cells)")
    p.add_argument("--decode-tokens", type=int, default=128)
    p.add_argument("--warmup", type=int, default=2, help="untimed calls per cell (>= 1)")
    p.add_argument("--repeats", type=int, default=5, help="timed calls per cell, median reported (>= 3)")
    p.add_argument("--max-seq-len", type=int, default=0,
                   help="cache positions; 0: fit the largest cell (cells that do not fit are skipped)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget-s", type=float, default=240.0, help="no cell starts after this many seconds")
    p.add_argument("--json", help="write all results and raw timings here")
    args = p.parse_args()
    args.modes = args.modes.split(",")
    if not set(args.modes) <= {"eager", "compile"}:
        p.error(f"--modes: unknown mode in {args.modes}")
    if args.warmup < 1 or args.repeats < 3 or args.decode_tokens < 1:
        p.error("need --warmup >= 1, --repeats >= 3, --decode-tokens >= 1")
    if min(args.prompts, default=1) < 1 or min(args.contexts, default=0) < 0:
        p.error("prompt lengths must be >= 1, contexts >= 0")
    if not args.prompts and not args.contexts:
        p.error("nothing to measure: --prompts and --contexts are both empty")
    return args


class Bench:
    """The model, the plan of cells and the results, written to JSON after every cell."""

    def __init__(self, args):
        self.args, self.started = args, time.perf_counter()
        self.cfg, self.dtype, self.device = CONFIGS[args.config], DTYPES[args.dtype], torch.device(args.device)
        self.cuda = self.device.type == "cuda"
        needed = max([*args.prompts, *(c + args.decode_tokens for c in args.contexts)])
        self.max_seq = args.max_seq_len or round_up(needed, KV_ALIGN)
        self.model = build_model(self.cfg, self.max_seq, self.dtype, self.device, args.seed)
        elem = torch.finfo(self.dtype).bits // 8
        weight_bytes = sum(p.numel() * p.element_size() for p in self.model.parameters())
        emb_bytes = self.model.tok_embeddings.weight.numel() * elem
        self.sync()
        self.results = {
            "config": args.config, "model": dataclasses.asdict(self.cfg), "dtype": args.dtype,
            "device": torch.cuda.get_device_name(self.device) if self.cuda else str(self.device),
            "torch": torch.__version__, "args": vars(args), "max_seq_len": self.max_seq,
            "params": sum(p.numel() for p in self.model.parameters()), "weight_bytes": weight_bytes,
            # an untied embedding table is looked up (one row), not read whole
            "weight_read_bytes_per_token": weight_bytes - (0 if self.cfg.tied else emb_bytes),
            "kv_bytes_per_position": self.cfg.n_layers * 2 * self.cfg.n_kv_heads * self.cfg.head_dim * elem,
            "allocated_after_load_bytes": torch.cuda.memory_allocated(self.device) if self.cuda else None,
            "load_s": time.perf_counter() - self.started,
            "groups": [], "cells": [],
        }

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def timed(self, fn):
        self.sync()
        t0 = time.perf_counter()
        fn()
        self.sync()
        return time.perf_counter() - t0

    def random_tokens(self, n):
        """The same tokens for the same n, so eager and compile cells get the same prompts."""
        gen = torch.Generator(device=self.device).manual_seed(self.args.seed + 1)
        return torch.randint(self.cfg.vocab, (1, n), device=self.device, generator=gen)

    def save(self):
        if self.args.json:
            tmp = self.args.json + ".tmp"
            with open(tmp, "w") as f:
                json.dump(self.results, f, indent=1)
            os.replace(tmp, self.args.json)

    def run(self):
        order = [("eager", "prefill"), ("eager", "decode"), ("compile", "decode"), ("compile", "prefill")]
        for mode, phase in order:
            lengths = self.args.prompts if phase == "prefill" else self.args.contexts
            if mode in self.args.modes and lengths:
                self.run_group(mode, phase, lengths)
        self.save()

    def run_group(self, mode, phase, lengths):
        compiled = mode == "compile"
        fn = prefill_call if phase == "prefill" else decode_step
        if compiled:
            # dynamic: one compilation for all prompt lengths / kv_lens; CUDA graphs are
            # still recorded per shape
            fn = torch.compile(fn, mode="reduce-overhead", fullgraph=True, dynamic=True)
            skips_before = torch._dynamo.utils.counters["inductor"]["cudagraph_skips"]
        if self.cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.device)
        for length in lengths:
            cell = {"mode": mode, "phase": phase, "length": length}
            if phase == "decode":
                cell["decode_tokens"] = self.args.decode_tokens
            self.results["cells"].append(cell)
            needed = length + (self.args.decode_tokens if phase == "decode" else 0)
            if needed > self.max_seq:
                cell["status"] = f"skipped: needs {needed} positions, --max-seq-len is {self.max_seq}"
            elif time.perf_counter() - self.started > self.args.budget_s:
                cell["status"] = f"skipped: --budget-s {self.args.budget_s:g} exceeded"
            else:
                try:
                    with torch.no_grad():
                        (self.prefill_cell if phase == "prefill" else self.decode_cell)(cell, fn, compiled)
                    cell["status"] = "ok"
                except Exception as e:  # reported per cell; the run goes on
                    cell["status"] = short_error(e)
                    if self.cuda:
                        torch.cuda.empty_cache()
            speed = f"  {cell['tokens_per_s']:.1f} tok/s" if "tokens_per_s" in cell else ""
            print(f"  {mode:7} {label(cell):14} {cell['status']}{speed}", flush=True)
            self.save()
        group = {"mode": mode, "phase": phase,
                 "peak_memory_bytes": torch.cuda.max_memory_allocated(self.device) if self.cuda else None}
        if compiled:
            group["cudagraph_skips"] = torch._dynamo.utils.counters["inductor"]["cudagraph_skips"] - skips_before
            torch._dynamo.reset()  # frees the CUDA graphs and their memory pools
        self.results["groups"].append(group)

    def measure(self, cell, call):
        cell["first_call_s"] = self.timed(call)
        for _ in range(self.args.warmup - 1):
            call()
        cell["times_s"] = [self.timed(call) for _ in range(self.args.repeats)]
        cell["median_s"] = statistics.median(cell["times_s"])

    def prefill_cell(self, cell, fn, compiled):
        n = cell["length"]
        tokens, input_pos = self.random_tokens(n), torch.arange(n, device=self.device)

        def call():
            if compiled:
                torch.compiler.cudagraph_mark_step_begin()
            fn(self.model, tokens, input_pos)

        self.measure(cell, call)
        cell["tokens_per_s"] = n / cell["median_s"]

    def decode_cell(self, cell, fn, compiled):
        ctx, n = cell["length"], self.args.decode_tokens
        kv_len = min(round_up(ctx + n, KV_ALIGN), self.max_seq)
        if ctx:  # fill the cache to position ctx (eager, not timed)
            first = self.model(self.random_tokens(ctx), torch.arange(ctx, device=self.device))
            first = first.argmax(-1, keepdim=True)
        else:
            first = self.random_tokens(1)
        start = torch.tensor([ctx], device=self.device)
        generated = []

        def call():
            generated[:] = [decode_loop(fn, self.model, first, start, n, kv_len, compiled)]

        self.measure(cell, call)
        per_token = cell["median_s"] / n
        cell.update({
            "kv_len": kv_len, "tokens_per_s": 1.0 / per_token, "ms_per_token": per_token * 1e3,
            "weight_gb_s": self.results["weight_read_bytes_per_token"] / per_token / 1e9,
            # positions ctx .. ctx+n-1 attend to ctx+1 .. ctx+n cached positions
            "kv_bytes_per_token": self.results["kv_bytes_per_position"] * (ctx + (n + 1) / 2),
            "first_tokens": generated[0][:8].tolist(),
        })


def label(cell):
    """llama-bench's test names: ppP for prefill, tgN @ dC for decode."""
    if cell["phase"] == "prefill":
        return f"pp{cell['length']}"
    return f"tg{cell['decode_tokens']} @ d{cell['length']}"


def gib(n):
    return "-" if n is None else f"{n / 2**30:.2f} GiB"


def print_table(r):
    print(f"\n{r['config']} {r['dtype']} on {r['device']}, torch {r['torch']}: {r['params'] / 1e6:.1f}M params, "
          f"{r['weight_read_bytes_per_token'] / 1e9:.3f} GB of weights read per decoded token, "
          f"cache {r['max_seq_len']} positions, load {r['load_s']:.1f} s")
    print(f"{'mode':8} {'test':14} {'tok/s':>10} {'ms':>9} {'weights GB/s':>12} {'first call s':>12}  status")
    for c in r["cells"]:
        ok = c["status"] == "ok"
        ms = ok and (c["median_s"] * 1e3 if c["phase"] == "prefill" else c["ms_per_token"])
        print(f"{c['mode']:8} {label(c):14} "
              + (f"{c['tokens_per_s']:10.1f} {ms:9.3f} " if ok else f"{'-':>10} {'-':>9} ")
              + (f"{c['weight_gb_s']:12.1f} " if ok and c["phase"] == "decode" else f"{'-':>12} ")
              + (f"{c['first_call_s']:12.2f}" if ok else f"{'-':>12}")
              + f"  {c['status']}")
    print("ms: per prompt (pp), per token (tg); first call: the first warm-up, including any compilation")
    for g in r["groups"]:
        skips = f", CUDA graphs skipped {g['cudagraph_skips']} times" if g.get("cudagraph_skips") else ""
        print(f"peak memory {g['mode']} {g['phase']}: {gib(g['peak_memory_bytes'])}{skips}")


def main():
    args = parse_args()
    bench = Bench(args)
    bench.run()
    print_table(bench.results)


if __name__ == "__main__":
    main()
