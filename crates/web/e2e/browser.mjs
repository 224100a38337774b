// What the browser checks share: a static file server on 127.0.0.1 and a
// headless Chromium driven over WebDriver (chromedriver). Node.js only, no
// packages.
//
// Environment: CHROMEDRIVER (default /usr/bin/chromedriver), CHROMIUM
// (default /usr/bin/chromium), CHROMIUM_ARGS (extra flags, space
// separated, e.g. to put WebGPU on a real GPU's Vulkan driver).
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { extname, join, resolve } from "node:path";

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// --- .npy (little-endian, C order) -------------------------------------
export function readNpy(path) {
  const b = readFileSync(path);
  const major = b[6];
  const hlen = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = b.subarray(start, start + hlen).toString("latin1");
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(",").map((s) => s.trim()).filter(Boolean).map(Number);
  const data = b.subarray(start + hlen);
  const ab = data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength);
  const arrays = { "<f4": Float32Array, "<f8": Float64Array, "<i4": Int32Array, "<i8": BigInt64Array };
  if (!arrays[descr]) throw new Error(`${path}: unsupported dtype ${descr}`);
  return { descr, shape, values: Array.from(new arrays[descr](ab), Number) };
}

/// Checks `got` (numbers) against the .npy golden at `path` within
/// `|got - want| <= atol + rtol * |want|`; returns the max abs error.
export function checkGolden(what, got, path, { rtol, atol }) {
  const want = readNpy(path);
  if (JSON.stringify(got.shape) !== JSON.stringify(want.shape)) throw new Error(`${what}: shape ${got.shape} vs ${want.shape}`);
  let maxAbs = 0;
  want.values.forEach((w, i) => {
    const d = Math.abs(got.data[i] - w);
    maxAbs = Math.max(maxAbs, d);
    if (!(d <= atol + rtol * Math.abs(w))) throw new Error(`${what}: element ${i} is ${got.data[i]}, golden ${w}`);
  });
  return maxAbs;
}

// --- static server -------------------------------------------------------
const types = { ".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm",
  ".json": "application/json" };

/// Serves `mounts` (URL prefix -> directory, e.g. { "/": www }) on
/// 127.0.0.1; resolves to { url, close }. Files are streamed with their
/// Content-Length, so a page can read a large one as a stream.
export async function serve(mounts) {
  const prefixes = Object.keys(mounts).sort((a, b) => b.length - a.length);
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url, "http://x").pathname);
    const prefix = prefixes.find((p) => path.startsWith(p));
    const dir = prefix && resolve(mounts[prefix]);
    const rel = prefix ? path.slice(prefix.length) : "";
    const file = dir && resolve(dir, "./" + (rel === "" || rel.endsWith("/") ? rel + "index.html" : rel));
    if (!file || !file.startsWith(dir) || !existsSync(file) || !statSync(file).isFile()) {
      res.writeHead(404).end("not found");
      return;
    }
    res.writeHead(200, { "content-type": types[extname(file)] || "application/octet-stream",
      "content-length": statSync(file).size });
    if (req.method === "HEAD") return res.end();
    import("node:fs").then(({ createReadStream }) => createReadStream(file).pipe(res));
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
}

// --- WebDriver -----------------------------------------------------------
/// Starts chromedriver and a headless Chromium with WebGPU, runs
/// `body(browser)` and always cleans up. `browser` has `wd(method, path,
/// body)`, `S` (the session path), `find(css)`, `exec(script)`,
/// `waitFor(expr, timeoutMs)` (polls a JS expression until it is truthy;
/// an object with `error` throws).
export async function withChromium(body, { windowSize = "1100,1300" } = {}) {
  const chromedriver = process.env.CHROMEDRIVER || "/usr/bin/chromedriver";
  const chromium = process.env.CHROMIUM || "/usr/bin/chromium";
  const extra = (process.env.CHROMIUM_ARGS || "").split(/\s+/).filter(Boolean);
  const driverPort = 9515 + Math.floor(Math.random() * 1000);
  const driver = spawn(chromedriver, [`--port=${driverPort}`], { stdio: "ignore" });
  const profile = mkdtempSync(join(tmpdir(), "etwgpu-e2e-"));
  const base = `http://127.0.0.1:${driverPort}`;
  const wd = async (method, path, data) => {
    const r = await fetch(base + path, { method, headers: { "content-type": "application/json" }, body: data && JSON.stringify(data) });
    const j = await r.json();
    if (!r.ok) throw new Error(`WebDriver ${method} ${path}: ${JSON.stringify(j.value).slice(0, 500)}`);
    return j.value;
  };
  let session = null;
  try {
    for (let i = 0; ; i++) {
      try {
        await wd("GET", "/status");
        break;
      } catch (e) {
        if (i > 100) throw new Error("chromedriver did not start");
        await sleep(100);
      }
    }
    const args = ["--headless=new", "--no-sandbox", "--enable-unsafe-webgpu", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic", "--disable-dev-shm-usage",
      `--window-size=${windowSize}`, `--user-data-dir=${profile}`, ...extra];
    const s = await wd("POST", "/session", { capabilities: { alwaysMatch: { "goog:chromeOptions": { binary: chromium, args } } } });
    session = s.sessionId;
    const S = `/session/${session}`;
    const find = async (css) => Object.values(await wd("POST", `${S}/element`, { using: "css selector", value: css }))[0];
    const exec = (script) => wd("POST", `${S}/execute/sync`, { script, args: [] });
    const waitFor = async (expr, timeoutMs = 180000) => {
      const t0 = Date.now();
      for (;;) {
        const v = await exec(`return ${expr};`);
        if (v && v.error) throw new Error(String(v.error));
        if (v) return v;
        if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${expr}`);
        await sleep(100);
      }
    };
    return await body({ wd, S, find, exec, waitFor });
  } finally {
    if (session) await wd("DELETE", `/session/${session}`).catch(() => {});
    driver.kill();
    rmSync(profile, { recursive: true, force: true });
  }
}
