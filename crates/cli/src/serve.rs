//! `etwgpu serve`: an OpenAI-compatible HTTP server for one Llama-family
//! program. `POST /v1/completions` and `POST /v1/chat/completions` (JSON,
//! or server-sent events with `stream: true`), `GET /v1/models`,
//! `GET /health`. HTTP is hyper's HTTP/1 server on a small tokio runtime;
//! the GPU work runs on one worker thread ([`worker`]) that owns the
//! generator, fed through a bounded FIFO queue (full: `429` with
//! `Retry-After`). Handlers tokenize and check a request, so bad requests
//! get their `400` without waiting for the GPU. SIGINT or SIGTERM stops
//! accepting connections, lets running and queued requests finish (for up
//! to `--shutdown-grace` seconds, after which they are cut off) and exits.

mod api;
mod worker;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, combinators::BoxBody};
use hyper::body::{Body, Frame, Incoming};
use hyper::{Method, StatusCode};
use tokio::sync::mpsc;

use etwgpu_llm::{ChatMessage, Sampler, Tokenizer, chatml};

use crate::{Failure, error_chain};
use api::{ApiError, Ids, Prompt, Usage};
use worker::{Event, Job, Load};

/// The flags of `serve`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  etwgpu serve --model smollm2_q4.pte --tokenizer tokenizer.json
  etwgpu serve --model smollm2_q4.pte --tokenizer tokenizer.json --host 0.0.0.0 --port 8000 --api-key secret
  curl http://127.0.0.1:8080/v1/chat/completions -H 'Content-Type: application/json' \\
       -d '{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":32}'")]
pub struct ServeCli {
    /// The program (`.pte`, `export_llama` layout).
    #[arg(long = "model", value_name = "MODEL.pte")]
    model: PathBuf,
    /// Its HuggingFace `tokenizer.json`.
    #[arg(long, value_name = "T.json")]
    tokenizer: PathBuf,
    /// The address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    host: String,
    /// The port to listen on (0: any free port, printed at start).
    #[arg(long, value_name = "PORT", default_value_t = 8080)]
    port: u16,
    /// Require `Authorization: Bearer KEY` on the `/v1` routes.
    #[arg(long, value_name = "KEY")]
    api_key: Option<String>,
    /// Requests that may wait for the GPU; more get 429.
    #[arg(long, value_name = "N", default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..))]
    queue: u64,
    /// The largest `max_tokens` a request may ask for (and the default),
    /// besides the room left in the context.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    max_tokens: usize,
    /// The model name `/v1/models` reports (default: the file's stem).
    #[arg(long, value_name = "NAME")]
    model_name: Option<String>,
    /// Seconds requests get to finish after SIGINT/SIGTERM.
    #[arg(long, value_name = "S", default_value_t = 10)]
    shutdown_grace: u64,
    /// The KV cache's storage.
    #[arg(long, value_name = "f16|f32", default_value = "f16")]
    kv_cache: crate::KvCache,
    #[command(flatten)]
    load: crate::LoadFlags,
}

/// What every handler shares.
#[derive(Debug)]
struct State {
    tok: Arc<Tokenizer>,
    model: String,
    context: usize,
    /// Token ids a prompt may hold: below the model's vocabulary (when it
    /// says) and the tokenizer's.
    vocab: usize,
    max_tokens: usize,
    api_key: Option<String>,
    /// `<|im_end|>`, when the tokenizer has it (chat stops there).
    im_end: Option<u32>,
    jobs: mpsc::Sender<Job>,
    load: Arc<Load>,
    next_id: AtomicU64,
    queue: usize,
}

type Response = hyper::Response<BoxBody<Bytes, Infallible>>;

fn json_response(status: u16, v: &serde_json::Value) -> Response {
    let body = Full::new(Bytes::from(v.to_string() + "\n")).boxed();
    let mut r = hyper::Response::new(body);
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    r
}

fn error_response(e: &ApiError) -> Response {
    json_response(e.status, &e.body())
}

