//! `etwgpu generate`: text (or token id) generation with a Llama-family
//! program, streamed to stdout, then token counts and speeds.

use std::io::Write as _;
use std::path::PathBuf;

use etwgpu_format::Program;
use etwgpu_llm::{ChatMessage, GenerateOptions, Sampler, Tokenizer, chatml};
use etwgpu_runtime::Runtime;

use crate::Failure;

/// What to generate from.
#[derive(Debug)]
enum Input {
    /// Text, encoded with a `tokenizer.json`; with `chat`, wrapped as a
    /// ChatML user turn (after an optional system turn), stopping at
    /// `<|im_end|>`.
    Prompt { text: String, tokenizer: PathBuf, chat: bool, system: Option<String> },
    /// Token ids; the output is token ids too.
    Tokens(Vec<u32>),
}

/// Options of `generate`.
#[derive(Debug)]
pub struct GenerateArgs {
    model: PathBuf,
    input: Input,
    flags: crate::GenSettings,
}

/// The flags of `generate`, as clap reads them.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  etwgpu generate --model llama.pte --tokenizer tokenizer.json --prompt \"Once upon a time\" --max-tokens 64
  etwgpu generate --model smollm2.pte --tokenizer tokenizer.json --prompt \"Hi\" --chat --temperature 0.7 --seed 1
  etwgpu generate --model llama.pte --tokens 1,15043,29892 --max-tokens 8")]
pub struct GenerateCli {
    /// The program (`.pte`, `export_llama` layout).
    #[arg(long = "model", value_name = "MODEL.pte")]
    model: Option<PathBuf>,
    /// The program, given without `--model`.
    #[arg(value_name = "MODEL.pte", conflicts_with = "model", hide = true)]
    model_positional: Option<PathBuf>,
    /// A HuggingFace `tokenizer.json` (needed with `--prompt`).
    #[arg(long, value_name = "T.json")]
    tokenizer: Option<PathBuf>,
    /// The prompt text.
    #[arg(long, value_name = "TEXT", conflicts_with = "tokens")]
    prompt: Option<String>,
    /// Wrap the prompt as a ChatML user turn and stop at `<|im_end|>`.
    #[arg(long)]
    chat: bool,
    /// A ChatML system turn before the prompt (implies `--chat`).
    #[arg(long, value_name = "TEXT")]
    system: Option<String>,
    /// Token ids to start from instead of text; the output is ids too.
    #[arg(long, value_name = "ID,ID,...", value_delimiter = ',')]
    tokens: Option<Vec<u32>>,
    #[command(flatten)]
    flags: crate::GenFlags,
}

impl GenerateCli {
    /// The options `generate` works from.
    pub fn into_args(self) -> Result<GenerateArgs, Failure> {
        let model =
            self.model.or(self.model_positional).ok_or_else(|| Failure::usage("generate needs --model MODEL.pte"))?;
        let (chat, system) = (self.chat, self.system);
        let input = match (self.prompt, self.tokenizer, self.tokens) {
            (Some(text), Some(tokenizer), None) => {
                Input::Prompt { text, tokenizer, chat: chat || system.is_some(), system }
            }
            (None, None, Some(ids)) if !chat && system.is_none() => Input::Tokens(ids),
            (None, None, Some(_)) => return Err(Failure::usage("--chat and --system need --prompt and --tokenizer")),
            (Some(_), None, None) => return Err(Failure::usage("--prompt needs --tokenizer TOKENIZER.json")),
            _ => return Err(Failure::usage("give either --prompt TEXT --tokenizer T.json or --tokens ID,ID,...")),
        };
        Ok(GenerateArgs { model, input, flags: self.flags.with_default_max_tokens(128) })
    }
}

/// Runs `generate`, streaming to stdout.
pub fn run(a: &GenerateArgs) -> Result<(), Failure> {
    let program = Program::open(&a.model).map_err(|e| Failure::error(format!("{}: {e}", a.model.display())))?;
    let mut stop_tokens = Vec::new();
    let (prompt, tokenizer) = match &a.input {
        Input::Tokens(ids) => (ids.clone(), None),
        Input::Prompt { text, tokenizer, chat, system } => {
            let tok = Tokenizer::from_file(tokenizer).map_err(Failure::error)?;
            let ids = if *chat {
                let mut messages: Vec<ChatMessage> = system.iter().map(|s| ChatMessage::new("system", s)).collect();
                messages.push(ChatMessage::new("user", text));
                stop_tokens.extend(tok.token_to_id("<|im_end|>"));
                tok.encode(&chatml(&messages, true)).map_err(Failure::error)?
            } else {
                tok.encode(text).map_err(Failure::error)?
            };
            (ids, Some(tok))
        }
    };
    let mut sampler = Sampler::new(a.flags.sampler.clone()).map_err(Failure::error)?;
    let rt = Runtime::new().map_err(Failure::error)?;
    let mut generator = crate::load_generator(&rt, &program, a.flags.kv_cache_f16, a.flags.load)?;
    let options = GenerateOptions { max_new_tokens: a.flags.max_tokens, stop_tokens, stop_at_eos: true };
    // Text output leaves out the token that ends generation.
    let stops: Vec<u32> = options.stop_tokens.iter().chain(&generator.metadata().eos_ids).copied().collect();
    let mut out = std::io::stdout().lock();
    let mut write_err = None;
    let mut decode_err = None;
    let mut decoder = tokenizer.as_ref().map(|t| t.stream_decoder());
    let (_, stats) = generator
        .generate(&prompt, &options, &mut sampler, |token| {
            let piece = match (&tokenizer, &mut decoder) {
                (Some(_), Some(_)) if stops.contains(&token) => String::new(),
                (Some(t), Some(d)) => d.push(t, token).unwrap_or_else(|e| {
                    decode_err.get_or_insert(e);
                    String::new()
                }),
                _ => format!("{token} "),
            };
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
    writeln!(
        out,
        "\nprompt: {} tokens ({:.1} tokens/s); generated: {} tokens (decode {:.1} tokens/s)",
        stats.prompt_tokens,
        stats.prefill_tokens_per_s(),
        stats.generated_tokens,
        stats.decode_tokens_per_s(),
    )
    .map_err(Failure::error)
}
