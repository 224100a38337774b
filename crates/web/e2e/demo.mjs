// End-to-end test of the demo page (crates/web/www) in headless Chromium,
// driven over WebDriver (chromedriver); Node.js only, no packages.
//
// Serves crates/web on 127.0.0.1 (the page at /www/, the package it
// imports at /pkg/) and checks: the adapter panel shows the limits; the
// `mlp` fixture loaded through the file input fills the progress bar, and
// with its .npy input its output matches the golden within the manifest's
// tolerance; `llama_tiny_fp32` chats from the fixture's prompt token ids
// with the fixture's streamed greedy tokens and a tokens/s readout (then a
// screenshot, argument 1, default /tmp/etwgpu-demo.png); a file that is not
// a program shows a message naming the problem.
//
//   node crates/web/e2e/demo.mjs [screenshot.png]
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { checkGolden, readNpy, serve, withChromium } from "./browser.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../../..");
const web = resolve(here, "..");
const fixtures = join(root, "test_data/fixtures");
const screenshot = resolve(process.argv[2] || "/tmp/etwgpu-demo.png");
const log = (...a) => console.log("[e2e]", ...a);

if (!existsSync(join(web, "pkg/etwgpu_web.js"))) {
  throw new Error("crates/web/pkg is missing: run `cargo xtask web-build` first");
}

const server = await serve({ "/": web });
let failed = false;
try {
  await withChromium(async ({ wd, S, find, exec, waitFor }) => {
    const waitState = (want) => waitFor(`(d => d && (d.state === "error" ? { error: "demo error: " + d.error } : ${JSON.stringify(want)}.includes(d.state)))(window.etwgpuDemo)`);
    await wd("POST", `${S}/url`, { url: `${server.url}/www/` });
    await waitState(["ready"]);
    const adapter = await exec("return window.etwgpuDemo.adapter;");
    log(`adapter: ${adapter.name} (${adapter.backend}, ${adapter.deviceType}), features: ${adapter.features.join(", ")}`);
    if (adapter.backend !== "BrowserWebGpu") throw new Error(`adapter backend ${adapter.backend}, expected BrowserWebGpu`);
    const limits = await exec("return document.getElementById('adapter').textContent;");
    if (!/MiB per binding/.test(limits)) throw new Error(`the adapter panel shows no limits: ${limits}`);

    // 1. A plain model with a .npy input, checked against the golden.
    const mlp = join(fixtures, "mlp");
    await wd("POST", `${S}/element/${await find("#model-file")}/value`, { text: join(mlp, "model.pte") });
    await waitState(["loaded"]);
    const bar = await exec("return { value: document.getElementById('progress').value, text: document.getElementById('progress-text').textContent };");
    if (!(bar.value === 1 && /compiled/.test(bar.text))) throw new Error(`the progress bar did not finish: ${JSON.stringify(bar)}`);
    await wd("POST", `${S}/element/${await find("#input-files")}/value`, { text: join(mlp, "call0.in0.npy") });
    await wd("POST", `${S}/element/${await find("#run")}/click`, {});
    await waitState(["done"]);
    const outputs = await exec("return window.etwgpuDemo.outputs;");
    const tol = JSON.parse(readFileSync(join(mlp, "manifest.json"), "utf8")).tolerance.float32;
    const maxAbs = checkGolden("mlp output 0", outputs[0], join(mlp, "call0.out0.npy"), tol);
    log(`mlp: output [${outputs[0].shape}] matches the golden (max abs error ${maxAbs.toExponential(2)})`);

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

    // The screenshot shows the chat.
    const png = await wd("GET", `${S}/screenshot`);
    writeFileSync(screenshot, Buffer.from(png, "base64"));
    log(`screenshot: ${screenshot}`);

    // 3. Not a program: a clear message, and the page still works.
    await wd("POST", `${S}/element/${await find("#model-file")}/value`, { text: join(mlp, "call0.in0.npy") });
    await waitFor("window.etwgpuDemo.state === 'error'");
    const message = await exec("return document.getElementById('status').textContent;");
    if (!/cannot read the program/.test(message)) throw new Error(`a bad file shows "${message}"`);
    log(`a file that is not a program: "${message}"`);

  });
  console.log("1 passed, 0 failed");
} catch (e) {
  failed = true;
  console.error("[e2e] FAILED:", e.message);
} finally {
  server.close();
}
process.exit(failed ? 1 : 0);
