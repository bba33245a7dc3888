//! Small deterministic helpers: mixing, UUIDv7 from a seed, weighted picks, draws.

use super::*;

/// SplitMix64: a stateless mix for per-entity randomness (ids, render-time details), so
/// rendering an event never depends on the order others were rendered in.
pub(super) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

pub(super) fn mix2(a: u64, b: u64) -> u64 {
    mix(a ^ mix(b))
}

/// A UUIDv7 with the given Unix milliseconds and pseudo-random bits.
pub(super) fn uuid7(ms: i64, bits: u64) -> Uuid {
    let r = ((mix(bits) as u128) << 64) | mix(bits ^ 0x5555) as u128;
    let rand_a = (r >> 64) & 0xfff;
    let rand_b = r & ((1u128 << 62) - 1);
    let v = ((ms.max(0) as u128 & ((1u128 << 48) - 1)) << 80)
        | (0x7u128 << 76)
        | (rand_a << 64)
        | (0b10u128 << 62)
        | rand_b;
    Uuid::from_u128(v)
}

/// A cumulative table for weighted choices.
pub(super) struct Weighted {
    pub(super) cum: Vec<f64>,
}

impl Weighted {
    pub(super) fn new(weights: impl IntoIterator<Item = f64>) -> Self {
        let mut acc = 0.0;
        let cum = weights
            .into_iter()
            .map(|w| {
                acc += w;
                acc
            })
            .collect();
        Weighted { cum }
    }

    /// Zipf(s) over `n` items: item `i` has weight `1 / (i + 1)^s`.
    pub(super) fn zipf(n: usize, s: f64) -> Self {
        Self::new((0..n).map(|i| 1.0 / ((i + 1) as f64).powf(s)))
    }

    pub(super) fn pick(&self, u: f64) -> usize {
        let total = *self.cum.last().expect("non-empty");
        let x = u * total;
        self.cum
            .partition_point(|c| *c <= x)
            .min(self.cum.len() - 1)
    }
}

pub(super) fn pick<T: Copy>(rng: &mut StdRng, items: &[(T, f64)]) -> T {
    let total: f64 = items.iter().map(|i| i.1).sum();
    let mut x = rng.random::<f64>() * total;
    for (v, w) in items {
        if x < *w {
            return *v;
        }
        x -= w;
    }
    items.last().expect("non-empty").0
}

pub(super) fn normal(rng: &mut StdRng) -> f64 {
    let u1: f64 = rng.random::<f64>().max(1e-12);
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

pub(super) fn exponential(rng: &mut StdRng, mean: f64) -> f64 {
    -mean * (1.0 - rng.random::<f64>()).ln()
}
