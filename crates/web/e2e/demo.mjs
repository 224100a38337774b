// End-to-end test of the demo page (crates/web/www) in headless Chromium,
// driven over WebDriver (chromedriver); Node.js only, no packages.
//
// Serves the page on 127.0.0.1, loads the `mlp` fixture through the file
// input with its .npy input, checks the output against the golden within
// the manifest's tolerance; then loads `llama_tiny_fp32`, chats from the
// fixture's prompt token ids and checks the streamed greedy tokens and the
// tokens/s readout. Saves a screenshot (argument 1, default
// /tmp/etwgpu-demo.png).
//
//   node crates/web/e2e/demo.mjs [screenshot.png]
//
// Environment: CHROMEDRIVER (default /usr/bin/chromedriver), CHROMIUM
// (default /usr/bin/chromium).
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, extname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../../..");
const www = resolve(here, "../www");
const fixtures = join(root, "test_data/fixtures");
const screenshot = resolve(process.argv[2] || "/tmp/etwgpu-demo.png");
const chromedriver = process.env.CHROMEDRIVER || "/usr/bin/chromedriver";
const chromium = process.env.CHROMIUM || "/usr/bin/chromium";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (...a) => console.log("[e2e]", ...a);

if (!existsSync(join(www, "pkg/etwgpu_web.js"))) {
  throw new Error("crates/web/www/pkg is missing: run `cargo xtask web-build` first");
}

