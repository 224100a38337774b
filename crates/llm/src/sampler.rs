//! Token sampling: greedy, temperature, top-k and top-p (nucleus), driven by
//! a small seeded PRNG so a seed always gives the same tokens.

use crate::error::{Error, Result};

/// SplitMix64: a tiny, fast, deterministic PRNG (not cryptographic).
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform float in `[0, 1)` (53 random bits).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Sampling settings.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplerConfig {
    /// Softmax temperature; `0` means greedy (argmax).
    pub temperature: f32,
    /// Keep only the `k` most likely tokens; `0` keeps all.
    pub top_k: usize,
    /// Keep the smallest set of most likely tokens whose probability sums to
    /// at least `p`, in `(0, 1]`; `1` keeps all.
    pub top_p: f32,
    /// PRNG seed.
    pub seed: u64,
}

impl Default for SamplerConfig {
    /// Greedy.
    fn default() -> Self {
        Self { temperature: 0.0, top_k: 0, top_p: 1.0, seed: 0 }
    }
}

/// A sampler: settings plus the PRNG state.
#[derive(Debug, Clone)]
pub struct Sampler {
    config: SamplerConfig,
    rng: Rng,
}

/// Index of the largest logit (the first on ties; NaN counts as lowest).
pub fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    let mut best_v = f32::NEG_INFINITY;
    for (i, &v) in logits.iter().enumerate() {
        if v > best_v {
            best = i;
            best_v = v;
        }
    }
    best
}

impl Sampler {
    /// A sampler, checking the settings.
    pub fn new(config: SamplerConfig) -> Result<Self> {
        if !(config.temperature >= 0.0 && config.temperature.is_finite()) {
            return Err(Error::BadSampler {
                name: "temperature",
                value: config.temperature.into(),
                expected: "a finite number >= 0",
            });
        }
        if !(config.top_p > 0.0 && config.top_p <= 1.0) {
            return Err(Error::BadSampler { name: "top_p", value: config.top_p.into(), expected: "in (0, 1]" });
        }
        let rng = Rng::new(config.seed);
        Ok(Self { config, rng })
    }

    /// The settings.
    pub fn config(&self) -> &SamplerConfig {
        &self.config
    }

    /// Whether this sampler always takes the argmax.
    pub fn is_greedy(&self) -> bool {
        self.config.temperature == 0.0 || self.config.top_k == 1
    }

    /// Picks the next token from `logits` (one per vocabulary entry, not
    /// empty).
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        assert!(!logits.is_empty(), "sampling from empty logits");
        if self.is_greedy() {
            return argmax(logits) as u32;
        }
        let t = f64::from(self.config.temperature);
        // Candidates by descending logit, ties by ascending index.
        let mut cand: Vec<(usize, f64)> = logits
            .iter()
            .enumerate()
            .map(|(i, &v)| (i, if v.is_nan() { f64::NEG_INFINITY } else { f64::from(v) / t }))
            .collect();
        cand.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        if self.config.top_k > 0 {
            cand.truncate(self.config.top_k);
        }
        let max = cand[0].1;
        if max == f64::NEG_INFINITY {
            return cand[0].0 as u32;
        }
        let mut probs: Vec<f64> = cand.iter().map(|&(_, v)| (v - max).exp()).collect();
        let sum: f64 = probs.iter().sum();
        probs.iter_mut().for_each(|p| *p /= sum);
        let keep = nucleus_len(&probs, f64::from(self.config.top_p));
        let total: f64 = probs[..keep].iter().sum();
        let mut u = self.rng.next_f64() * total;
        for (i, &p) in probs[..keep].iter().enumerate() {
            if u < p {
                return cand[i].0 as u32;
            }
            u -= p;
        }
        cand[keep - 1].0 as u32
    }
}

/// How many of the descending `probs` top-p keeps: the shortest prefix whose
/// sum reaches `p`, at least one.
pub fn nucleus_len(probs: &[f64], p: f64) -> usize {
    if p >= 1.0 {
        return probs.len();
    }
    let mut acc = 0.0;
    for (i, &q) in probs.iter().enumerate() {
        acc += q;
        if acc >= p {
            return i + 1;
        }
    }
    probs.len()
}
