//! `etwgpu serve` with real clients on 127.0.0.1: a small HTTP/1.1 client
//! on `std::net::TcpStream` (and `curl`), against servers on the tiny
//! Llama fixture (context 32, recorded greedy tokens) and on a synthetic
//! tiny Llama with a longer context (requests that take long enough to
//! hold the GPU while others queue, cancel or shut down). Over the size
//! limit: the client helpers and the tests that use them read best in one
//! file, and each test is one scenario of the issue's list.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{byte_tokenizer, fixtures_dir, gpu_available};

/// A running `etwgpu serve`, killed on drop.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tmp_file(name: &str, bytes: &[u8]) -> PathBuf {
    // Tests run in parallel: each file gets its own name.
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let path = std::env::temp_dir().join(format!("etwgpu-serve-{}-{n}-{name}", std::process::id()));
    std::fs::write(&path, bytes).expect("write temp file");
    path
}

/// Starts `etwgpu serve` on a free port and waits for its listening line.
fn serve(model: &Path, tokenizer: &Path, extra: &[&str]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_etwgpu"))
        .args(["serve", "--model", model.to_str().unwrap(), "--tokenizer", tokenizer.to_str().unwrap()])
        .args(["--host", "127.0.0.1", "--port", "0"])
        .args(extra)
        .env("XDG_RUNTIME_DIR", std::env::var_os("XDG_RUNTIME_DIR").unwrap_or_else(|| std::env::temp_dir().into()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let port = loop {
        let line = lines.next().expect("serve prints its address").expect("utf-8");
        if let Some(addr) = line.strip_prefix("etwgpu serve: ").and_then(|l| l.split("http://127.0.0.1:").nth(1)) {
            break addr.trim().parse().expect("a port");
        }
    };
    // Keep draining stderr so the server never blocks on it.
    std::thread::spawn(move || lines.for_each(drop));
    Server { child, port }
}

fn tiny_fixture() -> (PathBuf, PathBuf) {
    let tok = tmp_file("bytes.json", byte_tokenizer(false).to_string().as_bytes());
    (fixtures_dir().join("llama_tiny_fp32/model.pte"), tok)
}

/// The fixture with the byte tokenizer plus ChatML's two tokens.
fn tiny_chat_fixture() -> (PathBuf, PathBuf) {
    let tok = tmp_file("chatml-tiny.json", byte_tokenizer(true).to_string().as_bytes());
    (fixtures_dir().join("llama_tiny_fp32/model.pte"), tok)
}

/// A synthetic tiny Llama (vocab 128) with a context of 1024: long
/// generations, no EOS.
fn long_model() -> (PathBuf, PathBuf) {
    let c = etwgpu_llm::LlamaConfig { max_context: 1024, ..etwgpu_llm::LlamaConfig::tiny() };
    let model = tmp_file("long.pte", &c.build());
    (model, tmp_file("bytes-long.json", byte_tokenizer(false).to_string().as_bytes()))
}

/// A response: status, headers (lower-case names) and body.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(120))).expect("timeout");
    s
}

fn send(s: &mut TcpStream, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) {
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for (k, v) in headers {
        req += &format!("{k}: {v}\r\n");
    }
    req += &format!("Content-Length: {}\r\n\r\n", body.len());
    s.write_all(req.as_bytes()).and_then(|()| s.write_all(body)).expect("send request");
}

/// Reads the status line and headers.
fn head(r: &mut BufReader<TcpStream>) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    r.read_line(&mut line).expect("status line");
    let status = line.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("{line:?}"));
    let mut headers = Vec::new();
    loop {
        line.clear();
        r.read_line(&mut line).expect("header");
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').expect("a header");
        headers.push((k.to_ascii_lowercase(), v.trim().to_string()));
    }
    (status, headers)
}

/// The next piece of a chunked body; `None` at its end.
fn next_chunk(r: &mut BufReader<TcpStream>) -> Option<Vec<u8>> {
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let n = usize::from_str_radix(line.trim(), 16).ok()?;
    let mut buf = vec![0; n + 2];
    r.read_exact(&mut buf).ok()?;
    buf.truncate(n);
    (n > 0).then_some(buf)
}