// --- .npy (little-endian, C order) -------------------------------------
function readNpy(path) {
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

// --- static server -------------------------------------------------------
const types = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm", ".json": "application/json" };
const server = createServer((req, res) => {
  const path = decodeURIComponent(new URL(req.url, "http://x").pathname);
  const file = resolve(www, "." + (path.endsWith("/") ? path + "index.html" : path));
  if (!file.startsWith(www) || !existsSync(file)) {
    res.writeHead(404).end("not found");
    return;
  }
  res.writeHead(200, { "content-type": types[extname(file)] || "application/octet-stream" });
  res.end(readFileSync(file));
});
await new Promise((r) => server.listen(0, "127.0.0.1", r));
const pageUrl = `http://127.0.0.1:${server.address().port}/`;

// --- WebDriver -----------------------------------------------------------
const driverPort = 9515 + Math.floor(Math.random() * 1000);
const driver = spawn(chromedriver, [`--port=${driverPort}`], { stdio: "ignore" });
const profile = mkdtempSync(join(tmpdir(), "etwgpu-e2e-"));
const base = `http://127.0.0.1:${driverPort}`;
async function wd(method, path, body) {
  const r = await fetch(base + path, { method, headers: { "content-type": "application/json" }, body: body && JSON.stringify(body) });
  const j = await r.json();
  if (!r.ok) throw new Error(`WebDriver ${method} ${path}: ${JSON.stringify(j.value).slice(0, 500)}`);
  return j.value;
}

let session = null;
let failed = false;
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
    "--window-size=1100,1300", `--user-data-dir=${profile}`];
  const s = await wd("POST", "/session", { capabilities: { alwaysMatch: { "goog:chromeOptions": { binary: chromium, args } } } });
  session = s.sessionId;
  const S = `/session/${session}`;
  const find = async (css) => Object.values(await wd("POST", `${S}/element`, { using: "css selector", value: css }))[0];
  const exec = (script) => wd("POST", `${S}/execute/sync`, { script, args: [] });
  const waitState = async (want, timeoutMs = 180000) => {
    const t0 = Date.now();
    for (;;) {
      const d = await exec("return window.etwgpuDemo && { state: window.etwgpuDemo.state, error: window.etwgpuDemo.error };");
      if (d && d.state === "error") throw new Error(`demo error: ${d.error}`);
      if (d && want.includes(d.state)) return;
      if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${want} (state ${d && d.state})`);
      await sleep(100);
    }
  };

  await wd("POST", `${S}/url`, { url: pageUrl });
  await waitState(["ready"]);
  const adapter = await exec("return window.etwgpuDemo.adapter;");
  log(`adapter: ${adapter.name} (${adapter.backend}, ${adapter.deviceType}), features: ${adapter.features.join(", ")}`);
  if (adapter.backend !== "BrowserWebGpu") throw new Error(`adapter backend ${adapter.backend}, expected BrowserWebGpu`);

  // 1. A plain model with a .npy input, checked against the golden.
  const mlp = join(fixtures, "mlp");
  await wd("POST", `${S}/element/${await find("#model-file")}/value`, { text: join(mlp, "model.pte") });
  await waitState(["loaded"]);
  await wd("POST", `${S}/element/${await find("#input-files")}/value`, { text: join(mlp, "call0.in0.npy") });
  await wd("POST", `${S}/element/${await find("#run")}/click`, {});
  await waitState(["done"]);
  const outputs = await exec("return window.etwgpuDemo.outputs;");
  const want = readNpy(join(mlp, "call0.out0.npy"));
  const { rtol, atol } = JSON.parse(readFileSync(join(mlp, "manifest.json"), "utf8")).tolerance.float32;
  const got = outputs[0];
  if (JSON.stringify(got.shape) !== JSON.stringify(want.shape)) throw new Error(`mlp shape ${got.shape} vs ${want.shape}`);
  let maxAbs = 0;
  want.values.forEach((w, i) => {
    const d = Math.abs(got.data[i] - w);
    maxAbs = Math.max(maxAbs, d);
    if (!(d <= atol + rtol * Math.abs(w))) throw new Error(`mlp output ${i}: ${got.data[i]} vs ${w}`);
  });
  log(`mlp: output [${got.shape}] matches the golden (max abs error ${maxAbs.toExponential(2)})`);

  // 2. A Llama-family model: chat from token ids, greedy.
  const llama = join(fixtures, "llama_tiny_fp32");
  const prompt = readNpy(join(llama, "call0.in0.npy")).values;
  const expected = [1, 2, 3].flatMap((k) => readNpy(join(llama, `call${k}.in0.npy`)).values);
  await wd("POST", `${S}/element/${await find("#model-file")}/value`, { text: join(llama, "model.pte") });
  await waitState(["loaded"]);
  await wd("POST", `${S}/element/${await find("#prompt")}/value`, { text: prompt.join(" ") });
  await exec("document.getElementById('max-new').value = '3';");
  await wd("POST", `${S}/element/${await find("#send")}/click`, {});
  await waitState(["done"]);
  const gen = await exec("return window.etwgpuDemo.generation;");
  if (JSON.stringify(gen.tokens) !== JSON.stringify(expected) || JSON.stringify(gen.streamed) !== JSON.stringify(expected)) {
    throw new Error(`llama tokens ${gen.tokens} (streamed ${gen.streamed}), expected ${expected}`);
  }
  const reply = await exec("return document.getElementById('reply').textContent;");
  if (reply.trim() !== expected.join(" ")) throw new Error(`reply shows "${reply}", expected "${expected.join(" ")}"`);
  const tps = await exec("return document.getElementById('tps').textContent;");
  if (!/tokens\/s/.test(tps) || !(gen.decodeTokensPerS > 0)) throw new Error(`no tokens/s readout: ${tps}`);
  log(`llama_tiny_fp32: streamed greedy tokens ${gen.tokens.join(" ")} match the fixture; readout "${tps}"`);

  const png = await wd("GET", `${S}/screenshot`);
  writeFileSync(screenshot, Buffer.from(png, "base64"));
  log(`screenshot: ${screenshot}`);
  console.log("1 passed, 0 failed");
} catch (e) {
  failed = true;
  console.error("[e2e] FAILED:", e.message);
} finally {
  if (session) await wd("DELETE", `/session/${session}`).catch(() => {});
  driver.kill();
  server.close();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
