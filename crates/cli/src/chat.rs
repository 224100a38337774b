//! `etwgpu chat`: an interactive ChatML conversation with an instruct
//! model. Each line read from stdin is a user turn; the reply streams to
//! stdout. The conversation lives in the model's KV cache, so a turn feeds
//! only its own tokens. A reply gets at most `--max-tokens` and at most the
//! room left in the context; when less than 64 tokens of room would be
//! left, the oldest turns are dropped and the rest is fed again. `/reset` starts
//! over, `/quit` (or end of input) ends.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::PathBuf;

use etwgpu_format::Program;
use etwgpu_llm::{ChatMessage, GenerateOptions, Generator, Sampler, Tokenizer, chatml};
use etwgpu_runtime::Runtime;

use crate::Failure;

/// The least room a reply gets (or `--max-tokens`, if smaller) before the
/// oldest turns are dropped.
const MIN_REPLY_TOKENS: usize = 64;

/// Options of `chat`.
#[derive(Debug)]
pub struct ChatArgs {
    model: PathBuf,
    tokenizer: PathBuf,
    system: Option<String>,
    flags: crate::GenSettings,
}

/// The flags of `chat`, as clap reads them.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  etwgpu chat --model smollm2.pte --tokenizer tokenizer.json
  etwgpu chat --model smollm2.pte --tokenizer tokenizer.json --system \"You are terse.\" --temperature 0.7")]
pub struct ChatCli {
    /// The program (`.pte`, `export_llama` layout, a ChatML instruct model).
    #[arg(long = "model", value_name = "MODEL.pte")]
    model: PathBuf,
    /// Its HuggingFace `tokenizer.json`.
    #[arg(long, value_name = "T.json")]
    tokenizer: PathBuf,
    /// A ChatML system turn at the start of the conversation.
    #[arg(long, value_name = "TEXT")]
    system: Option<String>,
    #[command(flatten)]
    flags: crate::GenFlags,
}

impl ChatCli {
    /// The options `chat` works from.
    pub fn into_args(self) -> ChatArgs {
        ChatArgs {
            model: self.model,
            tokenizer: self.tokenizer,
            system: self.system,
            flags: self.flags.with_default_max_tokens(256),
        }
    }
}

/// One conversation on a loaded model.
struct Conversation {
    generator: Generator,
    tok: Tokenizer,
    sampler: Sampler,
    system: Option<String>,
    /// Finished turns: (user, assistant).
    turns: Vec<(String, String)>,
    /// Tokens that belong in the cache before the next turn (the end of
    /// the last reply: its final sampled token is never fed by `generate`).
    unfed: Vec<u32>,
    im_end: u32,
    max_tokens: usize,
}

impl Conversation {
    /// The messages of the kept turns plus `user`, as ChatML ready for the
    /// assistant's reply.
    fn transcript(&self, keep_from: usize, user: &str) -> String {
        let mut messages: Vec<ChatMessage> = self.system.iter().map(|s| ChatMessage::new("system", s)).collect();
        for (u, a) in &self.turns[keep_from..] {
            messages.push(ChatMessage::new("user", u));
            messages.push(ChatMessage::new("assistant", a));
        }
        messages.push(ChatMessage::new("user", user));
        chatml(&messages, true)
    }

