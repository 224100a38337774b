//! A small GPT-2 byte-level BPE tokenizer reading HuggingFace
//! `tokenizer.json` files (vocab, merges, added tokens), and the ChatML chat
//! template.
//!
//! Written instead of depending on the `tokenizers` crate, which is not
//! available offline here and is heavy to build. It covers the byte-level
//! BPE family of GPT-2 and SmolLM2 files: added/special tokens are
//! matched first, then the GPT-2 pre-tokenizer split (optionally with
//! individual digits, as SmolLM2's `Digits` pre-tokenizer does), then BPE by
//! merge rank. Files with a normalizer or other pre-tokenizers (`Split`
//! regexes as in Qwen2/Llama 3, `Metaspace`) are refused with an error.
//! `\p{L}`/`\p{N}` are approximated by `char::is_alphabetic`/`char::is_numeric`.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use crate::error::{Error, Result};

/// A byte-level BPE tokenizer.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    vocab: HashMap<String, u32>,
    id_to_token: HashMap<u32, String>,
    merges: HashMap<(String, String), usize>,
    /// Added tokens (content, id), longest first.
    added: Vec<(String, u32)>,
    added_ids: HashMap<u32, String>,
    individual_digits: bool,
    ignore_merges: bool,
    byte_to_char: [char; 256],
    char_to_byte: HashMap<char, u8>,
}

