"""The table printed last by tools/device/run.sh: etwgpu next to its peers.

Reads the raw files run.sh writes under OUT:
- bandwidth.json: `etwgpu devices --json --bandwidth` (a JSON line of
  adapters, then one of the copy bandwidth);
- etwgpu_*.json: `llm_bench --json` (synthetic Llama-family models);
- mixed_*.json: the same at `ETWGPU_PRECISION=mixed` (its prefill rows are
  shown as well: the 4-bit linears and the prompt attention on the
  cooperative-matrix kernels with f16 operands). Every prefill row is
  labelled with the precision its load took (`llm_bench` records it; files
  from before it did: `f32`, the default then, and `mixed` for mixed_*);
- f32_*.json: the same at `ETWGPU_PRECISION=f32`, once `mixed` became the
  default (run ay): rows of their own, as mixed_*'s;
- peers_*.json: `peers.py --json` (the same shapes in PyTorch);
- vision_*: the vision networks' files (`vision_report.py`, its table last);
and prints Markdown: decode and prefill tokens/s per length, each also as a
ratio to the best peer and (decode) to the bandwidth ceiling (the copy
bandwidth over the bytes of weights one decoded token reads), then the
issue's targets with met / not met.

Usage: python3 tools/device/report.py OUT
       python3 tools/device/report.py --readme README.md [--check]

With `--readme`, the README's Performance section (between the markers
`<!-- performance: RESULTS_DIR -->` and `<!-- performance end -->`) is
written anew from the committed raw files of RESULTS_DIR, or with `--check`
compared with them (exit 1 when it drifted): the section is never typed by
hand.
"""
import glob
import json
import os
import re
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def weight_bytes_per_token(cfg, weights):
    """Bytes of linear weights (and the output head) read per decoded token."""
    d, h, kv = cfg["dim"], cfg["n_heads"], cfg["n_kv_heads"]
    hd = d // h
    per_layer = d * (d + 2 * kv * hd) + d * d + 3 * d * cfg["hidden_dim"]
    params = per_layer * cfg["n_layers"] + cfg["vocab"] * d
    # 4-bit: half a byte per weight plus one f32 scale per group of 32.
    return params * (0.5 + 4 / 32) if weights.startswith("Q4") else params * 4


def best_peer(vals):
    """The best of one cell's peer figures, only when every mode has one
    (against a partial set the ratio would compare with the slower peer)."""
    return max(vals) if vals and all(vals) else None


def peer_modes(run_dir, measured):
    """The peer modes of a run folder's table: those measured, and those its
    `peers_*.json` asked for (`args.modes`) but whose budget ran out before
    any cell, so that their column shows `-` and `best_peer` gives no
    ratio against the peers that did run."""
    asked = set()
    for p in glob.glob(os.path.join(run_dir, "peers_*.json")):
        asked.update(load(p).get("args", {}).get("modes", []))
    return sorted(set(measured) | asked)


def fmt(x, digits=1):
    return "-" if x is None else f"{x:,.{digits}f}"


