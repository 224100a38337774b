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
    flags: crate::GenFlags,
}

/// Parses the arguments after `generate`.
pub fn parse(args: &[String]) -> Result<GenerateArgs, Failure> {
    let mut model = None;
    let mut tokenizer = None;
    let mut prompt = None;
    let mut tokens = None;
    let mut chat = false;
    let mut system = None;
    let mut flags = crate::GenFlags::new(128);
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if flags.take(arg, &mut it)? {
            continue;
        }
        let mut value = |flag: &str| crate::flag_value(&mut it, flag);
        match arg.as_str() {
            "--model" => model = Some(PathBuf::from(value("--model")?)),
            "--tokenizer" => tokenizer = Some(PathBuf::from(value("--tokenizer")?)),
            "--prompt" => prompt = Some(value("--prompt")?),
            "--chat" => chat = true,
            "--system" => system = Some(value("--system")?),
            "--tokens" => {
                let v = value("--tokens")?;
                let ids = v
                    .split(',')
                    .map(|t| t.trim().parse::<u32>())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| Failure::usage(format!("--tokens: {v:?} is not a comma-separated list of ids")))?;
                tokens = Some(ids);
            }
            flag if flag.starts_with("--") => return Err(Failure::usage(format!("unknown option {flag}"))),
            path if model.is_none() => model = Some(PathBuf::from(path)),
            extra => return Err(Failure::usage(format!("unexpected argument {extra}"))),
        }
    }
    let model = model.ok_or_else(|| Failure::usage("generate needs --model MODEL.pte"))?;
    let input = match (prompt, tokenizer, tokens) {
        (Some(text), Some(tokenizer), None) => {
            Input::Prompt { text, tokenizer, chat: chat || system.is_some(), system }
        }
        (None, None, Some(ids)) if !chat && system.is_none() => Input::Tokens(ids),
        (None, None, Some(_)) => return Err(Failure::usage("--chat and --system need --prompt and --tokenizer")),
        (Some(_), None, None) => return Err(Failure::usage("--prompt needs --tokenizer TOKENIZER.json")),
        _ => return Err(Failure::usage("give either --prompt TEXT --tokenizer T.json or --tokens ID,ID,...")),
    };
    Ok(GenerateArgs { model, input, flags })
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
    let mut generator = crate::load_generator(&rt, &program, a.flags.kv_cache_f16)?;
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