/// GPT-2's reversible map of bytes to printable characters.
fn bytes_to_unicode() -> [char; 256] {
    let mut out = ['\0'; 256];
    let mut n = 0u32;
    for b in 0..=255u8 {
        let printable = (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
        out[b as usize] = if printable {
            char::from(b)
        } else {
            n += 1;
            char::from_u32(255 + n).expect("valid code point")
        };
    }
    out
}

fn bad(path: &Path, problem: impl Into<String>) -> Error {
    Error::Tokenizer { path: path.display().to_string(), problem: problem.into() }
}

impl Tokenizer {
    /// Reads a `tokenizer.json`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| bad(path, format!("cannot read: {e}")))?;
        Self::from_json(&text).map_err(|problem| bad(path, problem))
    }

    /// Parses the text of a `tokenizer.json`; `Err` is the problem.
    pub fn from_json(text: &str) -> std::result::Result<Self, String> {
        let root: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let model = root.get("model").ok_or("no \"model\"")?;
        if let Some(t) = model.get("type").and_then(Value::as_str)
            && t != "BPE"
        {
            return Err(format!("model type {t:?} is not supported (only byte-level BPE)"));
        }
        let vocab_json = model.get("vocab").and_then(Value::as_object).ok_or("no model.vocab object")?;
        let mut vocab = HashMap::new();
        for (tok, id) in vocab_json {
            let id = id.as_u64().and_then(|v| u32::try_from(v).ok()).ok_or(format!("vocab id of {tok:?}"))?;
            vocab.insert(tok.clone(), id);
        }
        let mut merges = HashMap::new();
        for (rank, m) in model.get("merges").and_then(Value::as_array).ok_or("no model.merges list")?.iter().enumerate()
        {
            let pair = match m {
                Value::String(s) => s.split_once(' ').map(|(a, b)| (a.to_string(), b.to_string())),
                Value::Array(v) if v.len() == 2 => {
                    v[0].as_str().zip(v[1].as_str()).map(|(a, b)| (a.to_string(), b.to_string()))
                }
                _ => None,
            };
            let pair = pair.ok_or(format!("merge {rank} is neither \"a b\" nor [a, b]"))?;
            merges.entry(pair).or_insert(rank);
        }
        let mut added = Vec::new();
        for t in root.get("added_tokens").and_then(Value::as_array).into_iter().flatten() {
            let content = t.get("content").and_then(Value::as_str).ok_or("added token without content")?;
            let id = t.get("id").and_then(Value::as_u64).and_then(|v| u32::try_from(v).ok()).ok_or("added token id")?;
            if !content.is_empty() {
                added.push((content.to_string(), id));
            }
        }
        added.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then(a.1.cmp(&b.1)));
        if let Some(n) = root.get("normalizer").filter(|n| !n.is_null()) {
            return Err(format!("normalizers are not supported (found {})", n.get("type").unwrap_or(n)));
        }
        check_pre_tokenizer(root.get("pre_tokenizer").unwrap_or(&Value::Null))?;
        let pre = root.get("pre_tokenizer").map(Value::to_string).unwrap_or_default();
        let individual_digits = pre.contains("\"Digits\"") && pre.contains("\"individual_digits\":true");
        let ignore_merges = model.get("ignore_merges").and_then(Value::as_bool).unwrap_or(false);
        let byte_to_char = bytes_to_unicode();
        let char_to_byte = byte_to_char.iter().enumerate().map(|(b, &c)| (c, b as u8)).collect();
        let id_to_token = vocab.iter().map(|(t, &i)| (i, t.clone())).collect();
        let added_ids = added.iter().map(|(t, i)| (*i, t.clone())).collect();
        Ok(Self {
            vocab,
            id_to_token,
            merges,
            added,
            added_ids,
            individual_digits,
            ignore_merges,
            byte_to_char,
            char_to_byte,
        })
    }

    /// Number of ids (vocab plus added tokens not in it).
    pub fn vocab_size(&self) -> usize {
        self.id_to_token.len() + self.added_ids.keys().filter(|i| !self.id_to_token.contains_key(i)).count()
    }

    /// The id of a token string (vocab or added), if any.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.added.iter().find(|(t, _)| t == token).map(|&(_, i)| i).or_else(|| self.vocab.get(token).copied())
    }

    /// Encodes `text` (added tokens such as `<|im_start|>` are recognised).
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            // The earliest added token (longest on ties).
            let hit = self
                .added
                .iter()
                .filter_map(|(t, id)| rest.find(t.as_str()).map(|at| (at, t.len(), *id)))
                .min_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
            match hit {
                Some((at, len, id)) => {
                    self.encode_plain(&rest[..at], &mut ids);
                    ids.push(id);
                    rest = &rest[at + len..];
                }
                None => {
                    self.encode_plain(rest, &mut ids);
                    rest = "";
                }
            }
        }
        ids
    }

    fn encode_plain(&self, text: &str, ids: &mut Vec<u32>) {
        if text.is_empty() {
            return;
        }
        for word in pre_tokenize(text, self.individual_digits) {
            let mapped: String = word.bytes().map(|b| self.byte_to_char[b as usize]).collect();
            self.bpe(&mapped, ids);
        }
    }

    fn bpe(&self, word: &str, ids: &mut Vec<u32>) {
        if self.ignore_merges
            && let Some(&id) = self.vocab.get(word)
        {
            ids.push(id);
            return;
        }
        let mut parts: Vec<String> = word.chars().map(String::from).collect();
        while parts.len() > 1 {
            let best = (0..parts.len() - 1)
                .filter_map(|i| self.merges.get(&(parts[i].clone(), parts[i + 1].clone())).map(|&r| (r, i)))
                .min();
            let Some((_, i)) = best else { break };
            let right = parts.remove(i + 1);
            parts[i].push_str(&right);
        }
        for p in parts {
            if let Some(&id) = self.vocab.get(&p) {
                ids.push(id);
            } else {
                // Not in the vocab: fall back to its characters (bytes).
                ids.extend(p.chars().filter_map(|c| self.vocab.get(&c.to_string()).copied()));
            }
        }
    }

    /// The bytes of one token (added tokens verbatim).
    pub fn token_bytes(&self, id: u32) -> Vec<u8> {
        if let Some(t) = self.added_ids.get(&id) {
            return t.as_bytes().to_vec();
        }
        match self.id_to_token.get(&id) {
            Some(t) => t
                .chars()
                .flat_map(|c| {
                    self.char_to_byte.get(&c).copied().map_or_else(|| c.to_string().into_bytes(), |b| vec![b])
                })
                .collect(),
            None => Vec::new(),
        }
    }

    /// Decodes `ids` to text (invalid UTF-8 becomes U+FFFD).
    pub fn decode(&self, ids: &[u32]) -> String {
        let bytes: Vec<u8> = ids.iter().flat_map(|&i| self.token_bytes(i)).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// A decoder for streaming: it holds back incomplete UTF-8 sequences.
    pub fn stream_decoder(&self) -> StreamDecoder {
        StreamDecoder::default()
    }
}

