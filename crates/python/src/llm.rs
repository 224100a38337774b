//! `etwgpu.Llm`: text generation with a Llama-family program, streamed to
//! Python as an iterator.
//!
//! Each `generate` call runs [`Generator::generate`] on a thread of its own
//! (the generator is locked for the whole call) and sends each piece down a
//! channel; the iterator's `__next__` waits on that channel with the GIL
//! released, so pieces reach Python as soon as they are sampled and other
//! Python threads run meanwhile. Dropping the iterator early lets the
//! generation thread finish its `max_new_tokens` unseen.

use std::path::PathBuf;
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};

use etwgpu_format::Program;
use etwgpu_llm::{ChatMessage, GenerateOptions, GenerationStats, Generator, Sampler, SamplerConfig, Tokenizer, chatml};
use pyo3::exceptions::PyStopIteration;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::{PyRuntime, errors};

/// A loaded Llama-family program and, optionally, its tokenizer.
#[pyclass(frozen, name = "_Llm", module = "etwgpu._etwgpu")]
pub(crate) struct PyLlm {
    generator: Arc<Mutex<Generator>>,
    tokenizer: Option<Arc<Tokenizer>>,
}

/// What the generation thread sends.
enum Msg {
    /// Decoded text (text prompts).
    Piece(String),
    /// A token id (token prompts).
    Token(u32),
    /// Generation ended.
    Done(Vec<u32>, GenerationStats),
    /// Generation failed.
    Failed(etwgpu_llm::Error),
    /// An earlier generation panicked while holding the generator.
    Poisoned,
}

/// The pieces of one `generate` call, as they are sampled.
#[pyclass(frozen, name = "TokenStream", module = "etwgpu._etwgpu")]
pub(crate) struct TokenStream {
    rx: Mutex<Receiver<Msg>>,
    /// `(tokens, stats)` once generation has ended.
    done: Mutex<Option<(Vec<u32>, GenerationStats)>>,
}

#[pymethods]
impl PyLlm {
    /// Loads `forward` of the program at `path` (with its `.ptd` files) on
    /// `runtime`; `tokenizer` is a `tokenizer.json`, needed for text
    /// prompts.
    #[new]
    #[pyo3(signature = (runtime, path, tokenizer=None, data_files=Vec::new(), kv_cache_f16=true, precision=None, int8_activations=None))]
    // One argument per Python keyword argument of `etwgpu.Llm(...)`.
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        runtime: &PyRuntime,
        path: PathBuf,
        tokenizer: Option<PathBuf>,
        data_files: Vec<PathBuf>,
        kv_cache_f16: bool,
        precision: Option<&str>,
        int8_activations: Option<bool>,
    ) -> PyResult<Self> {
        let precision = errors::precision(precision)?;
        let tokenizer = tokenizer
            .map(|t| py.detach(|| Tokenizer::from_file(&t)).map(Arc::new).map_err(|e| errors::llm(&e)))
            .transpose()?;
        let program =
            py.detach(|| Program::open_with_external(&path, &data_files)).map_err(|e| errors::format(&path, &e))?;
        let options = etwgpu_runtime::LoadOptions {
            kv_cache_f16,
            precision,
            int8_activations,
            ..Generator::default_load_options()
        };
        let generator = py
            .detach(|| Generator::with_options(&runtime.rt, &program, &options, &mut |_| {}))
            .map_err(|e| errors::llm(&e))?;
        Ok(Self { generator: Arc::new(Mutex::new(generator)), tokenizer })
    }

    /// The model's metadata: `max_seq_len`, `max_context_len`,
    /// `vocab_size`, `bos_id`, `eos_ids`, `kv_cache_f16` and
    /// `int8_activations`.
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (meta, f16, int8) = py.detach(|| {
            self.generator
                .lock()
                .map(|g| (g.metadata().clone(), g.kv_cache_f16(), g.int8_activations()))
                .map_err(|_| poisoned())
        })?;
        let d = PyDict::new(py);
        d.set_item("max_seq_len", meta.max_seq_len)?;
        d.set_item("max_context_len", meta.max_context_len)?;
        d.set_item("vocab_size", meta.vocab_size)?;
        d.set_item("bos_id", meta.bos_id)?;
        d.set_item("eos_ids", meta.eos_ids)?;
        d.set_item("kv_cache_f16", f16)?;
        d.set_item("int8_activations", int8)?;
        Ok(d)
    }

    /// Encodes `text` with the tokenizer.
    fn encode(&self, text: &str) -> PyResult<Vec<u32>> {
        self.tokenizer()?.encode(text).map_err(|e| errors::llm(&e))
    }

    /// Decodes `ids` with the tokenizer.
    fn decode(&self, ids: Vec<u32>) -> PyResult<String> {
        self.tokenizer()?.decode(&ids).map_err(|e| errors::llm(&e))
    }

    /// Starts generating from `prompt` (text, or a list of token ids) and
    /// returns the stream of its pieces: text for a text prompt (the stop
    /// token left out), token ids for a token prompt. The KV cache starts
    /// afresh each call.
    #[pyo3(signature = (
        prompt, max_new_tokens=128, chat=false, system=None, temperature=0.0, top_k=0, top_p=1.0, seed=0,
        stop_at_eos=true
    ))]
    #[expect(clippy::too_many_arguments, reason = "the keyword arguments of the Python method")]
    fn generate(
        &self,
        prompt: &Bound<'_, PyAny>,
        max_new_tokens: usize,
        chat: bool,
        system: Option<String>,
        temperature: f32,
        top_k: usize,
        top_p: f32,
        seed: u64,
        stop_at_eos: bool,
    ) -> PyResult<TokenStream> {
        let sampler = Sampler::new(SamplerConfig { temperature, top_k, top_p, seed }).map_err(|e| errors::llm(&e))?;
        let mut stop_tokens = Vec::new();
        let (ids, text) = if let Ok(text) = prompt.extract::<String>() {
            let tok = self.tokenizer()?;
            let ids = if chat || system.is_some() {
                let mut messages: Vec<ChatMessage> = system.iter().map(|s| ChatMessage::new("system", s)).collect();
                messages.push(ChatMessage::new("user", text));
                stop_tokens.extend(tok.token_to_id("<|im_end|>"));
                tok.encode(&chatml(&messages, true))
            } else {
                tok.encode(&text)
            };
            (ids.map_err(|e| errors::llm(&e))?, true)
        } else if let Ok(ids) = prompt.extract::<Vec<u32>>() {
            if chat || system.is_some() {
                return Err(errors::InputError::new_err("chat and system need a text prompt and a tokenizer"));
            }
            (ids, false)
        } else {
            return Err(errors::InputError::new_err(format!(
                "prompt: expected a str or a list of token ids (ints >= 0), found {}",
                prompt.get_type().name()?
            )));
        };
        let options = GenerateOptions { max_new_tokens, stop_tokens, stop_at_eos };
        let (tx, rx) = channel();
        let generator = Arc::clone(&self.generator);
        let tokenizer = if text { self.tokenizer.clone() } else { None };
        let mut sampler = sampler;
        std::thread::Builder::new()
            .name("etwgpu-generate".into())
            .spawn(move || {
                let Ok(mut g) = generator.lock() else {
                    let _ = tx.send(Msg::Poisoned);
                    return;
                };
                g.reset();
                let stops: Vec<u32> = options.stop_tokens.iter().chain(&g.metadata().eos_ids).copied().collect();
                let mut decoder = tokenizer.as_ref().map(|t| t.stream_decoder());
                let mut decode_err = None;
                let result = g.generate(&ids, &options, &mut sampler, |token| {
                    let msg = match (&tokenizer, &mut decoder) {
                        (Some(_), Some(_)) if stops.contains(&token) => return,
                        (Some(t), Some(d)) => match d.push(t, token) {
                            Ok(piece) if piece.is_empty() => return,
                            Ok(piece) => Msg::Piece(piece),
                            Err(e) => {
                                decode_err.get_or_insert(e);
                                return;
                            }
                        },
                        _ => Msg::Token(token),
                    };
                    // A closed channel means the stream was dropped: the
                    // pieces go nowhere.
                    let _ = tx.send(msg);
                });
                let _ = tx.send(match (result, decode_err) {
                    (Err(e), _) | (Ok(_), Some(e)) => Msg::Failed(e),
                    (Ok((tokens, stats)), None) => Msg::Done(tokens, stats),
                });
            })
            .map_err(|e| errors::Error::new_err(format!("cannot start the generation thread: {e}")))?;
        Ok(TokenStream { rx: Mutex::new(rx), done: Mutex::new(None) })
    }
}

