//! HuggingFace `tokenizer.json` files through the `tokenizers` crate
//! (built pure-Rust: `fancy-regex` instead of Oniguruma, so it also builds
//! for wasm32), streaming decode that holds back unfinished UTF-8, and the
//! ChatML chat template.
//!
//! Any model family the crate reads works (byte-level BPE as GPT-2, SmolLM2,
//! Qwen2 and Llama 3; SentencePiece-style BPE with byte fallback; Unigram;
//! WordPiece), normalizers and pre-tokenizers included. The crate's errors
//! become [`Error::Tokenizer`] / [`Error::TokenizerFailed`] with the message
//! as text.

use std::collections::BTreeSet;
use std::path::Path;

use crate::error::{Error, Result};

/// Where an in-memory `tokenizer.json` came from, for error messages.
const IN_MEMORY: &str = "(in-memory tokenizer.json)";

/// A tokenizer read from a HuggingFace `tokenizer.json`.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    /// Ids of the added tokens marked `special` (e.g. `<|im_end|>`).
    special_ids: BTreeSet<u32>,
}

fn failed(during: &'static str, e: &tokenizers::Error) -> Error {
    Error::TokenizerFailed { during, problem: e.to_string() }
}

impl Tokenizer {
    /// Reads a `tokenizer.json`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let bad = |problem: String| Error::Tokenizer { path: path.display().to_string(), problem };
        let bytes = std::fs::read(path).map_err(|e| bad(format!("cannot read: {e}")))?;
        Self::parse(&bytes).map_err(bad)
    }

    /// Parses the bytes of a `tokenizer.json`.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        Self::parse(bytes).map_err(|problem| Error::Tokenizer { path: IN_MEMORY.into(), problem })
    }

    /// Parses the text of a `tokenizer.json`.
    pub fn from_json(text: &str) -> Result<Self> {
        Self::from_bytes(text.as_bytes())
    }

    fn parse(bytes: &[u8]) -> std::result::Result<Self, String> {
        let inner = tokenizers::Tokenizer::from_bytes(bytes).map_err(|e| e.to_string())?;
        let special_ids =
            inner.get_added_tokens_decoder().into_iter().filter(|(_, t)| t.special).map(|(id, _)| id).collect();
        Ok(Self { inner, special_ids })
    }

    /// Number of ids (vocab plus added tokens).
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// The id of a token string (vocab or added), if any.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The token string of an id (as stored: byte-level tokens in GPT-2's
    /// byte-to-character map), if any.
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// Whether `id` is an added token marked special (`<|im_start|>`,
    /// `<|endoftext|>`, ...).
    pub fn is_special(&self, id: u32) -> bool {
        self.special_ids.contains(&id)
    }

    /// Encodes `text` as it is: added tokens such as `<|im_start|>` are
    /// recognised, but the post-processor adds nothing (no BOS; a chat
    /// template carries its own markers).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>> {
        let encoding = self.inner.encode(text, false).map_err(|e| failed("encoding", &e))?;
        Ok(encoding.get_ids().to_vec())
    }

    /// Decodes `ids` to text, special tokens included verbatim (invalid
    /// UTF-8 becomes U+FFFD; unknown ids are left out).
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        self.inner.decode(ids, false).map_err(|e| failed("decoding", &e))
    }

    /// A decoder for streaming: it holds back incomplete UTF-8 sequences.
    pub fn stream_decoder(&self) -> StreamDecoder {
        StreamDecoder::default()
    }
}

/// Streams tokens to text, holding back the tokens of an unfinished
/// character (HuggingFace's `DecodeStream`, without borrowing the
/// tokenizer): each step decodes the tokens since the last complete text
/// and emits what the new token added once it no longer ends in U+FFFD.
#[derive(Debug, Default, Clone)]
pub struct StreamDecoder {
    ids: Vec<u32>,
    prefix: String,
    prefix_idx: usize,
}

impl StreamDecoder {
    /// Adds `token`; returns the text now complete (empty while a character
    /// is unfinished).
    pub fn push(&mut self, tokenizer: &Tokenizer, token: u32) -> Result<String> {
        let step = tokenizers::step_decode_stream(
            &tokenizer.inner,
            vec![token],
            false,
            &mut self.ids,
            &mut self.prefix,
            &mut self.prefix_idx,
        );
        Ok(step.map_err(|e| failed("stream decoding", &e))?.unwrap_or_default())
    }
}

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatMessage {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The text.
    pub content: String,
}

impl ChatMessage {
    /// A message.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Self {
        Self { role: role.into(), content: content.into() }
    }
}

/// Formats `messages` with the ChatML template
/// (`<|im_start|>role\ncontent<|im_end|>\n` each), then, when
/// `add_generation_prompt`, opens the assistant's turn.
pub fn chatml(messages: &[ChatMessage], add_generation_prompt: bool) -> String {
    let mut s = String::new();
    for m in messages {
        s.push_str("<|im_start|>");
        s.push_str(&m.role);
        s.push('\n');
        s.push_str(&m.content);
        s.push_str("<|im_end|>\n");
    }
    if add_generation_prompt {
        s.push_str("<|im_start|>assistant\n");
    }
    s
}