/// Accepts `ByteLevel`, `Digits` and `Sequence`s of them (or none).
fn check_pre_tokenizer(p: &Value) -> std::result::Result<(), String> {
    if p.is_null() {
        return Ok(());
    }
    match p.get("type").and_then(Value::as_str) {
        Some("ByteLevel" | "Digits") => Ok(()),
        Some("Sequence") => {
            p.get("pretokenizers").and_then(Value::as_array).into_iter().flatten().try_for_each(check_pre_tokenizer)
        }
        other => Err(format!("pre-tokenizer {} is not supported (only ByteLevel and Digits)", other.unwrap_or("?"))),
    }
}

/// Streams tokens to text, holding back bytes of an unfinished character.
#[derive(Debug, Default, Clone)]
pub struct StreamDecoder {
    pending: Vec<u8>,
}

impl StreamDecoder {
    /// Adds `token`; returns the text now complete.
    pub fn push(&mut self, tokenizer: &Tokenizer, token: u32) -> String {
        self.pending.extend(tokenizer.token_bytes(token));
        let mut out = String::new();
        loop {
            match std::str::from_utf8(&self.pending) {
                Ok(s) => {
                    out.push_str(s);
                    self.pending.clear();
                    return out;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    out.push_str(std::str::from_utf8(&self.pending[..valid]).expect("valid prefix"));
                    match e.error_len() {
                        // Incomplete at the end: wait for more bytes.
                        None => {
                            self.pending.drain(..valid);
                            return out;
                        }
                        Some(n) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            self.pending.drain(..valid + n);
                        }
                    }
                }
            }
        }
    }
}

/// GPT-2's pre-tokenizer split: `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+|
/// ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`, after isolating each digit when
/// `individual_digits`.
pub fn pre_tokenize(text: &str, individual_digits: bool) -> Vec<&str> {
    let mut out = Vec::new();
    if individual_digits {
        let mut start = 0;
        for (i, c) in text.char_indices() {
            if c.is_numeric() {
                gpt2_split(&text[start..i], &mut out);
                out.push(&text[i..i + c.len_utf8()]);
                start = i + c.len_utf8();
            }
        }
        gpt2_split(&text[start..], &mut out);
    } else {
        gpt2_split(text, &mut out);
    }
    out
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum Class {
    Letter,
    Number,
    Space,
    Other,
}

fn class(c: char) -> Class {
    if c.is_alphabetic() {
        Class::Letter
    } else if c.is_numeric() {
        Class::Number
    } else if c.is_whitespace() {
        Class::Space
    } else {
        Class::Other
    }
}

fn gpt2_split<'t>(text: &'t str, out: &mut Vec<&'t str>) {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let n = chars.len();
    let at = |k: usize| if k < n { chars[k].0 } else { text.len() };
    let mut i = 0;
    while i < n {
        // Contractions.
        if chars[i].1 == '\'' {
            let rest = &text[chars[i].0..];
            if let Some(c) = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"].iter().find(|c| rest.starts_with(*c)) {
                let end = chars[i].0 + c.len();
                out.push(&text[chars[i].0..end]);
                i += c.len();
                continue;
            }
        }
        let j = if chars[i].1 == ' ' && i + 1 < n && class(chars[i + 1].1) != Class::Space { i + 1 } else { i };
        let k = class(chars[j].1);
        if k != Class::Space {
            let mut e = j + 1;
            while e < n && class(chars[e].1) == k {
                e += 1;
            }
            out.push(&text[at(i)..at(e)]);
            i = e;
            continue;
        }
        let mut e = i;
        while e < n && class(chars[e].1) == Class::Space {
            e += 1;
        }
        let end = if e == n || e - i == 1 { e } else { e - 1 };
        out.push(&text[at(i)..at(end)]);
        i = end;
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
