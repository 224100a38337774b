//! The JavaScript class [`Llm`]: generation with a streaming callback,
//! from token ids or, with a tokenizer, as a ChatML chat whose turns stay
//! in the KV cache.

use etwgpu_format::Program;
use etwgpu_llm::{ChatMessage, GenerateOptions, Generator, Sampler, SamplerConfig, Tokenizer, chatml};
use js_sys::{Function, Object, Uint32Array};
use wasm_bindgen::prelude::*;

use crate::api::forward_progress;
use crate::error::{Error, Result};
use crate::source::{get, set};

fn number(options: &JsValue, key: &str) -> Option<f64> {
    get(options, key).as_f64()
}

/// What one `generate` or `chat` call did.
struct Outcome {
    tokens: Vec<u32>,
    text: String,
    stats: etwgpu_llm::GenerationStats,
}

/// A Llama-family program loaded for generation.
#[wasm_bindgen]
#[derive(Debug)]
pub struct Llm {
    generator: Generator,
    tokenizer: Option<Tokenizer>,
    /// Tokens to feed before the next chat turn: the end of the last reply
    /// (its last sampled token is never fed by `generate`).
    unfed: Vec<u32>,
}

impl Llm {
    pub(crate) async fn load(
        rt: &etwgpu_runtime::Runtime,
        program: &Program,
        tokenizer: Option<&str>,
        on_progress: Option<&Function>,
    ) -> Result<Self> {
        let tokenizer = tokenizer
            .map(|json| Tokenizer::from_json(json).map_err(|e| Error::Tokenizer { problem: e.to_string() }))
            .transpose()?;
        let generator = Generator::new_async(rt, program, &mut forward_progress(on_progress)).await?;
        Ok(Self { generator, tokenizer, unfed: Vec::new() })
    }

    /// Generates from `prompt` at the current position, calling `on_token`
    /// (id, decoded text piece) for each sampled token that is not in
    /// `hidden`.
    async fn run(
        &mut self,
        prompt: &[u32],
        options: &JsValue,
        stop_tokens: Vec<u32>,
        hidden: &[u32],
        on_token: Option<&Function>,
    ) -> Result<Outcome> {
        let context = self.generator.metadata().max_context_len;
        let max_new = number(options, "maxNewTokens").map_or(32, |n| n.max(0.0) as usize);
        let max_new = max_new.min(context.saturating_sub(self.generator.position() + prompt.len()));
        let config = SamplerConfig {
            temperature: number(options, "temperature").unwrap_or(0.0) as f32,
            top_k: number(options, "topK").unwrap_or(0.0).max(0.0) as usize,
            top_p: number(options, "topP").unwrap_or(1.0) as f32,
            seed: number(options, "seed").unwrap_or(0.0).max(0.0) as u64,
        };
        let mut sampler = Sampler::new(config)?;
        let stop_at_eos = get(options, "stopAtEos").as_bool().unwrap_or(true);
        let opts = GenerateOptions { max_new_tokens: max_new, stop_tokens, stop_at_eos };
        let mut decoder = self.tokenizer.as_ref().map(Tokenizer::stream_decoder);
        let tokenizer = self.tokenizer.as_ref();
        let mut text = String::new();
        let mut thrown = None;
        let mut decode_err = None;
        let (tokens, stats) = self
            .generator
            .generate_async(prompt, &opts, &mut sampler, |token| {
                if hidden.contains(&token) {
                    return;
                }
                let piece = match (&mut decoder, tokenizer) {
                    (Some(d), Some(t)) => d.push(t, token).unwrap_or_else(|e| {
                        decode_err.get_or_insert(e);
                        String::new()
                    }),
                    _ => String::new(),
                };
                text.push_str(&piece);
                if let Some(f) = on_token
                    && thrown.is_none()
                    && let Err(e) = f.call2(&JsValue::NULL, &JsValue::from(token), &JsValue::from_str(&piece))
                {
                    // Reported once generation returns (it cannot stop it).
                    thrown =
                        Some(js_sys::Error::from(e).message().as_string().unwrap_or_else(|| "an exception".into()));
                }
            })
            .await?;
        if let Some(message) = thrown {
            return Err(Error::Callback { message });
        }
        if let Some(e) = decode_err {
            return Err(e.into());
        }
        Ok(Outcome { tokens, text, stats })
    }

    fn outcome_to_js(&self, o: &Outcome) -> JsValue {
        let obj = Object::new();
        set(&obj, "tokens", Uint32Array::from(o.tokens.as_slice()));
        set(&obj, "text", o.text.as_str());
        set(&obj, "promptTokens", o.stats.prompt_tokens);
        set(&obj, "generatedTokens", o.stats.generated_tokens);
        set(&obj, "prefillMs", o.stats.prefill_time.as_secs_f64() * 1e3);
        set(&obj, "decodeMs", o.stats.decode_time.as_secs_f64() * 1e3);
        set(&obj, "prefillTokensPerS", o.stats.prefill_tokens_per_s());
        set(&obj, "decodeTokensPerS", o.stats.decode_tokens_per_s());
        set(&obj, "stopped", o.stats.stopped);
        set(&obj, "position", self.generator.position());
        obj.into()
    }
}

