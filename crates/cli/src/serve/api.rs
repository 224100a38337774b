//! The OpenAI request and response bodies `etwgpu serve` speaks: reading a
//! `/v1/completions` or `/v1/chat/completions` request into a [`Request`]
//! (every known field type-checked, unknown fields ignored as OpenAI's
//! clients send extras), the JSON of responses and stream chunks, and the
//! OpenAI-style error body.

use serde_json::{Map, Value, json};

use etwgpu_llm::{ChatMessage, SamplerConfig};

/// An OpenAI-style error: the HTTP status and the body's fields.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// `error.message`.
    pub message: String,
    /// `error.type`: `invalid_request_error`, `authentication_error`, ...
    pub kind: &'static str,
    /// `error.param`: the request field at fault.
    pub param: Option<&'static str>,
    /// `error.code`, e.g. `context_length_exceeded`.
    pub code: Option<&'static str>,
}

impl ApiError {
    /// A 400 about `param`.
    pub fn invalid(param: Option<&'static str>, message: impl Into<String>) -> Self {
        Self { status: 400, message: message.into(), kind: "invalid_request_error", param, code: None }
    }

    /// The same error with `code` set.
    pub fn with_code(self, code: &'static str) -> Self {
        Self { code: Some(code), ..self }
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
    }
}

/// What a request asks to be completed.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    /// `/v1/completions`: text.
    Text(String),
    /// `/v1/completions`: token ids.
    Tokens(Vec<u32>),
    /// `/v1/chat/completions`: messages, rendered as ChatML.
    Chat(Vec<ChatMessage>),
}

/// A checked completion request.
#[derive(Debug, Clone)]
pub struct Request {
    /// The prompt.
    pub prompt: Prompt,
    /// `max_tokens` (or `max_completion_tokens`), when given.
    pub max_tokens: Option<usize>,
    /// `temperature`, `top_p`, `seed` (greedy unless temperature > 0).
    pub sampler: SamplerConfig,
    /// `stop`: up to 4 strings that end the text (not included).
    pub stop: Vec<String>,
    /// `stream`: server-sent events.
    pub stream: bool,
    /// `stream_options.include_usage`: a last chunk with the usage.
    pub include_usage: bool,
}

fn field<'a>(o: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    o.get(name).filter(|v| !v.is_null())
}

fn uint(o: &Map<String, Value>, name: &'static str) -> Result<Option<u64>, ApiError> {
    field(o, name)
        .map(|v| {
            v.as_u64()
                .ok_or_else(|| ApiError::invalid(Some(name), format!("{name} must be a non-negative integer, not {v}")))
        })
        .transpose()
}

fn number(o: &Map<String, Value>, name: &'static str) -> Result<Option<f64>, ApiError> {
    field(o, name)
        .map(|v| v.as_f64().ok_or_else(|| ApiError::invalid(Some(name), format!("{name} must be a number, not {v}"))))
        .transpose()
}

fn boolean(o: &Map<String, Value>, name: &'static str) -> Result<bool, ApiError> {
    field(o, name)
        .map(|v| v.as_bool().ok_or_else(|| ApiError::invalid(Some(name), format!("{name} must be a boolean, not {v}"))))
        .transpose()
        .map(|b| b.unwrap_or(false))
}

/// The text of a message's `content`: a string, or an array of
/// `{"type": "text", "text": ...}` parts.
fn content(v: &Value) -> Result<String, ApiError> {
    let bad = || ApiError::invalid(Some("messages"), "a message's content must be a string or an array of text parts");
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Null => Ok(String::new()),
        Value::Array(parts) => parts
            .iter()
            .map(|p| match (p.get("type").and_then(Value::as_str), p.get("text").and_then(Value::as_str)) {
                (Some("text"), Some(t)) => Ok(t),
                _ => Err(bad()),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|ts| ts.concat()),
        _ => Err(bad()),
    }
}

