#!/usr/bin/env python3
"""Runs etwgpu's browser LLM bench page (crates/web/bench) in headless
Chromium and prints and saves its JSON result.

Standard library only (the GPU machine has python3 but no Node.js and no
chromedriver): serves crates/web on 127.0.0.1 (the package must be built
into crates/web/pkg: `cargo xtask web-build --release`), starts Chromium
on the page with `report=1`, prints the page's progress lines (POSTed to
/log) as they come and waits for the result (POSTed to /result).

    python3 tools/device/browser_bench.py --model smollm2 --prompts 128,512 \\
        --steps 64 --repeats 3 --json /tmp/browser.json
    python3 tools/device/browser_bench.py --url /fixtures/llama_tiny_q4/model.pte ...
    python3 tools/device/browser_bench.py --file /tmp/model.pte ...

--chromium picks the binary (default /usr/bin/chromium), --lib-dir puts a
folder of carried shared libraries first on LD_LIBRARY_PATH, and
--gpu vulkan adds the flags that put WebGPU on the system's Vulkan driver
(a real GPU) instead of Chromium's SwiftShader; --flag adds any other.
Exit status 0 when the page reported a result with ok: true.
"""

import argparse
import http.server
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "crates" / "web"
FIXTURES = ROOT / "test_data" / "fixtures"

# WebGPU on the system's Vulkan driver in headless Chromium (Linux): Vulkan
# on, the GPU process not refused for an unknown or blocklisted GPU nor
# sandboxed. Checked on Chromium 156 with lavapipe as the system driver;
# adding --use-angle=vulkan there made the GPU process fail (Skia found no
# context) and the page never ran.
VULKAN_FLAGS = [
    "--enable-features=Vulkan",
    "--ignore-gpu-blocklist",
    "--disable-gpu-sandbox",
]

TYPES = {".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm", ".json": "application/json"}


