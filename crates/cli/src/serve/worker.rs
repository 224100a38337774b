//! The one thread that owns the GPU side of `etwgpu serve`: the
//! [`Generator`] and its KV cache. It takes [`Job`]s in arrival order from
//! the bounded queue, runs each to its end and sends the text back piece by
//! piece; a job whose client has gone is dropped before it starts and
//! stopped within a few tokens once running (generation goes in short
//! runs of `Generator::generate`, and the reply channel's closing is
//! checked between them). The cache keeps the last request's tokens, so a
//! request whose prompt extends them (the next turn of a conversation)
//! feeds only the new tokens.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc;

use etwgpu_llm::{GenerateOptions, Generator, Sampler, Tokenizer};

use super::api::{Cut, Usage, cut};

/// Tokens per `Generator::generate` run: how soon a disconnected client's
/// job stops, against the cost of restarting the two-runs-ahead decode.
const TOKENS_PER_RUN: usize = 8;

/// What the worker sends back for a job.
#[derive(Debug)]
pub enum Event {
    /// More text.
    Text(String),
    /// The end: the finish reason (`stop` or `length`) and the counts.
    Done(&'static str, Usage),
    /// The job failed on the GPU side.
    Failed(String),
}

/// One queued completion.
#[derive(Debug)]
pub struct Job {
    /// The prompt's token ids (checked to fit the context with
    /// `max_tokens`).
    pub prompt: Vec<u32>,
    /// Tokens to generate at most.
    pub max_tokens: usize,
    /// The request's sampler.
    pub sampler: Sampler,
    /// Token ids that end the reply (ChatML's `<|im_end|>` for chat); EOS
    /// ids always do.
    pub stop_tokens: Vec<u32>,
    /// Strings that end the reply.
    pub stop: Vec<String>,
    /// Where the events go; closed when the client has gone.
    pub events: mpsc::UnboundedSender<Event>,
}

/// Counters `/health` reports.
#[derive(Debug, Default)]
pub struct Load {
    /// Jobs accepted and not yet taken by the worker.
    pub queued: AtomicUsize,
    /// Jobs running (0 or 1).
    pub running: AtomicUsize,
    /// Jobs finished, cancelled or failed since start.
    pub done: AtomicUsize,
}

/// The worker's state between jobs.
struct Worker {
    generator: Generator,
    tok: Arc<Tokenizer>,
    /// The tokens in the KV cache, in order: `generator.position()` of
    /// them.
    cached: Vec<u32>,
}

/// Runs jobs from `jobs` until the queue's senders are all gone.
pub fn run(generator: Generator, tok: Arc<Tokenizer>, mut jobs: mpsc::Receiver<Job>, load: Arc<Load>) {
    let mut w = Worker { generator, tok, cached: Vec::new() };
    while let Some(job) = jobs.blocking_recv() {
        load.queued.fetch_sub(1, Ordering::SeqCst);
        if !job.events.is_closed() {
            load.running.fetch_add(1, Ordering::SeqCst);
            let events = job.events.clone();
            if let Err(e) = w.job(job) {
                // The cache's contents are unknown after a failure.
                w.generator.reset();
                w.cached.clear();
                let _ = events.send(Event::Failed(crate::error_chain(&e)));
            }
            load.running.fetch_sub(1, Ordering::SeqCst);
        }
        load.done.fetch_add(1, Ordering::SeqCst);
    }
}

impl Worker {
    fn job(&mut self, mut job: Job) -> etwgpu_llm::Result<()> {
        // Prefix reuse: keep the cache when it holds the start of this
        // prompt (and at least one prompt token is left to feed).
        let reuse = self.cached.len() < job.prompt.len()
            && job.prompt.starts_with(&self.cached)
            && self.generator.position() == self.cached.len();
        if !reuse {
            self.generator.reset();
            self.cached.clear();
        }
        let mut usage =
            Usage { prompt_tokens: job.prompt.len(), cached_tokens: self.cached.len(), completion_tokens: 0 };
        let mut feed = job.prompt[self.cached.len()..].to_vec();
        let stops: Vec<u32> = job.stop_tokens.iter().chain(&self.generator.metadata().eos_ids).copied().collect();
        let mut decoder = self.tok.stream_decoder();
        let mut text = String::new();
        let mut sent = 0;
        let mut finish = "length";
        let mut ended = false;
        let mut gone = false;
        while usage.completion_tokens < job.max_tokens && !ended && !gone {
            let n = TOKENS_PER_RUN.min(job.max_tokens - usage.completion_tokens);
            let options = GenerateOptions { max_new_tokens: n, stop_tokens: stops.clone(), stop_at_eos: true };
            let tok = &self.tok;
            let mut decode_err = None;
            let (tokens, _) = self.generator.generate(&feed, &options, &mut job.sampler, |token| {
                if ended || gone {
                    return;
                }
                usage.completion_tokens += 1;
                if stops.contains(&token) {
                    finish = "stop";
                    ended = true;
                    return;
                }
                match decoder.push(tok, token) {
                    Ok(piece) => text.push_str(&piece),
                    Err(e) => {
                        decode_err.get_or_insert(e);
                        return;
                    }
                }
                let upto = match cut(&text, &job.stop) {
                    Cut::Stop(at) => {
                        finish = "stop";
                        ended = true;
                        text.truncate(at);
                        at
                    }
                    Cut::Safe(at) => at,
                };
                if upto > sent {
                    gone = job.events.send(Event::Text(text[sent..upto].to_string())).is_err();
                    sent = upto;
                }
            })?;
            if let Some(e) = decode_err {
                return Err(e);
            }
            // Every token but the last was fed.
            self.cached.extend_from_slice(&feed);
            self.cached.extend_from_slice(&tokens[..tokens.len().saturating_sub(1)]);
            feed = tokens.last().copied().into_iter().collect();
            gone |= job.events.is_closed();
            if tokens.len() < n || feed.is_empty() {
                // A stop or EOS token ended the run.
                if !ended {
                    finish = "stop";
                }
                break;
            }
        }
        if self.generator.position() != self.cached.len() {
            // Not what the cache holds: start the next job afresh.
            self.cached.clear();
            self.generator.reset();
        }
        if gone {
            return Ok(());
        }
        // Text held back for a stop string that never came.
        if sent < text.len() {
            let _ = job.events.send(Event::Text(text[sent..].to_string()));
        }
        let _ = job.events.send(Event::Done(finish, usage));
        Ok(())
    }
}
