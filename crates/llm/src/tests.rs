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