#[wasm_bindgen]
impl Llm {
    /// `{ maxSeqLen, maxContextLen, vocabSize, bosId, eosIds }`.
    #[wasm_bindgen(getter, unchecked_return_type = "LlmMetadata")]
    pub fn metadata(&self) -> JsValue {
        let m = self.generator.metadata();
        let obj = Object::new();
        set(&obj, "maxSeqLen", m.max_seq_len);
        set(&obj, "maxContextLen", m.max_context_len);
        set(&obj, "vocabSize", m.vocab_size.map_or(JsValue::NULL, JsValue::from));
        set(&obj, "bosId", m.bos_id.map_or(JsValue::NULL, JsValue::from));
        set(&obj, "eosIds", Uint32Array::from(m.eos_ids.as_slice()));
        obj.into()
    }

    /// Whether a tokenizer was given (text chat works).
    #[wasm_bindgen(getter, js_name = hasTokenizer)]
    pub fn has_tokenizer(&self) -> bool {
        self.tokenizer.is_some()
    }

    /// Tokens in the KV cache.
    #[wasm_bindgen(getter)]
    pub fn position(&self) -> usize {
        self.generator.position() + self.unfed.len()
    }

    /// Forgets the conversation (the KV cache is overwritten from 0).
    pub fn reset(&mut self) {
        self.generator.reset();
        self.unfed.clear();
    }

    /// Generates after `prompt` (token ids) at the current position.
    /// `options`: `{ maxNewTokens = 32, temperature = 0 (greedy), topK,
    /// topP, seed, stopAtEos = true }`; `onToken(id, text)` is called as each token is
    /// sampled (`text` is empty without a tokenizer). Resolves to
    /// `{ tokens, text, promptTokens, generatedTokens, prefillMs, decodeMs,
    /// prefillTokensPerS, decodeTokensPerS, stopped, position }`.
    #[wasm_bindgen(unchecked_return_type = "GenerationResult")]
    pub async fn generate(
        &mut self,
        prompt: Vec<u32>,
        #[wasm_bindgen(unchecked_optional_param_type = "GenerateOptions")] options: JsValue,
        #[wasm_bindgen(js_name = onToken, unchecked_optional_param_type = "OnToken")] on_token: Option<Function>,
    ) -> std::result::Result<JsValue, JsError> {
        let mut feed = std::mem::take(&mut self.unfed);
        feed.extend(prompt);
        let o = self.run(&feed, &options, Vec::new(), &[], on_token.as_ref()).await?;
        // The last sampled token is not in the cache yet.
        self.unfed = o.tokens.last().copied().into_iter().collect();
        Ok(self.outcome_to_js(&o))
    }

    /// One chat turn: `message` as a ChatML user turn after the earlier
    /// turns (kept in the KV cache; when the context is full the
    /// conversation starts over from this turn). Needs a tokenizer.
    /// Options, callback and result as [`Llm::generate`].
    #[wasm_bindgen(unchecked_return_type = "GenerationResult")]
    pub async fn chat(
        &mut self,
        message: String,
        #[wasm_bindgen(unchecked_optional_param_type = "GenerateOptions")] options: JsValue,
        #[wasm_bindgen(js_name = onToken, unchecked_optional_param_type = "OnToken")] on_token: Option<Function>,
    ) -> std::result::Result<JsValue, JsError> {
        let tok = self.tokenizer.as_ref().ok_or(Error::NoTokenizer)?;
        let im_end = tok.token_to_id("<|im_end|>");
        let turn = tok.encode(&chatml(&[ChatMessage::new("user", message)], true)).map_err(Error::from)?;
        let context = self.generator.metadata().max_context_len;
        let budget = number(&options, "maxNewTokens").map_or(32, |n| n.max(0.0) as usize);
        let mut feed = std::mem::take(&mut self.unfed);
        feed.extend(&turn);
        if self.generator.position() + feed.len() + budget.min(context / 2) > context {
            self.generator.reset();
            feed = turn;
        }
        let stops: Vec<u32> = im_end.into_iter().collect();
        let hidden: Vec<u32> = stops.iter().chain(&self.generator.metadata().eos_ids).copied().collect();
        let o = self.run(&feed, &options, stops, &hidden, on_token.as_ref()).await?;
        // Close the turn after the last sampled token (not fed yet).
        let last = o.tokens.last().copied();
        self.unfed = last.into_iter().collect();
        if let Some(end) = im_end
            && last != Some(end)
        {
            self.unfed.push(end);
        }
        if let Some(t) = &self.tokenizer {
            self.unfed.extend(t.encode("\n").map_err(Error::from)?);
        }
        Ok(self.outcome_to_js(&o))
    }
}
