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
    use crate::tokenizer::{ChatMessage, Tokenizer, chatml, pre_tokenize};

    /// A tiny byte-level BPE: single characters for "helo wrd", the two bytes
    /// of "é" (Ã = 0xC3, © = 0xA9), merges up to "hello" and "Ġworld".
    const JSON: &str = r#"{
      "added_tokens": [{"id": 100, "content": "<|im_start|>", "special": true},
                       {"id": 101, "content": "<|im_end|>", "special": true}],
      "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": true},
        {"type": "ByteLevel", "add_prefix_space": false}]},
      "model": {"type": "BPE",
        "vocab": {"h": 0, "e": 1, "l": 2, "o": 3, "Ġ": 4, "w": 5, "r": 6, "d": 7,
                  "he": 8, "ll": 9, "hell": 10, "hello": 11, "Ġw": 12, "or": 13, "Ġwor": 14, "Ġworld": 15,
                  "ld": 16, "Ã": 17, "©": 18, "1": 19, "2": 20, "Ċ": 21},
        "merges": ["h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", ["Ġwor", "ld"]]}
    }"#;

    fn tok() -> Tokenizer {
        Tokenizer::from_json(JSON).expect("valid tokenizer.json")
    }

    #[test]
    fn encode_merges_by_rank_and_round_trips() {
        let t = tok();
        assert_eq!(t.encode("hello world"), vec![11, 15]);
        assert_eq!(t.encode("hello"), vec![11]);
        assert_eq!(t.encode("held"), vec![8, 16]);
        // Digits are isolated (the space before them stands alone).
        assert_eq!(t.encode("he 12"), vec![8, 4, 19, 20]);
        for s in ["hello world", "he 12", "é", "hello\nworld"] {
            assert_eq!(t.decode(&t.encode(s)), s);
        }
    }

    #[test]
    fn added_tokens_are_matched_first() {
        let t = tok();
        assert_eq!(t.encode("<|im_start|>hello<|im_end|>\n"), vec![100, 11, 101, 21]);
        assert_eq!(t.decode(&[100, 11, 101]), "<|im_start|>hello<|im_end|>");
        assert_eq!(t.token_to_id("<|im_end|>"), Some(101));
    }

    #[test]
    fn stream_decoder_holds_back_split_characters() {
        let t = tok();
        let mut d = t.stream_decoder();
        assert_eq!(d.push(&t, 11), "hello");
        assert_eq!(d.push(&t, 17), "");
        assert_eq!(d.push(&t, 18), "é");
        // A lone continuation byte is invalid: U+FFFD.
        assert_eq!(d.push(&t, 18), "\u{FFFD}");
    }

    #[test]
    fn gpt2_pre_tokenizer_split() {
        assert_eq!(pre_tokenize("Hello world!  It's 42", false), vec!["Hello", " world", "!", " ", " It", "'s", " 42"]);
        assert_eq!(pre_tokenize("a  b\n\nc  ", false), vec!["a", " ", " b", "\n", "\n", "c", "  "]);
        assert_eq!(pre_tokenize("x 42", true), vec!["x", " ", "4", "2"]);
    }

    #[test]
    fn bad_files_are_errors() {
        assert!(Tokenizer::from_json("{").is_err());
        assert!(Tokenizer::from_json(r#"{"model": {"type": "Unigram"}}"#).is_err());
        let split = JSON.replace(r#""type": "ByteLevel""#, r#""type": "Split""#);
        assert!(Tokenizer::from_json(&split).unwrap_err().contains("pre-tokenizer Split is not supported"));
        let norm = JSON.replacen("{", r#"{"normalizer": {"type": "NFC"},"#, 1);
        assert!(Tokenizer::from_json(&norm).unwrap_err().contains("normalizers are not supported"));
        assert!(Tokenizer::from_file("/nonexistent/tokenizer.json").unwrap_err().to_string().contains("/nonexistent"));
    }

    #[test]
    fn chatml_template() {
        let m = [ChatMessage::new("system", "Be brief."), ChatMessage::new("user", "Hi")];
        assert_eq!(
            chatml(&m, true),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        assert_eq!(chatml(&[], false), "");
    }
}
