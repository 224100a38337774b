#!/usr/bin/env python3
"""The top-1 agreement `--precision mixed` would cost the SmolLM2 4-bit model, emulated on the CPU.

    python3 tools/export/top1_emulation.py [--dir DIR] [--off] [--limit N] [--kv16]

Needs what `smollm2.py` writes in DIR (default `<repo root>/artifacts/smollm2`):
`ckpt.pth`, `params.json`, `reference_q4.json` and `reference_q4_wide.json`.

At `mixed` the prompt pass's 4-bit linears with more than `Q4_GEMV_MAX_ROWS`
(4) rows run on the matrix units: x rounded to f16, the weights dequantized in
f32 and rounded to f16 (`common/coop_q4.wgsl`), products summed in f32. The
decode steps (one row) keep the f32 GEMVs. This script runs the eager 4-bit
module (the one the references come from) with exactly that change to its
linears in each prompt's first call, teacher-forces the references' ids, and
counts the positions whose top-1 still equals the reference's, per file.

What it leaves out, so it is an estimate and not the GPU's figure: the prompt
attention's f16 query and probabilities at `mixed`, and the GPU's summation
order; the float16 KV cache that etwgpu's default keeps at every precision only
with `--kv16`, and then as rounding after each call (a call's own new rows
unrounded). With the change switched off (`--off`) every position must agree:
that checks the harness.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.dont_write_bytecode = True
sys.path.insert(0, str(Path(__file__).resolve().parent))

import smollm2 as S  # noqa: E402  (the eager module and its calls)

GEMV_MAX_ROWS = 4


def main() -> int:
    S._quiet()
    S._ensure_environment()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=S.REPO_ROOT / "artifacts" / "smollm2")
    parser.add_argument("--off", action="store_true", help="no rounding (the harness check)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N prompts of each file")
    parser.add_argument("--kv16", action="store_true",
                        help="also round the KV cache to f16 after every call (etwgpu's default "
                             "float16 cache, at every precision)")
    args = parser.parse_args()
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    model = S.eager_module("q4", args.dir)
    rounded_calls = 0
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    for module in linears:
        w16 = module.weight.dequantize().to(torch.float32).half().float()
        plain = module.forward

        # Only a prompt has more rows than the GEMV route takes (a decode
        # step is one), so the row count alone tells the prompt pass.
        def forward(x, plain=plain, w16=w16, bias=module.bias):
            nonlocal rounded_calls
            if not args.off and x.numel() // x.shape[-1] > GEMV_MAX_ROWS:
                rounded_calls += 1
                return F.linear(x.half().float(), w16, bias)
            return plain(x)

        module.forward = forward
    caches = S.kv_caches(model)
    if args.kv16:
        def round_caches(*_):
            with torch.no_grad():
                for c in caches:
                    c.copy_(c.half().float())

        model.register_forward_hook(round_caches)
    S.log("emulate", f"{len(linears)} linears, {'off' if args.off else 'f16 operands in the prompt pass'}"
                     + (f", {len(caches)} caches rounded to f16 after each call" if args.kv16 else ""))

    total_agree = total = 0
    for file in ("reference_q4.json", "reference_q4_wide.json"):
        ref = json.loads((args.dir / file).read_text())
        agree = positions = 0
        start = time.time()
        for p in ref["prompts"][: args.limit or None]:
            tf = p["teacher_forced"]
            want = tf["top1"]
            got = S.teacher_forced(model, p["prompt_ids"], tf["fed_ids"][: len(want) - 1]).top1
            here = sum(a == b for a, b in zip(got, want))
            if here < len(want):
                misses = [i for i in range(len(want)) if got[i] != want[i]]
                gaps = [round(tf["top1_top2_gap"][i], 4) for i in misses]
                S.log("emulate", f"  {p['name']}: {len(p['prompt_ids'])} prompt tokens, "
                                 f"{here}/{len(want)} (misses at {misses}, eager gaps {gaps})")
            agree += here
            positions += len(want)
        S.log("emulate", f"{file}: {agree}/{positions} ({time.time() - start:.0f}s)")
        total_agree += agree
        total += positions
    S.log("emulate", f"all: {total_agree}/{total} = {total_agree / total:.4f} "
                     f"({rounded_calls} linear calls on f16 operands)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