    /// Runs one user turn, streaming the reply into `out`; notes go to
    /// `err`.
    fn turn(&mut self, user: &str, out: &mut dyn std::io::Write, err: &mut dyn std::io::Write) -> Result<(), Failure> {
        let context = self.generator.metadata().max_context_len;
        let mut feed = if self.generator.position() == 0 {
            self.tok.encode(&self.transcript(self.turns.len(), user)).map_err(Failure::error)?
        } else {
            let mut f = self.unfed.clone();
            f.extend(self.tok.encode(&chatml(&[ChatMessage::new("user", user)], true)).map_err(Failure::error)?);
            f
        };
        // A reply may be shorter than --max-tokens when the context is
        // nearly full, but gets at least `want` tokens of room: else the
        // oldest turns go.
        let want = self.max_tokens.min(MIN_REPLY_TOKENS).min(context.saturating_sub(1));
        let room = |used: usize| context.saturating_sub(used);
        if room(self.generator.position() + feed.len()) < want {
            // Drop the oldest turns until the conversation fits again.
            let mut kept = None;
            for from in 0..=self.turns.len() {
                let ids = self.tok.encode(&self.transcript(from, user)).map_err(Failure::error)?;
                if room(ids.len()) >= want {
                    kept = Some((from, ids));
                    break;
                }
            }
            let Some((from, ids)) = kept else {
                writeln!(err, "[this message alone does not fit the context of {context} tokens; say less]")
                    .map_err(Failure::error)?;
                return Ok(());
            };
            writeln!(err, "[context full: dropped {} earlier turn(s)]", from).map_err(Failure::error)?;
            self.turns.drain(..from);
            self.generator.reset();
            feed = ids;
        }
        let budget = self.max_tokens.min(room(self.generator.position() + feed.len()));
        let options = GenerateOptions { max_new_tokens: budget, stop_tokens: vec![self.im_end], stop_at_eos: true };
        let stops: Vec<u32> = options.stop_tokens.iter().chain(&self.generator.metadata().eos_ids).copied().collect();
        let mut decoder = self.tok.stream_decoder();
        let mut reply = String::new();
        let mut write_err = None;
        let mut decode_err = None;
        let tok = &self.tok;
        let (tokens, stats) = self
            .generator
            .generate(&feed, &options, &mut self.sampler, |token| {
                if stops.contains(&token) {
                    return;
                }
                let piece = decoder.push(tok, token).unwrap_or_else(|e| {
                    decode_err.get_or_insert(e);
                    String::new()
                });
                reply.push_str(&piece);
                if write_err.is_none()
                    && let Err(e) = out.write_all(piece.as_bytes()).and_then(|()| out.flush())
                {
                    write_err = Some(e);
                }
            })
            .map_err(Failure::error)?;
        if let Some(e) = write_err {
            return Err(Failure::error(e));
        }
        if let Some(e) = decode_err {
            return Err(Failure::error(e));
        }
        writeln!(out).map_err(Failure::error)?;
        // The last sampled token was not fed; close the turn after it.
        let last = tokens.last().copied();
        self.unfed = last.into_iter().collect();
        if last != Some(self.im_end) {
            self.unfed.push(self.im_end);
        }
        self.unfed.extend(self.tok.encode("\n").map_err(Failure::error)?);
        self.turns.push((user.to_string(), reply));
        writeln!(
            err,
            "[{} prompt tokens at {:.1} tokens/s, {} generated at {:.1} tokens/s; {} of {context} context tokens used]",
            stats.prompt_tokens,
            stats.prefill_tokens_per_s(),
            stats.generated_tokens,
            stats.decode_tokens_per_s(),
            self.generator.position() + self.unfed.len(),
        )
        .map_err(Failure::error)
    }
}

/// Runs `chat` until `/quit` or the end of stdin.
pub fn run(a: &ChatArgs) -> Result<(), Failure> {
    let program = Program::open(&a.model).map_err(|e| Failure::error(format!("{}: {e}", a.model.display())))?;
    let tok = Tokenizer::from_file(&a.tokenizer).map_err(Failure::error)?;
    let im_end = tok.token_to_id("<|im_end|>").ok_or_else(|| {
        Failure::error(format!("{}: no <|im_end|> token; chat needs a ChatML model", a.tokenizer.display()))
    })?;
    let sampler = Sampler::new(a.flags.sampler.clone()).map_err(Failure::error)?;
    let rt = Runtime::new().map_err(Failure::error)?;
    let generator = crate::load_generator(&rt, &program, a.flags.kv_cache_f16, a.flags.load)?;
    let mut chat = Conversation {
        generator,
        tok,
        sampler,
        system: a.system.clone(),
        turns: Vec::new(),
        unfed: Vec::new(),
        im_end,
        max_tokens: a.flags.max_tokens,
    };
    let interactive = std::io::stdin().is_terminal();
    let mut out = std::io::stdout().lock();
    let mut err = std::io::stderr().lock();
    if interactive {
        writeln!(err, "chat with {} (/reset starts over, /quit ends)", a.model.display()).map_err(Failure::error)?;
    }
    let mut lines = std::io::stdin().lock().lines();
    loop {
        if interactive {
            write!(out, "> ").and_then(|()| out.flush()).map_err(Failure::error)?;
        }
        let Some(line) = lines.next() else { break };
        let line = line.map_err(Failure::error)?;
        match line.trim() {
            "" => {}
            "/quit" => break,
            "/reset" => {
                chat.generator.reset();
                chat.turns.clear();
                chat.unfed.clear();
                writeln!(err, "[reset]").map_err(Failure::error)?;
            }
            text => chat.turn(text, &mut out, &mut err)?,
        }
    }
    Ok(())
}