def main(out):
    bw, ours, _ = results(out)
    peers = {os.path.basename(p)[len("peers_"):-5]: load(p) for p in sorted(glob.glob(os.path.join(out, "peers_*.json")))}
    if bw:
        print(f"Copy bandwidth ({bw['adapter']}): {bw['gb_per_s']:,.0f} GB/s read+write, WGSL vec4 kernel\n")

    def peer_cells(phase):
        cells = {}
        for p in peers.values():
            for c in p.get("cells", []):
                if c.get("phase") == phase and c.get("status") == "ok":
                    cells[(c["mode"], c["length"])] = c["tokens_per_s"]
        return cells

    pdec, ppre = peer_cells("decode"), peer_cells("prefill")
    modes = peer_modes(out, {m for m, _ in list(pdec) + list(ppre)})
    for name, r in ours.items():
        bpt = weight_bytes_per_token(r["config"], r["weights"])
        ceiling = bw["gb_per_s"] * 1e9 / bpt if bw else None
        print(f"## {name}: {r['config']['n_params'] / 1e6:,.0f}M params, {r['weights']}, "
              f"{bpt / 1e9:.3f} GB of weights per decoded token")
        print(f"load {r['load_s']:.2f} s, first call {r['first_call_s']:.2f} s, "
              f"{r['dispatches_per_decode_step']} dispatches per decoded token\n")
        is_1b = name.startswith("1b")
        head = "| decode at context | etwgpu tok/s | " + "".join(f"torch {m} | " for m in modes) if is_1b else \
            "| decode at context | etwgpu tok/s | "
        print(head + ("x best peer | % of ceiling |" if is_1b else "% of ceiling |") + " ms/token: lowering, recording, GPU wait |")
        print("|" + "---|" * (head.count("|") - 1 + (3 if is_1b else 2)))
        for d in r["decode"]:
            t = d["tokens_per_s"]
            row = f"| {d['context']} | {fmt(t)} | "
            best = None
            if is_1b:
                vals = [pdec.get((m, d["context"])) for m in modes]
                row += "".join(f"{fmt(v)} | " for v in vals)
                best = best_peer(vals)
                row += f"{fmt(t / best, 2) if best else '-'} | "
            row += f"{fmt(100 * t / ceiling) if ceiling else '-'} |"
            h = d.get("host_ms_per_call", {})
            row += f" {fmt(h.get('lowering'), 3)}, {fmt(h.get('recording'), 3)}, {fmt(h.get('gpu_wait'), 3)} |"
            print(row)
        print()
        head = "| prefill prompt | etwgpu tok/s | " + ("".join(f"torch {m} | " for m in modes) + "x best peer |" if is_1b else "")
        print(head)
        print("|" + "---|" * (head.count("|") - 1))
        for p in r["prefill"] + r.get("prefill_extra", []):
            t = p["tokens_per_s"]
            label = f"{p['prompt']}, {p['precision']}"
            row = f"| {label} | {fmt(t)} |"
            if is_1b:
                vals = [ppre.get((m, p["prompt"])) for m in modes]
                best = best_peer(vals)
                row += "".join(f" {fmt(v)} |" for v in vals) + f" {fmt(t / best, 2) if best else '-'} |"
            print(row)
        print()
        if is_1b:
            dec = {d["context"]: d["tokens_per_s"] for d in r["decode"]}
            pre = {p["prompt"]: p["tokens_per_s"] for p in r["prefill"]}
            targets = [
                ("decode >= 2,000 tok/s at context 128", dec.get(128), lambda v: v >= 2000),
                ("decode >= 1,200 tok/s at context 8192", dec.get(8192), lambda v: v >= 1200),
                ("prefill >= 50,000 tok/s at 512", pre.get(512), lambda v: v >= 50000),
                ("prefill >= 20,000 tok/s at 512 (first milestone)", pre.get(512), lambda v: v >= 20000),
                ("<= 100 dispatches per decoded token", r["dispatches_per_decode_step"], lambda v: v <= 100),
                ("cold start (load + first call) <= 1.5 s", r["load_s"] + r["first_call_s"], lambda v: v <= 1.5),
            ]
            print("| target | measured | met |\n|---|---|---|")
            for what, v, ok in targets:
                print(f"| {what} | {fmt(v, 2)} | {'-' if v is None else ('yes' if ok(v) else 'no')} |")
            print()


def vision(out):
    """The vision table (`vision_report.py`) when the run has vision files."""
    if glob.glob(os.path.join(out, "vision_*")):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import vision_report

        print("## Vision networks: images/s (fp32; f16/bf16 second rows)\n")
        print(vision_report.table([out]) + "\n")


def results(out):
    """The raw files of one run folder: (copy bandwidth, ours, peer cells)."""
    bw = None
    path = os.path.join(out, "bandwidth.json")
    if os.path.exists(path):
        with open(path) as f:
            lines = [json.loads(line) for line in f if line.strip()]
        bw = next((line for line in lines if isinstance(line, dict) and "gb_per_s" in line), None)
    ours = {}
    for p in sorted(glob.glob(os.path.join(out, "etwgpu_*.json"))):
        r = load(p)
        # `llm_bench` records the precision its load took; files from before
        # it did ran at the default of their day, `f32`.
        for c in r["prefill"]:
            c["precision"] = r.get("precision", "f32")
        name = f"{r['model']}_{'q4' if r['weights'].startswith('Q4') else 'fp32'}"
        if name in ours:
            ours[name]["prefill"] += r["prefill"]
            ours[name]["decode"] += r["decode"]
        else:
            ours[name] = r
    extra = [(p, "mixed") for p in sorted(glob.glob(os.path.join(out, "mixed_*.json")))]
    extra += [(p, "f32") for p in sorted(glob.glob(os.path.join(out, "f32_*.json")))]
    for p, named in extra:
        r = load(p)
        name = f"{r['model']}_{'q4' if r['weights'].startswith('Q4') else 'fp32'}"
        if name in ours:
            prec = r.get("precision", named)
            ours[name].setdefault("prefill_extra", []).extend(dict(c, precision=prec) for c in r["prefill"])
    cells = {}
    for p in sorted(glob.glob(os.path.join(out, "peers_*.json"))):
        for c in load(p).get("cells", []):
            if c.get("status") == "ok":
                cells[(c["phase"], c["mode"], c["length"])] = c["tokens_per_s"]
    return bw, ours, cells