def make_handler(events, file_pte):
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            path = self.path.split("?")[0]
            base, rel = (FIXTURES, path[len("/fixtures/"):]) if path.startswith("/fixtures/") else (WEB, path[1:])
            if path == "/file.pte" and file_pte:
                base, rel = file_pte.parent, file_pte.name
            file = (base / rel).resolve()
            if file.is_dir():
                file = file / "index.html"
            if not str(file).startswith(str(base.resolve())) or not file.is_file():
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("content-type", TYPES.get(file.suffix, "application/octet-stream"))
            self.send_header("content-length", str(file.stat().st_size))
            self.end_headers()
            with open(file, "rb") as f:
                shutil.copyfileobj(f, self.wfile, 1 << 20)

        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("content-length", 0))).decode()
            self.send_response(204)
            self.end_headers()
            events.put((self.path, body))

    return Handler


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2", help="synthetic preset: tiny, small, smollm2, 1b")
    ap.add_argument("--weights", default="q4", choices=["q4", "fp32"])
    ap.add_argument("--url", help="a .pte to fetch instead (a path under crates/web, or /fixtures/...)")
    ap.add_argument("--file", type=Path, help="a .pte file anywhere, served as /file.pte and fetched (streamed)")
    ap.add_argument("--prompts", default="128", help='prompt lengths; "" measures the load only')
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--context", type=int, help="KV cache positions of the synthetic program")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--lib-dir", help="shared libraries to put first on LD_LIBRARY_PATH")
    ap.add_argument("--gpu", choices=["default", "vulkan"], default="default")
    ap.add_argument("--require-gpu", action="store_true",
                    help="fail when WebGPU runs on SwiftShader (Chromium's CPU fallback) instead of a GPU")
    ap.add_argument("--flag", action="append", default=[], help="another Chromium flag (repeatable)")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--json", help="write the result here")
    args = ap.parse_args()

    if not (WEB / "pkg" / "etwgpu_web.js").exists():
        sys.exit("crates/web/pkg is missing: build it with `cargo xtask web-build --release`")
    events = queue.Queue()
    file_pte = args.file.resolve() if args.file else None
    if file_pte:
        args.url = "/file.pte"
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(events, file_pte))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    query = {"prompts": args.prompts, "steps": args.steps, "repeats": args.repeats, "report": 1}
    if args.url:
        query["url"] = args.url
    else:
        query.update(model=args.model, weights=args.weights)
        if args.context:
            query["context"] = args.context
    url = f"http://127.0.0.1:{server.server_port}/bench/?" + "&".join(f"{k}={v}" for k, v in query.items())

    profile = tempfile.mkdtemp(prefix="etwgpu-bench-")
    flags = ["--headless=new", "--no-sandbox", "--enable-unsafe-webgpu", "--no-first-run", "--disable-sync",
             "--disable-background-networking", "--disable-component-update", "--disable-dev-shm-usage",
             # A tab in the background must not be throttled while it waits on the GPU.
             "--disable-renderer-backgrounding", "--disable-background-timer-throttling",
             # The adapter's vendor, architecture and description in the result.
             "--enable-webgpu-developer-features",
             f"--user-data-dir={profile}"]
    flags += VULKAN_FLAGS if args.gpu == "vulkan" else []
    flags += args.flag
    env = dict(os.environ)
    if args.lib_dir:
        env["LD_LIBRARY_PATH"] = args.lib_dir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    print(f"$ {args.chromium} {' '.join(flags)} '{url}'", flush=True)
    log = open(Path(profile) / "chromium.log", "w")
    browser = subprocess.Popen([args.chromium, *flags, url], env=env, stdout=log, stderr=subprocess.STDOUT)
    result = None
    start = time.time()
    try:
        while result is None:
            left = args.timeout - (time.time() - start)
            if left <= 0:
                print(f"timed out after {args.timeout:.0f} s", flush=True)
                break
            if browser.poll() is not None:
                print(f"Chromium exited with status {browser.returncode}", flush=True)
                break
            try:
                path, body = events.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            if path == "/log":
                print(body, flush=True)
            elif path == "/result":
                result = json.loads(body)
    finally:
        browser.terminate()
        try:
            browser.wait(10)
        except subprocess.TimeoutExpired:
            browser.kill()
        server.shutdown()
        log.close()
        if result is None or not result.get("ok"):
            tail = (Path(profile) / "chromium.log").read_text(errors="replace").splitlines()[-40:]
            print("Chromium's output (last lines):\n  " + "\n  ".join(tail), flush=True)
        shutil.rmtree(profile, ignore_errors=True)
    if result is None:
        sys.exit(1)
    result["flags"] = flags
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    if not result.get("ok"):
        print(f"the page failed: {result.get('error')}")
        sys.exit(1)
    if args.require_gpu and (result.get("gpuAdapterInfo") or {}).get("architecture") == "swiftshader":
        print(f"WebGPU runs on SwiftShader, not a GPU: {result['gpuAdapterInfo']} (Chromium found no usable Vulkan GPU)")
        sys.exit(1)
    a, load = result["adapter"], result["load"]
    print(f"\nload: {load['fileBytes'] / 2**20:.1f} MiB program, made or read in {load['buildOrReadMs']:.0f} ms, "
          f"loaded in {load['loadMs']:.0f} ms; wasm memory {load['wasmMemoryAtInitBytes'] / 2**20:.1f} MiB at init, "
          f"{load['wasmMemoryAfterReadBytes'] / 2**20:.1f} MiB after reading, peak (after loading) "
          f"{load['wasmMemoryBytes'] / 2**20:.1f} MiB")
    print(f"WebGPU adapter info: {result.get('gpuAdapterInfo')}")
    print(f"adapter: {a['name']} ({a['backend']}, {a['deviceType']}) {a['driver']}; features {', '.join(a['features'])}")
    print(f"| model | P | prefill tok/s | decode tok/s ({result['steps']} steps) |\n|---|---:|---:|---:|")
    rate = lambda x: f"{x:.1f}" if x >= 1 else f"{x:.3g}"  # noqa: E731
    for c in result["cells"]:
        print(f"| {result['model']} | {c['prompt']} | {rate(c['prefillTokensPerS'])} | {rate(c['decodeTokensPerS'])} |")


if __name__ == "__main__":
    main()