/// A streamed body: server-sent events from the handler's task. When the
/// client goes away hyper drops it, which closes the channel and so stops
/// the job.
struct Sse(mpsc::UnboundedReceiver<Bytes>);

impl Body for Sse {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

/// Runs `serve` until SIGINT or SIGTERM.
pub fn run(a: ServeCli) -> Result<(), Failure> {
    let program =
        etwgpu_format::Program::open(&a.model).map_err(|e| Failure::error(format!("{}: {e}", a.model.display())))?;
    let tok = Arc::new(Tokenizer::from_file(&a.tokenizer).map_err(|e| Failure::error(error_chain(&e)))?);
    let addr: SocketAddr = format!("{}:{}", a.host, a.port)
        .parse()
        .or_else(|_| {
            use std::net::ToSocketAddrs as _;
            (a.host.as_str(), a.port).to_socket_addrs().ok().and_then(|mut it| it.next()).ok_or(())
        })
        .map_err(|()| Failure::usage(format!("--host {:?} is not an address", a.host)))?;
    let model = a.model_name.clone().unwrap_or_else(|| {
        a.model.file_stem().map_or_else(|| "model".to_string(), |s| s.to_string_lossy().into_owned())
    });
    // The worker loads the generator on its own thread and keeps it.
    let (jobs_tx, jobs_rx) = mpsc::channel::<Job>(a.queue as usize);
    let load = Arc::new(Load::default());
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let worker = {
        let (tok, load, kv) = (tok.clone(), load.clone(), a.kv_cache == crate::KvCache::F16);
        let load_flags = a.load;
        std::thread::Builder::new()
            .name("etwgpu-gpu".into())
            .spawn(move || {
                let loaded = etwgpu_runtime::Runtime::new()
                    .map_err(|e| Failure::error(error_chain(&e)))
                    .and_then(|rt| crate::load_generator(&rt, &program, kv, load_flags).map(|g| (rt, g)));
                match loaded {
                    Ok((_rt, generator)) => {
                        let meta = generator.metadata();
                        let _ = ready_tx.send(Ok((meta.max_context_len, meta.vocab_size)));
                        worker::run(generator, tok, jobs_rx, load);
                    }
                    Err(f) => {
                        let _ = ready_tx.send(Err(f));
                    }
                }
            })
            .map_err(Failure::error)?
    };
    let (context, model_vocab) =
        ready_rx.recv().map_err(|_| Failure::error("the GPU worker thread ended while loading"))??;
    let state = Arc::new(State {
        im_end: tok.token_to_id("<|im_end|>"),
        vocab: model_vocab.map_or(tok.vocab_size(), |v| v.min(tok.vocab_size())),
        tok,
        model,
        context,
        max_tokens: a.max_tokens,
        api_key: a.api_key.clone(),
        jobs: jobs_tx,
        load,
        next_id: AtomicU64::new(1),
        queue: a.queue as usize,
    });
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().map_err(Failure::error)?;
    rt.block_on(serve(state, addr, Duration::from_secs(a.shutdown_grace)))?;
    // Every sender is gone: the worker ends after its current job.
    rt.shutdown_timeout(Duration::from_secs(1));
    let _ = worker.join();
    Ok(())
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}

async fn serve(state: Arc<State>, addr: SocketAddr, grace: Duration) -> Result<(), Failure> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Failure::error(format!("cannot listen on {addr}: {e}")))?;
    let local = listener.local_addr().map_err(Failure::error)?;
    eprintln!("etwgpu serve: {} (context {}) on http://{local}", state.model, state.context);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let signal = shutdown_signal();
    tokio::pin!(signal);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let state = state.clone();
                let service = hyper::service::service_fn(move |req| {
                    let state = state.clone();
                    async move { Ok::<_, Infallible>(handle(state, req).await) }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    let _ = conn.await;
                });
            }
            () = &mut signal => break,
        }
    }
    drop(listener);
    eprintln!("etwgpu serve: shutting down (up to {} s for requests in flight)", grace.as_secs());
    if tokio::time::timeout(grace, graceful.shutdown()).await.is_err() {
        eprintln!("etwgpu serve: requests still running after {} s were cut off", grace.as_secs());
    }
    Ok(())
}

