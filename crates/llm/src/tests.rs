//! Unit tests of the sampler and the PRNG.

use crate::sampler::{Rng, Sampler, SamplerConfig, argmax, nucleus_len};

fn sampler(temperature: f32, top_k: usize, top_p: f32, seed: u64) -> Sampler {
    Sampler::new(SamplerConfig { temperature, top_k, top_p, seed }).expect("valid config")
}

fn draws(s: &mut Sampler, logits: &[f32], n: usize) -> Vec<u32> {
    (0..n).map(|_| s.sample(logits)).collect()
}

const LOGITS: [f32; 6] = [0.5, 2.0, -1.0, 1.9, 0.0, 1.0];

#[test]
fn rng_is_deterministic_and_in_range() {
    let a: Vec<f64> = {
        let mut r = Rng::new(7);
        (0..100).map(|_| r.next_f64()).collect()
    };
    let b: Vec<f64> = {
        let mut r = Rng::new(7);
        (0..100).map(|_| r.next_f64()).collect()
    };
    let c: Vec<f64> = {
        let mut r = Rng::new(8);
        (0..100).map(|_| r.next_f64()).collect()
    };
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert!(a.iter().all(|&x| (0.0..1.0).contains(&x)));
}

#[test]
fn sampling_is_deterministic_given_seed() {
    let a = draws(&mut sampler(1.0, 0, 1.0, 42), &LOGITS, 200);
    let b = draws(&mut sampler(1.0, 0, 1.0, 42), &LOGITS, 200);
    let c = draws(&mut sampler(1.0, 0, 1.0, 43), &LOGITS, 200);
    assert_eq!(a, b);
    assert_ne!(a, c);
    // Temperature 1 over these logits reaches several tokens.
    assert!(a.iter().collect::<std::collections::BTreeSet<_>>().len() >= 4);
}

#[test]
fn greedy_takes_the_first_max() {
    assert_eq!(argmax(&LOGITS), 1);
    assert_eq!(argmax(&[3.0, 3.0, 1.0]), 0);
    assert_eq!(argmax(&[f32::NAN, 1.0]), 1);
    assert_eq!(draws(&mut sampler(0.0, 0, 1.0, 1), &LOGITS, 10), vec![1; 10]);
}

#[test]
fn top_k_1_is_greedy() {
    for seed in 0..20 {
        assert_eq!(sampler(5.0, 1, 1.0, seed).sample(&LOGITS), 1);
        assert_eq!(sampler(5.0, 1, 0.3, seed).sample(&LOGITS), 1);
    }
}

#[test]
fn top_k_keeps_only_the_k_best() {
    let got = draws(&mut sampler(10.0, 2, 1.0, 3), &LOGITS, 300);
    assert!(got.iter().all(|&t| t == 1 || t == 3), "{got:?}");
    assert!(got.contains(&1) && got.contains(&3));
}

#[test]
fn top_p_edges() {
    let probs = [0.5, 0.3, 0.15, 0.05];
    // p = 1 keeps all; a tiny p keeps one; the prefix that reaches p exactly.
    assert_eq!(nucleus_len(&probs, 1.0), 4);
    assert_eq!(nucleus_len(&probs, 1e-6), 1);
    assert_eq!(nucleus_len(&probs, 0.5), 1);
    assert_eq!(nucleus_len(&probs, 0.51), 2);
    assert_eq!(nucleus_len(&probs, 0.8), 2);
    assert_eq!(nucleus_len(&probs, 0.99), 4);
    // A tiny top-p samples greedily whatever the temperature.
    assert_eq!(draws(&mut sampler(3.0, 0, 1e-6, 9), &LOGITS, 50), vec![1; 50]);
    // One dominant token: top-p 0.9 keeps only it.
    assert_eq!(draws(&mut sampler(1.0, 0, 0.9, 9), &[0.0, 20.0, 0.0], 50), vec![1; 50]);
}

#[test]
fn bad_settings_are_errors() {
    for (t, p) in [(-1.0, 1.0), (f32::NAN, 1.0), (1.0, 0.0), (1.0, 1.5)] {
        assert!(Sampler::new(SamplerConfig { temperature: t, top_k: 0, top_p: p, seed: 0 }).is_err());
    }
}