/// Reads a request body; `chat` for `/v1/chat/completions`.
pub fn parse(body: &[u8], chat: bool) -> Result<Request, ApiError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(None, format!("the request body is not valid JSON: {e}")))?;
    let Value::Object(o) = v else {
        return Err(ApiError::invalid(None, "the request body must be a JSON object"));
    };
    if let Some(m) = field(&o, "model")
        && !m.is_string()
    {
        return Err(ApiError::invalid(Some("model"), format!("model must be a string, not {m}")));
    }
    let prompt = if chat {
        let Some(Value::Array(ms)) = field(&o, "messages") else {
            return Err(ApiError::invalid(Some("messages"), "messages must be an array of {role, content} objects"));
        };
        if ms.is_empty() {
            return Err(ApiError::invalid(Some("messages"), "messages must not be empty"));
        }
        let messages = ms
            .iter()
            .map(|m| {
                let role = m
                    .get("role")
                    .and_then(Value::as_str)
                    .ok_or_else(|| ApiError::invalid(Some("messages"), "each message needs a string role"))?;
                Ok(ChatMessage::new(role, content(m.get("content").unwrap_or(&Value::Null))?))
            })
            .collect::<Result<Vec<_>, ApiError>>()?;
        Prompt::Chat(messages)
    } else {
        let bad = || {
            ApiError::invalid(
                Some("prompt"),
                "prompt must be a string, an array of one string or an array of token ids",
            )
        };
        match field(&o, "prompt") {
            Some(Value::String(s)) => Prompt::Text(s.clone()),
            Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => {
                Prompt::Text(a[0].as_str().unwrap_or_default().to_string())
            }
            Some(Value::Array(a)) => Prompt::Tokens(
                a.iter()
                    .map(|t| t.as_u64().and_then(|t| u32::try_from(t).ok()).ok_or_else(bad))
                    .collect::<Result<_, _>>()?,
            ),
            None => return Err(ApiError::invalid(Some("prompt"), "prompt is required")),
            Some(_) => return Err(bad()),
        }
    };
    let max_tokens = match (uint(&o, "max_tokens")?, uint(&o, "max_completion_tokens")?) {
        (Some(n), _) | (None, Some(n)) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
        (None, None) => None,
    };
    if let Some(n) = uint(&o, "n")?
        && n != 1
    {
        return Err(ApiError::invalid(Some("n"), format!("n = {n} is not supported: one choice per request")));
    }
    let temperature = number(&o, "temperature")?.unwrap_or(0.0);
    if !(0.0..=2.0).contains(&temperature) {
        return Err(ApiError::invalid(
            Some("temperature"),
            format!("temperature must be in [0, 2], not {temperature}"),
        ));
    }
    let top_p = number(&o, "top_p")?.unwrap_or(1.0);
    if !(top_p > 0.0 && top_p <= 1.0) {
        return Err(ApiError::invalid(Some("top_p"), format!("top_p must be in (0, 1], not {top_p}")));
    }
    let seed = match field(&o, "seed") {
        None => 0,
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_i64().map(|i| i as u64))
            .ok_or_else(|| ApiError::invalid(Some("seed"), format!("seed must be an integer, not {v}")))?,
    };
    let stop = match field(&o, "stop") {
        None => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) if a.len() <= 4 && a.iter().all(Value::is_string) => {
            a.iter().filter_map(Value::as_str).map(str::to_string).collect()
        }
        Some(v) => {
            return Err(ApiError::invalid(Some("stop"), format!("stop must be a string or up to 4 strings, not {v}")));
        }
    };
    if stop.iter().any(String::is_empty) {
        return Err(ApiError::invalid(Some("stop"), "stop strings must not be empty"));
    }
    let stream = boolean(&o, "stream")?;
    let include_usage = match field(&o, "stream_options") {
        None => false,
        Some(Value::Object(so)) => boolean(so, "include_usage")?,
        Some(v) => {
            return Err(ApiError::invalid(
                Some("stream_options"),
                format!("stream_options must be an object, not {v}"),
            ));
        }
    };
    let sampler = SamplerConfig { temperature: temperature as f32, top_k: 0, top_p: top_p as f32, seed };
    Ok(Request { prompt, max_tokens, sampler, stop, stream, include_usage })
}

/// Token counts of a finished request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Tokens of the prompt.
    pub prompt_tokens: usize,
    /// Of those, tokens already in the KV cache from the previous request.
    pub cached_tokens: usize,
    /// Tokens generated.
    pub completion_tokens: usize,
}

impl Usage {
    /// The `usage` object.
    pub fn json(&self) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
        })
    }
}

/// What identifies one response: its id, creation time and model name.
#[derive(Debug, Clone)]
pub struct Ids {
    /// `cmpl-N` or `chatcmpl-N`.
    pub id: String,
    /// Unix seconds.
    pub created: u64,
    /// The served model's name.
    pub model: String,
    /// Chat or plain completion.
    pub chat: bool,
}

impl Ids {
    /// The whole non-streamed response.
    pub fn response(&self, text: &str, finish_reason: &str, usage: &Usage) -> Value {
        let choice = if self.chat {
            json!({"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": null,
                "finish_reason": finish_reason})
        } else {
            json!({"index": 0, "text": text, "logprobs": null, "finish_reason": finish_reason})
        };
        json!({"id": self.id, "object": if self.chat { "chat.completion" } else { "text_completion" },
            "created": self.created, "model": self.model, "choices": [choice], "usage": usage.json()})
    }

    /// One streamed chunk: a piece of text (`role` on the first chat chunk),
    /// or the end with its finish reason.
    pub fn chunk(&self, text: Option<&str>, first: bool, finish_reason: Option<&str>) -> Value {
        let choice = if self.chat {
            let mut delta = Map::new();
            if first {
                delta.insert("role".into(), "assistant".into());
            }
            if let Some(t) = text {
                delta.insert("content".into(), t.into());
            }
            json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason})
        } else {
            json!({"index": 0, "text": text.unwrap_or(""), "logprobs": null, "finish_reason": finish_reason})
        };
        json!({"id": self.id, "object": if self.chat { "chat.completion.chunk" } else { "text_completion" },
            "created": self.created, "model": self.model, "choices": [choice]})
    }

    /// The last chunk of `stream_options.include_usage`: no choices, the
    /// usage.
    pub fn usage_chunk(&self, usage: &Usage) -> Value {
        json!({"id": self.id, "object": if self.chat { "chat.completion.chunk" } else { "text_completion" },
            "created": self.created, "model": self.model, "choices": [], "usage": usage.json()})
    }
}

/// Where the text ends: the first stop string found, and how much of the
/// text is safe to send now (none of it may be the start of a stop string
/// that later text completes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// A stop string begins at this byte: the text ends there.
    Stop(usize),
    /// No stop string yet; bytes up to here can be sent.
    Safe(usize),
}

/// Finds where `text` ends given `stops`.
pub fn cut(text: &str, stops: &[String]) -> Cut {
    if let Some(at) = stops.iter().filter_map(|s| text.find(s.as_str())).min() {
        return Cut::Stop(at);
    }
    // Hold back the longest tail that is a proper prefix of a stop string.
    let mut safe = text.len();
    for s in stops {
        for (i, _) in s.char_indices().skip(1) {
            if text.ends_with(&s[..i]) {
                safe = safe.min(text.len() - i);
            }
        }
    }
    Cut::Safe(safe)
}

#[cfg(test)]
mod tests;