def performance_section(run_dir, label=None):
    """The README's Performance section, from one committed run folder
    (`label`: how the text names that folder)."""
    bw, ours, cells = results(run_dir)
    meta = {}
    if os.path.exists(os.path.join(run_dir, "meta.json")):
        meta = load(os.path.join(run_dir, "meta.json"))
    date = meta.get("date", os.path.basename(run_dir.rstrip("/"))[:10])
    adapter = bw["adapter"] if bw else "?"
    # A run without peers may name a sibling run folder whose peers it shows
    # (`"peers_from"` in meta.json); the text then says where they are from.
    peers_note = "measured in the same device session. "
    peer_dir = run_dir
    if not cells and meta.get("peers_from"):
        peer_dir = os.path.join(os.path.dirname(run_dir.rstrip("/")), meta["peers_from"])
        cells = results(peer_dir)[2]
        peers_note = (f"measured on the same kind of GPU in an earlier device call (run folder "
                      f"`{meta['peers_from']}`), not in this one. ")
    modes = peer_modes(peer_dir, {m for (_, m, _) in cells})
    out = [
        f"Measured {date} on one {adapter} (Vulkan, wgpu 30), batch 1, by the device tools of `tools/device/`; "
        f"raw files in `{(label or run_dir).rstrip('/')}`"
        + (f", commit {meta['commit']}" if meta.get("commit") else "")
        + ". "
        + ("PyTorch peers (bf16, the same shapes and random weights, `tools/device/peers.py`) were "
           + peers_note if cells else "")
        + "Tokens/s, higher is better.",
        "",
    ]
    if bw:
        out += [f"Copy-bandwidth ceiling of this GPU through WGSL: {bw['gb_per_s']:,.0f} GB/s.", ""]
    for name, r in ours.items():
        title = {"1b_q4": "Llama-3.2-1B shape, 4-bit weights (group 32)",
                 "smollm2_q4": "SmolLM2-135M shape, 4-bit weights (group 32)",
                 "smollm2_fp32": "SmolLM2-135M shape, fp32 weights"}.get(name, name)
        peer_cols = modes if name.startswith("1b") else []
        out.append(f"**{title}** ({r['dispatches_per_decode_step']} dispatches per decoded token)")
        out.append("")
        head = "| | length | etwgpu | " + "".join(f"torch {m} | " for m in peer_cols)
        out.append(head)
        out.append("|" + "---|" * (head.count("|") - 1))
        for d in r["decode"]:
            row = f"| decode | context {d['context']} | {fmt(d['tokens_per_s'], 0)} | "
            row += "".join(f"{fmt(cells.get(('decode', m, d['context'])), 0)} | " for m in peer_cols)
            out.append(row)
        for p in r["prefill"] + r.get("prefill_extra", []):
            what = f"prefill, `--precision {p['precision']}`"
            row = f"| {what} | prompt {p['prompt']} | {fmt(p['tokens_per_s'], 0)} | "
            row += "".join(f"{fmt(cells.get(('prefill', m, p['prompt'])), 0)} | " for m in peer_cols)
            out.append(row)
        out.append("")
    if any("| - |" in line for line in out):
        out += ["`-`: a PyTorch cell the peers' time budget (`peers.py --budget-s`) did not reach.", ""]
    return "\n".join(line.rstrip() for line in out)


MARK = re.compile(r"(<!-- performance: (?P<dir>\S+) -->\n)(?P<body>.*?)(<!-- performance end -->)", re.S)


def readme(path, check):
    text = open(path).read()
    m = MARK.search(text)
    if not m:
        sys.exit(f"{path}: no '<!-- performance: DIR -->' ... '<!-- performance end -->' markers")
    root = os.path.dirname(os.path.abspath(path))
    body = performance_section(os.path.join(root, m.group("dir")), m.group("dir")) + "\n"
    if check:
        if m.group("body") != body:
            sys.exit(f"{path}: the Performance section drifted from {m.group('dir')}; "
                     "run python3 tools/device/report.py --readme README.md")
        return
    with open(path, "w") as f:
        f.write(text[: m.start("body")] + body + text[m.end("body"):])


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--readme":
        readme(sys.argv[2], "--check" in sys.argv[3:])
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "."))
        vision(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("OUT", "."))