mod tokenizer {
    use crate::Error;
    use crate::tokenizer::{ChatMessage, Tokenizer, chatml};

    /// The tiny byte-level BPE of `tools/export/tiny_tokenizer.py`
    /// (SmolLM2's layout, ChatML special tokens 0..=2); the ids below are
    /// what HuggingFace `tokenizers` gives in Python.
    const JSON: &str = include_str!("../../../test_data/tokenizers/tiny_bytelevel/tokenizer.json");

    fn tok() -> Tokenizer {
        Tokenizer::from_json(JSON).expect("valid tokenizer.json")
    }

    #[test]
    fn encode_and_round_trip() {
        let t = tok();
        assert_eq!(t.vocab_size(), 400);
        assert_eq!(t.encode("Hello world!").expect("encode"), vec![301, 305, 3]);
        // Digits are isolated; "é" is the two bytes of one merged token.
        assert_eq!(t.encode("x12").expect("encode"), vec![90, 19, 20]);
        assert_eq!(t.encode("Café 😀").expect("encode"), vec![319, 346, 223, 381, 249, 225]);
        assert_eq!(t.encode("").expect("encode"), Vec::<u32>::new());
        for s in ["Hello world!", "x12", "Café 😀", "  two\n\nlines\t ", "<|endoftext|>"] {
            assert_eq!(t.decode(&t.encode(s).expect("encode")).expect("decode"), s);
        }
        assert_eq!(Tokenizer::from_bytes(JSON.as_bytes()).expect("bytes").encode("x12").expect("encode"), [90, 19, 20]);
    }

    #[test]
    fn special_tokens_are_matched_and_kept() {
        let t = tok();
        assert_eq!(t.token_to_id("<|endoftext|>"), Some(0));
        assert_eq!(t.token_to_id("<|im_end|>"), Some(2));
        assert_eq!(t.id_to_token(1).as_deref(), Some("<|im_start|>"));
        assert!(t.is_special(2) && !t.is_special(301));
        // Matched inside words too, and never split.
        assert_eq!(t.encode("a<|im_end|>b").expect("encode"), vec![67, 2, 68]);
        assert_eq!(t.decode(&[1, 301, 2]).expect("decode"), "<|im_start|>Hello<|im_end|>");
    }

    #[test]
    fn chatml_template_encodes_like_huggingface() {
        let m = [ChatMessage::new("system", "Be brief."), ChatMessage::new("user", "Hi")];
        assert_eq!(
            chatml(&m, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        assert_eq!(chatml(&[], false), "");
        let t = tok();
        let ids = t.encode(&chatml(&[ChatMessage::new("user", "Hi")], true)).expect("encode");
        assert_eq!(ids, vec![1, 370, 201, 322, 2, 201, 1, 334, 365, 260, 86, 201]);
        assert_eq!(t.decode(&ids).expect("decode"), chatml(&[ChatMessage::new("user", "Hi")], true));
    }

    #[test]
    fn stream_decoder_holds_back_split_characters() {
        let t = tok();
        let mut d = t.stream_decoder();
        let mut push = |id| d.push(&t, id).expect("push");
        assert_eq!(push(301), "Hello");
        // 😀 is F0 9F | 98 | 80: nothing until the last byte.
        assert_eq!(push(381), "");
        assert_eq!(push(249), "");
        assert_eq!(push(225), "😀");
        // A lone continuation byte is invalid: U+FFFD once text follows.
        assert_eq!(push(225), "");
        assert_eq!(push(3), "\u{FFFD}!");
        assert_eq!(push(2), "<|im_end|>");
    }

    #[test]
    fn bad_files_are_errors() {
        assert!(matches!(Tokenizer::from_json("{"), Err(Error::Tokenizer { .. })));
        assert!(matches!(Tokenizer::from_json(r#"{"model": {"type": "Nope"}}"#), Err(Error::Tokenizer { .. })));
        let e = Tokenizer::from_file("/nonexistent/tokenizer.json").unwrap_err();
        assert!(matches!(&e, Error::Tokenizer { path, .. } if path == "/nonexistent/tokenizer.json"), "{e}");
    }
}