async fn handle(state: Arc<State>, req: hyper::Request<Incoming>) -> Response {
    let path = req.uri().path().to_string();
    let v1 = path.starts_with("/v1/");
    if v1 && let Some(key) = &state.api_key {
        let given = req.headers().get(hyper::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
        if given.and_then(|v| v.strip_prefix("Bearer ")) != Some(key.as_str()) {
            let e = ApiError {
                status: 401,
                message: "a valid API key is needed: Authorization: Bearer KEY".into(),
                kind: "authentication_error",
                param: None,
                code: Some("invalid_api_key"),
            };
            return error_response(&e);
        }
    }
    match (req.method(), path.as_str()) {
        (&Method::GET, "/health") => json_response(
            200,
            &serde_json::json!({
                "status": "ok", "model": state.model,
                "running": state.load.running.load(Ordering::SeqCst),
                "queued": state.load.queued.load(Ordering::SeqCst),
                "done": state.load.done.load(Ordering::SeqCst),
            }),
        ),
        (&Method::GET, "/v1/models") => json_response(
            200,
            &serde_json::json!({"object": "list", "data": [{"id": state.model, "object": "model", "created": 0,
                "owned_by": "etwgpu", "context_length": state.context}]}),
        ),
        (&Method::POST, "/v1/completions") => {
            completion(state, req, false).await.unwrap_or_else(|e| error_response(&e))
        }
        (&Method::POST, "/v1/chat/completions") => {
            completion(state, req, true).await.unwrap_or_else(|e| error_response(&e))
        }
        (_, "/health" | "/v1/models" | "/v1/completions" | "/v1/chat/completions") => error_response(&ApiError {
            status: 405,
            ..ApiError::invalid(None, format!("{} is not allowed on {path}", req.method()))
        }),
        _ => error_response(&ApiError { status: 404, ..ApiError::invalid(None, format!("no route {path}")) }),
    }
}

/// The largest request body read (bytes).
const MAX_BODY_BYTES: usize = 4 << 20;

async fn completion(state: Arc<State>, req: hyper::Request<Incoming>, chat: bool) -> Result<Response, ApiError> {
    let body = http_body_util::Limited::new(req.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
        .map_err(|e| ApiError::invalid(None, format!("cannot read the request body: {e}")))?
        .to_bytes();
    let r = api::parse(&body, chat)?;
    let (prompt, stop_tokens) = match &r.prompt {
        Prompt::Text(t) => (encode(&state, t)?, Vec::new()),
        Prompt::Tokens(ids) => (ids.clone(), Vec::new()),
        Prompt::Chat(messages) => {
            let messages: Vec<ChatMessage> = messages.clone();
            (encode(&state, &chatml(&messages, true))?, state.im_end.into_iter().collect())
        }
    };
    if prompt.is_empty() {
        return Err(ApiError::invalid(Some("prompt"), "the prompt is empty: it needs at least one token"));
    }
    let vocab = state.vocab;
    if let Some(t) = prompt.iter().find(|&&t| t as usize >= vocab) {
        return Err(ApiError::invalid(Some("prompt"), format!("token {t} is outside the vocabulary of {vocab}")));
    }
    if prompt.len() >= state.context {
        return Err(ApiError::invalid(
            Some(if chat { "messages" } else { "prompt" }),
            format!("the prompt is {} tokens; this model's context is {} tokens", prompt.len(), state.context),
        )
        .with_code("context_length_exceeded"));
    }
    let room = state.context - prompt.len();
    let max_tokens = match r.max_tokens {
        Some(n) if n > state.max_tokens => {
            return Err(ApiError::invalid(
                Some("max_tokens"),
                format!("max_tokens = {n} is over this server's limit of {}", state.max_tokens),
            ));
        }
        Some(n) if n > room => {
            return Err(ApiError::invalid(
                Some("max_tokens"),
                format!(
                    "max_tokens = {n} with a prompt of {} tokens exceeds the context of {} tokens (at most {room})",
                    prompt.len(),
                    state.context
                ),
            )
            .with_code("context_length_exceeded"));
        }
        Some(n) => n,
        None => room.min(state.max_tokens),
    };
    let sampler = Sampler::new(r.sampler.clone()).map_err(|e| ApiError::invalid(None, e.to_string()))?;
    let (events, mut rx) = mpsc::unbounded_channel();
    let usage0 = Usage { prompt_tokens: prompt.len(), ..Usage::default() };
    let job = Job { prompt, max_tokens, sampler, stop_tokens, stop: r.stop.clone(), events };
    state.load.queued.fetch_add(1, Ordering::SeqCst);
    if let Err(e) = state.jobs.try_send(job) {
        state.load.queued.fetch_sub(1, Ordering::SeqCst);
        let full = matches!(e, mpsc::error::TrySendError::Full(_));
        let mut resp = error_response(&ApiError {
            status: if full { 429 } else { 503 },
            message: if full {
                format!("the queue is full ({} requests waiting); retry later", state.queue)
            } else {
                "the server is shutting down".into()
            },
            kind: if full { "rate_limit_error" } else { "server_error" },
            param: None,
            code: None,
        });
        resp.headers_mut().insert(hyper::header::RETRY_AFTER, hyper::header::HeaderValue::from_static("1"));
        return Ok(resp);
    }
    let n = state.next_id.fetch_add(1, Ordering::SeqCst);
    let created = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let ids = Ids {
        id: format!("{}-{n}", if chat { "chatcmpl" } else { "cmpl" }),
        created,
        model: state.model.clone(),
        chat,
    };
    if !r.stream {
        let mut text = String::new();
        while let Some(ev) = rx.recv().await {
            match ev {
                Event::Text(t) => text.push_str(&t),
                Event::Done(finish, usage) => return Ok(json_response(200, &ids.response(&text, finish, &usage))),
                Event::Failed(msg) => return Err(server_error(msg)),
            }
        }
        return Err(server_error("the request was dropped by the GPU worker (shutting down)".into()));
    }
    // Streamed: forward events as SSE until done or the client goes (then
    // `tx.send` fails, this task returns, `rx` drops and the worker stops).
    let (tx, body) = mpsc::unbounded_channel::<Bytes>();
    let include_usage = r.include_usage;
    tokio::spawn(async move {
        let sse = |v: serde_json::Value| Bytes::from(format!("data: {v}\n\n"));
        let mut first = true;
        if chat && tx.send(sse(ids.chunk(None, true, None))).is_err() {
            return;
        }
        if chat {
            first = false;
        }
        loop {
            tokio::select! {
                ev = rx.recv() => {
                    let (chunk, end) = match ev {
                        Some(Event::Text(t)) => (sse(ids.chunk(Some(&t), first, None)), None),
                        Some(Event::Done(finish, usage)) => (sse(ids.chunk(None, false, Some(finish))), Some(usage)),
                        Some(Event::Failed(msg)) => (sse(server_error(msg).body()), Some(usage0)),
                        None => (sse(server_error("the request was dropped (shutting down)".into()).body()), Some(usage0)),
                    };
                    first = false;
                    if tx.send(chunk).is_err() {
                        return;
                    }
                    if let Some(usage) = end {
                        if include_usage {
                            let _ = tx.send(sse(ids.usage_chunk(&usage)));
                        }
                        let _ = tx.send(Bytes::from_static(b"data: [DONE]\n\n"));
                        return;
                    }
                }
                () = tx.closed() => return,
            }
        }
    });
    let mut resp = hyper::Response::new(Sse(body).boxed());
    let h = resp.headers_mut();
    h.insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("text/event-stream"));
    h.insert(hyper::header::CACHE_CONTROL, hyper::header::HeaderValue::from_static("no-cache"));
    Ok(resp)
}

fn encode(state: &State, text: &str) -> Result<Vec<u32>, ApiError> {
    state.tok.encode(text).map_err(|e| ApiError::invalid(Some("prompt"), error_chain(&e)))
}

fn server_error(message: String) -> ApiError {
    ApiError { status: 500, message, kind: "server_error", param: None, code: None }
}
