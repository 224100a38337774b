// The npm package's test (`cargo xtask web-test`): serves APP_DIR (a
// scratch folder where `npm install ./etwgpu-x.y.z.tgz` put the package
// under node_modules, plus package/index.html and main.js) and the
// fixtures on 127.0.0.1, opens the page in headless Chromium and checks
// what it did: the `mlp` fixture's output against its golden within the
// manifest's float32 tolerance, the greedy tokens of `llama_tiny_fp32`
// (streamed and returned) against the fixture's, the load's progress
// stages, and the typed error for bytes that are not a program.
//
//   node crates/web/e2e/package.mjs APP_DIR
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { checkGolden, readNpy, serve, withChromium } from "./browser.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const fixtures = resolve(here, "../../../test_data/fixtures");
const app = resolve(process.argv[2] || ".");
const log = (...a) => console.log("[package]", ...a);

const server = await serve({ "/": app, "/fixtures/": fixtures });
let failed = false;
try {
  await withChromium(async ({ wd, S, waitFor }) => {
    await wd("POST", `${S}/url`, { url: `${server.url}/` });
    const r = await waitFor("window.result && window.result.state !== 'running' && window.result");
    if (r.state !== "done") throw new Error(`the page failed: ${r.error}`);
    if (r.adapter.backend !== "BrowserWebGpu") throw new Error(`adapter backend ${r.adapter.backend}`);
    const tol = JSON.parse(readFileSync(join(fixtures, "mlp/manifest.json"), "utf8")).tolerance.float32;
    const maxAbs = checkGolden("mlp output 0", r.mlp, join(fixtures, "mlp/call0.out0.npy"), tol);
    log(`mlp from a streamed fetch: [${r.mlp.shape}] matches the golden (max abs error ${maxAbs.toExponential(2)})`);
    const llama = join(fixtures, "llama_tiny_fp32");
    const expected = [1, 2, 3].flatMap((k) => readNpy(join(llama, `call${k}.in0.npy`)).values);
    const g = r.generation;
    if (!r.isLlm || JSON.stringify(g.tokens) !== JSON.stringify(expected) || JSON.stringify(g.streamed) !== JSON.stringify(expected)) {
      throw new Error(`llama tokens ${g.tokens} (streamed ${g.streamed}), expected ${expected}`);
    }
    log(`llama_tiny_fp32 from a Blob in 4 KiB slices: greedy tokens ${g.tokens.join(" ")} match the fixture`);
    if (JSON.stringify(r.stages) !== JSON.stringify(["read", "weights", "pipelines"])) throw new Error(`progress stages ${r.stages}`);
    if (!/^cannot read the program/.test(r.badFile)) throw new Error(`bytes that are not a program: ${r.badFile}`);
    log(`progress stages ${r.stages.join(", ")}; bad bytes: "${r.badFile}"; wasm memory ${(r.wasmMemoryBytes / 2 ** 20).toFixed(1)} MiB`);
  });
  console.log("1 passed, 0 failed");
} catch (e) {
  failed = true;
  console.error("[package] FAILED:", e.message);
} finally {
  server.close();
}
process.exit(failed ? 1 : 0);