fn request(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut s = connect(port);
    send(&mut s, method, path, headers, body);
    let mut r = BufReader::new(s);
    let (status, headers) = head(&mut r);
    let mut body = Vec::new();
    if headers.iter().any(|(k, v)| k == "transfer-encoding" && v.contains("chunked")) {
        while let Some(c) = next_chunk(&mut r) {
            body.extend(c);
        }
    } else {
        r.read_to_end(&mut body).expect("body");
    }
    Reply { status, headers, body }
}

fn post(port: u16, path: &str, body: &Value) -> Reply {
    request(port, "POST", path, &[("Content-Type", "application/json")], body.to_string().as_bytes())
}

/// The `data:` payloads of an SSE body, `[DONE]` included.
fn events(body: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(body).lines().filter_map(|l| l.strip_prefix("data: ")).map(str::to_string).collect()
}

/// The text of a streamed completion (`choices[0].text` or `.delta.content`).
fn streamed_text(body: &[u8]) -> (String, Option<String>) {
    let evs = events(body);
    assert_eq!(evs.last().map(String::as_str), Some("[DONE]"), "{evs:?}");
    let mut text = String::new();
    let mut finish = None;
    for e in &evs[..evs.len() - 1] {
        let v: Value = serde_json::from_str(e).expect("a JSON event");
        let c = &v["choices"][0];
        text += c["text"].as_str().or_else(|| c["delta"]["content"].as_str()).unwrap_or("");
        if let Some(f) = c["finish_reason"].as_str() {
            finish = Some(f.to_string());
        }
    }
    (text, finish)
}

fn npy_ids(path: PathBuf) -> Vec<u32> {
    let t = etwgpu_runtime::Tensor::read_npy(&path).expect("npy");
    t.to_f64_vec().into_iter().map(|v| v as u32).collect()
}

/// Text of byte-tokenizer ids: id `b` is byte `b`.
fn text_of(ids: &[u32]) -> String {
    ids.iter().map(|&b| char::from(b as u8)).collect()
}

fn health(port: u16) -> Value {
    request(port, "GET", "/health", &[], b"").json()
}