fn poisoned() -> PyErr {
    errors::Error::new_err("the model is unusable: an earlier generation panicked")
}

impl PyLlm {
    fn tokenizer(&self) -> PyResult<&Tokenizer> {
        self.tokenizer
            .as_deref()
            .ok_or_else(|| errors::InputError::new_err("a text prompt needs a tokenizer: pass Llm(..., tokenizer=...)"))
    }
}

#[pymethods]
impl TokenStream {
    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    /// The next piece; waits (GIL released) until it is sampled.
    fn __next__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let msg = py.detach(|| self.rx.lock().map_err(|_| poisoned()).map(|rx| rx.recv().ok()))?;
        match msg {
            Some(Msg::Piece(s)) => Ok(s.into_pyobject(py)?.into_any().unbind()),
            Some(Msg::Token(t)) => Ok(t.into_pyobject(py)?.into_any().unbind()),
            Some(Msg::Done(tokens, stats)) => {
                *self.done.lock().map_err(|_| poisoned())? = Some((tokens, stats));
                Err(PyStopIteration::new_err(()))
            }
            Some(Msg::Failed(e)) => Err(errors::llm(&e)),
            Some(Msg::Poisoned) => Err(poisoned()),
            // Ended before (the sender is gone).
            None => Err(PyStopIteration::new_err(())),
        }
    }

    /// Once the stream has ended: `tokens` (every generated id, a final
    /// stop token included), `prompt_tokens`, `generated_tokens`,
    /// `decode_steps`, `prefill_s`, `decode_s`, `prefill_tokens_per_s`,
    /// `decode_tokens_per_s` and `stopped`; `None` before.
    #[getter]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let done = self.done.lock().map_err(|_| poisoned())?;
        let Some((tokens, s)) = done.as_ref() else { return Ok(None) };
        let d = PyDict::new(py);
        d.set_item("tokens", tokens)?;
        d.set_item("prompt_tokens", s.prompt_tokens)?;
        d.set_item("generated_tokens", s.generated_tokens)?;
        d.set_item("decode_steps", s.decode_steps)?;
        d.set_item("prefill_s", s.prefill_time.as_secs_f64())?;
        d.set_item("decode_s", s.decode_time.as_secs_f64())?;
        d.set_item("prefill_tokens_per_s", s.prefill_tokens_per_s())?;
        d.set_item("decode_tokens_per_s", s.decode_tokens_per_s())?;
        d.set_item("stopped", s.stopped)?;
        Ok(Some(d))
    }
}