/// Waits until the server runs and queues nothing; the time it took.
fn wait_idle(port: u16, limit: Duration) -> Duration {
    let t = Instant::now();
    loop {
        let h = health(port);
        if h["running"] == 0 && h["queued"] == 0 {
            return t.elapsed();
        }
        assert!(t.elapsed() < limit, "still busy after {limit:?}: {h}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Non-streamed and streamed completions of the fixture's prompt give the
/// recorded greedy tokens (PyTorch eager argmax); 16 concurrent clients
/// with different prompts each get the answer that prompt gets alone;
/// `/v1/models`, `/health` and the usage counts.
#[test]
fn serve_completions_match_the_recorded_tokens() {
    if !gpu_available() {
        return;
    }
    let (model, tok) = tiny_fixture();
    let server = serve(&model, &tok, &[]);
    let dir = fixtures_dir().join("llama_tiny_fp32");
    let prompt = npy_ids(dir.join("call0.in0.npy"));
    let expected: Vec<u32> = (1..=3).flat_map(|i| npy_ids(dir.join(format!("call{i}.in0.npy")))).collect();

    let r = post(server.port, "/v1/completions", &json!({"prompt": prompt, "max_tokens": 3}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let v = r.json();
    assert_eq!(v["object"], "text_completion");
    assert_eq!(v["choices"][0]["text"].as_str().expect("text"), text_of(&expected), "{v}");
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(v["usage"]["prompt_tokens"], prompt.len());
    assert_eq!(v["usage"]["completion_tokens"], 3);
    assert_eq!(v["usage"]["total_tokens"], prompt.len() + 3);

    let r = post(
        server.port,
        "/v1/completions",
        &json!({"prompt": prompt, "max_tokens": 3, "stream": true,
        "stream_options": {"include_usage": true}}),
    );
    assert_eq!((r.status, r.header("content-type")), (200, Some("text/event-stream")));
    assert_eq!(streamed_text(&r.body), (text_of(&expected), Some("length".to_string())));
    let evs = events(&r.body);
    let usage: Value = serde_json::from_str(&evs[evs.len() - 2]).expect("usage chunk");
    assert_eq!(usage["usage"]["completion_tokens"], 3, "{usage}");

    let models = request(server.port, "GET", "/v1/models", &[], b"").json();
    assert_eq!(models["data"][0]["id"], "model", "{models}");
    assert_eq!(models["data"][0]["context_length"], 32);

    // 16 prompts, each alone first, then all at once.
    let prompts: Vec<Vec<u32>> = (0..16u32)
        .map(|i| {
            let mut p = prompt.clone();
            p[0] = 3 + i * 7;
            p
        })
        .collect();
    let body = |p: &Vec<u32>, stream: bool| json!({"prompt": p, "max_tokens": 6, "stream": stream});
    let alone: Vec<String> = prompts
        .iter()
        .map(|p| {
            post(server.port, "/v1/completions", &body(p, false)).json()["choices"][0]["text"]
                .as_str()
                .expect("text")
                .to_string()
        })
        .collect();
    let distinct: std::collections::BTreeSet<&String> = alone.iter().collect();
    assert!(distinct.len() >= 4, "the prompts should give different answers: {alone:?}");
    let port = server.port;
    let together: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = prompts
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let b = body(p, i % 2 == 0);
                s.spawn(move || {
                    let r = post(port, "/v1/completions", &b);
                    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
                    if i % 2 == 0 {
                        streamed_text(&r.body).0
                    } else {
                        r.json()["choices"][0]["text"].as_str().expect("text").to_string()
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("client thread")).collect()
    });
    assert_eq!(together, alone, "each concurrent client gets its own answer");
    assert_eq!(health(server.port)["status"], "ok");
}

/// Every bad request gets a 400 (401, 404, 405) with an OpenAI-style error
/// body naming the problem; the server keeps serving.
#[test]
fn serve_rejects_bad_requests() {
    if !gpu_available() {
        return;
    }
    let (model, tok) = tiny_fixture();
    let server = serve(&model, &tok, &["--api-key", "sekret", "--max-tokens", "20"]);
    let auth = [("Authorization", "Bearer sekret"), ("Content-Type", "application/json")];
    let raw = |path: &str, body: &str| request(server.port, "POST", path, &auth, body.as_bytes());
    let check = |r: Reply, status: u16, param: Option<&str>, needle: &str| {
        assert_eq!(r.status, status, "{}", String::from_utf8_lossy(&r.body));
        let v = r.json();
        let e = &v["error"];
        assert!(e["message"].as_str().expect("message").contains(needle), "{v}");
        assert!(e["type"].is_string(), "{v}");
        assert_eq!(e["param"].as_str(), param, "{v}");
        v
    };
    let c = "/v1/completions";
    check(raw(c, "{\"prompt\": [1, 2"), 400, None, "not valid JSON");
    check(raw(c, "[1]"), 400, None, "JSON object");
    check(raw(c, r#"{"prompt":"Hi","max_tokens":"3"}"#), 400, Some("max_tokens"), "non-negative integer");
    check(raw(c, r#"{"prompt":"Hi","temperature":"warm"}"#), 400, Some("temperature"), "number");
    check(raw(c, r#"{"prompt":"Hi","stream":"yes"}"#), 400, Some("stream"), "boolean");
    check(raw(c, r#"{"prompt":{"a":1}}"#), 400, Some("prompt"), "prompt must be");
    check(raw(c, r#"{"prompt":"Hi","top_p":0}"#), 400, Some("top_p"), "(0, 1]");
    check(raw(c, r#"{"prompt":[1,2,999]}"#), 400, Some("prompt"), "outside the vocabulary");
    let long = "x".repeat(40);
    let v = check(raw(c, &json!({"prompt": long}).to_string()), 400, Some("prompt"), "context is 32 tokens");
    assert_eq!(v["error"]["code"], "context_length_exceeded");
    let v = check(raw(c, r#"{"prompt":"Hello","max_tokens":30}"#), 400, Some("max_tokens"), "over this server's limit");
    assert_eq!(v["error"]["code"], Value::Null);
    let v = check(raw(c, r#"{"prompt":"Hello there, friend","max_tokens":19}"#), 400, Some("max_tokens"), "exceeds");
    assert_eq!(v["error"]["code"], "context_length_exceeded");
    let chat = "/v1/chat/completions";
    check(raw(chat, r#"{"messages":[]}"#), 400, Some("messages"), "must not be empty");
    check(raw(chat, r#"{"messages":[{"content":"hi"}]}"#), 400, Some("messages"), "role");
    // Auth, routes and methods.
    let r = request(server.port, "POST", c, &[], br#"{"prompt":"Hi"}"#);
    let v = check(r, 401, None, "API key");
    assert_eq!(v["error"]["type"], "authentication_error");
    let r = request(server.port, "GET", "/v1/models", &[("Authorization", "Bearer wrong")], b"");
    assert_eq!(r.status, 401);
    check(request(server.port, "GET", "/v1/nothing", &auth, b""), 404, None, "no route");
    check(request(server.port, "GET", c, &auth, b""), 405, None, "not allowed");
    assert_eq!(request(server.port, "GET", "/health", &[], b"").status, 200, "/health needs no key");
    // Still serving.
    let r = raw(c, r#"{"prompt":"Hi","max_tokens":2}"#);
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["usage"]["completion_tokens"], 2);
}

/// A tokenizer larger than the model's vocabulary (`tiny_bytelevel`: 400
/// ids, the fixture: 128): a prompt id the tokenizer knows but the model
/// lacks is a `400` naming the model's size, not a failure on the GPU.
#[test]
fn serve_checks_prompt_ids_against_the_model_vocabulary() {
    if !gpu_available() {
        return;
    }
    let tok = fixtures_dir().join("../tokenizers/tiny_bytelevel/tokenizer.json");
    let server = serve(&fixtures_dir().join("llama_tiny_fp32/model.pte"), &tok, &[]);
    let r = post(server.port, "/v1/completions", &json!({"prompt": [5, 300], "max_tokens": 2}));
    assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(&r.body));
    let v = r.json();
    assert!(
        v["error"]["message"].as_str().expect("message").contains("token 300 is outside the vocabulary of 128"),
        "{v}"
    );
    let r = post(server.port, "/v1/completions", &json!({"prompt": [5, 100], "max_tokens": 2}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["usage"]["completion_tokens"], 2);
}

/// Chat: one ChatML turn equals `etwgpu generate --chat`; `stop` strings
/// end the text; a conversation's next turn reuses the KV cache
/// (`usage.prompt_tokens_details.cached_tokens`) and answers as a fresh
/// cache does.
#[test]
fn serve_chat_stop_and_prefix_reuse() {
    if !gpu_available() {
        return;
    }
    let chat_tok = tmp_file("chatml.json", byte_tokenizer(true).to_string().as_bytes());
    let model = fixtures_dir().join("llama_tiny_fp32/model.pte");
    let server = serve(&model, &chat_tok, &[]);
    let r = post(
        server.port,
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 8}),
    );
    let v = r.json();
    assert_eq!(v["object"], "chat.completion", "{v}");
    assert_eq!(v["usage"]["prompt_tokens"], 21, "{v}");
    let reply = v["choices"][0]["message"]["content"].as_str().expect("content").to_string();
    let o = super::etwgpu(&[
        "generate",
        "--model",
        model.to_str().unwrap(),
        "--tokenizer",
        chat_tok.to_str().unwrap(),
        "--prompt",
        "Hi",
        "--chat",
        "--max-tokens",
        "8",
    ]);
    let cli = super::stdout(&o);
    assert_eq!(cli.split_once("\nprompt: ").expect("stats").0, reply, "serve and generate --chat agree");
    let r = post(
        server.port,
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 8, "stream": true}),
    );
    let evs = events(&r.body);
    let first: Value = serde_json::from_str(&evs[0]).expect("json");
    assert_eq!(first["choices"][0]["delta"]["role"], "assistant", "{first}");
    assert_eq!(streamed_text(&r.body).0, reply);
    drop(server);

    // Stop strings and prefix reuse on the longer synthetic model.
    let (model, tok) = long_model();
    let server = serve(&model, &tok, &[]);
    let p1: Vec<u32> = (10..30).collect();
    let v = post(server.port, "/v1/completions", &json!({"prompt": p1, "max_tokens": 12})).json();
    let text = v["choices"][0]["text"].as_str().expect("text").to_string();
    assert_eq!(text.len(), 12, "{v}");
    let stop = text[5..7].to_string();
    let at = text.find(&stop).expect("in the text");
    for stream in [false, true] {
        let r = post(
            server.port,
            "/v1/completions",
            &json!({"prompt": p1, "max_tokens": 12, "stop": [stop],
            "stream": stream}),
        );
        let (got, finish) = if stream {
            streamed_text(&r.body)
        } else {
            let v = r.json();
            (
                v["choices"][0]["text"].as_str().expect("text").to_string(),
                v["choices"][0]["finish_reason"].as_str().map(str::to_string),
            )
        };
        assert_eq!((got.as_str(), finish.as_deref()), (&text[..at], Some("stop")), "stream {stream}");
    }
    // The next turn extends the last request (prompt + reply + more).
    let v = post(server.port, "/v1/completions", &json!({"prompt": p1, "max_tokens": 4})).json();
    let reply: Vec<u32> = v["choices"][0]["text"].as_str().expect("text").bytes().map(u32::from).collect();
    let mut p2 = p1.clone();
    p2.extend(&reply);
    p2.extend([40, 41, 42]);
    let turn = post(server.port, "/v1/completions", &json!({"prompt": p2, "max_tokens": 6})).json();
    assert_eq!(turn["usage"]["prompt_tokens_details"]["cached_tokens"], p1.len() + reply.len() - 1, "{turn}");
    // From a fresh cache (another prompt first), the same answer.
    post(server.port, "/v1/completions", &json!({"prompt": [5, 6, 7], "max_tokens": 2}));
    let fresh = post(server.port, "/v1/completions", &json!({"prompt": p2, "max_tokens": 6})).json();
    assert_eq!(fresh["usage"]["prompt_tokens_details"]["cached_tokens"], 0, "{fresh}");
    assert_eq!(fresh["choices"][0]["text"], turn["choices"][0]["text"]);
}

/// A stream's first event, read from a request left open.
fn open_stream(port: u16, body: &Value) -> BufReader<TcpStream> {
    let mut s = connect(port);
    send(&mut s, "POST", "/v1/completions", &[("Content-Type", "application/json")], body.to_string().as_bytes());
    let mut r = BufReader::new(s);
    let (status, _) = head(&mut r);
    assert_eq!(status, 200);
    r
}

/// With one request running and the queue (of 1) full, the next gets 429
/// with `Retry-After`; a client that disconnects mid-stream frees the GPU
/// at once (long before its 300 tokens), and the queued one runs.
#[test]
fn serve_queue_full_and_cancellation() {
    if !gpu_available() {
        return;
    }
    let (model, tok) = long_model();
    let server = serve(&model, &tok, &["--queue", "1"]);
    let long = json!({"prompt": [1, 2, 3], "max_tokens": 300, "stream": true});
    // Time a whole long generation first.
    let t = Instant::now();
    let r = post(server.port, "/v1/completions", &long);
    let full_time = t.elapsed();
    assert_eq!(streamed_text(&r.body).0.len(), 300);

    let mut running = open_stream(server.port, &long);
    assert!(next_chunk(&mut running).is_some(), "a first event");
    let queued = open_stream(server.port, &long);
    let h = health(server.port);
    assert_eq!((h["running"].as_u64(), h["queued"].as_u64()), (Some(1), Some(1)), "{h}");
    let r = post(server.port, "/v1/completions", &json!({"prompt": [1], "max_tokens": 1}));
    assert_eq!(r.status, 429, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(r.json()["error"]["type"], "rate_limit_error");

    // Both clients go; the server is idle long before a generation ends.
    let t = Instant::now();
    drop(running);
    drop(queued);
    let idle = wait_idle(server.port, full_time * 2);
    eprintln!("cancelled in {:?} (a whole generation takes {full_time:?})", t.elapsed());
    assert!(idle < full_time / 2, "cancellation took {idle:?}, a whole generation {full_time:?}");
    let r = post(server.port, "/v1/completions", &json!({"prompt": [1, 2], "max_tokens": 2}));
    assert_eq!(r.status, 200);
}

/// SIGTERM lets the request in flight finish (its stream ends with
/// `[DONE]`), then the server exits 0.
#[test]
fn serve_shuts_down_gracefully() {
    if !gpu_available() {
        return;
    }
    let (model, tok) = long_model();
    let mut server = serve(&model, &tok, &[]);
    let mut stream = open_stream(server.port, &json!({"prompt": [1, 2, 3], "max_tokens": 100, "stream": true}));
    assert!(next_chunk(&mut stream).is_some());
    let pid = server.child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().expect("kill").success());
    let mut body = Vec::new();
    while let Some(c) = next_chunk(&mut stream) {
        body.extend(c);
    }
    let evs = events(&body);
    assert_eq!(evs.last().map(String::as_str), Some("[DONE]"), "the stream finishes: {evs:?}");
    let t = Instant::now();
    let status = loop {
        if let Some(s) = server.child.try_wait().expect("wait") {
            break s;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "still running after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    assert!(TcpStream::connect(("127.0.0.1", server.port)).is_err(), "no longer listening");
}

/// `curl` as a client: a chat completion and a streamed completion.
#[test]
fn serve_with_curl() {
    if !gpu_available() {
        return;
    }
    let (model, tok) = tiny_chat_fixture();
    let server = serve(&model, &tok, &[]);
    let url = |p: &str| format!("http://127.0.0.1:{}{p}", server.port);
    let curl = |args: &[&str]| {
        let o = Command::new("curl")
            .args(["-sS", "--max-time", "60"])
            .args(args)
            .output()
            .expect("curl runs (apt-get install curl)");
        assert!(o.status.success(), "curl: {}", String::from_utf8_lossy(&o.stderr));
        o.stdout
    };
    let out = curl(&[
        &url("/v1/chat/completions"),
        "-H",
        "Content-Type: application/json",
        "-d",
        r#"{"model":"model","messages":[{"role":"user","content":"Hi"}],"max_tokens":4}"#,
    ]);
    let v: Value = serde_json::from_slice(&out).expect("json");
    assert_eq!(v["choices"][0]["message"]["role"], "assistant", "{v}");
    assert!(v["usage"]["completion_tokens"].as_u64().is_some_and(|n| (1..=4).contains(&n)), "{v}");
    let out = curl(&[
        "-N",
        &url("/v1/completions"),
        "-H",
        "Content-Type: application/json",
        "-d",
        r#"{"prompt":"Hello","max_tokens":5,"stream":true}"#,
    ]);
    let (text, finish) = streamed_text(&out);
    assert_eq!((text.len(), finish.as_deref()), (5, Some("length")));
}

/// RSS of a process in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).expect("VmRSS");
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).expect("a number")
}

/// A soak: for `ETWGPU_SOAK_SECS` (default 60) seconds, requests of every
/// kind (streamed, not, cancelled mid-stream, rejected, chat) from 4
/// clients; the server's RSS after a warm-up and at the end is printed and
/// must stay flat (grow by less than 32 MiB).
#[test]
fn serve_soak_memory_is_flat() {
    if !gpu_available() {
        return;
    }
    let secs: u64 = std::env::var("ETWGPU_SOAK_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    let (model, tok) = tiny_chat_fixture();
    let server = serve(&model, &tok, &[]);
    let pid = server.child.id();
    let port = server.port;
    let round = |i: u64| {
        let p: Vec<u32> = (0..8).map(|k| ((i * 13 + k * 7) % 120 + 3) as u32).collect();
        match i % 5 {
            0 => assert_eq!(post(port, "/v1/completions", &json!({"prompt": p, "max_tokens": 8})).status, 200),
            1 => assert_eq!(
                post(port, "/v1/completions", &json!({"prompt": p, "max_tokens": 8, "stream": true})).status,
                200
            ),
            2 => {
                let mut s = open_stream(port, &json!({"prompt": p, "max_tokens": 20, "stream": true}));
                let _ = next_chunk(&mut s);
            }
            3 => assert_eq!(post(port, "/v1/completions", &json!({"prompt": p, "max_tokens": "x"})).status, 400),
            _ => assert_eq!(
                post(
                    port,
                    "/v1/chat/completions",
                    &json!({"messages": [{"role": "user", "content": "Hi"}],
                "max_tokens": 4})
                )
                .status,
                200
            ),
        }
    };
    for i in 0..40 {
        round(i);
    }
    wait_idle(port, Duration::from_secs(30));
    let start = rss_kib(pid);
    let t = Instant::now();
    let n = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for c in 0..4u64 {
            let n = &n;
            s.spawn(move || {
                let mut i = c;
                while t.elapsed() < Duration::from_secs(secs) {
                    round(i);
                    i += 4;
                    n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
    });
    wait_idle(port, Duration::from_secs(30));
    let end = rss_kib(pid);
    let requests = n.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!(
        "soak: {requests} requests in {secs} s; server RSS {} MiB at start, {} MiB at end",
        start / 1024,
        end / 1024
    );
    assert!(end < start + 32 * 1024, "RSS grew from {start} KiB to {end} KiB over {requests} requests");
}
