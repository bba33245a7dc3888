//! `medianTDigest` and `medianTDigestWeighted`: ClickHouse's t-digest, reproduced step by
//! step so its answers are ClickHouse's (checked against chdb from 5 to 5000 values).
//!
//! Values are Float32 centroids of count 1 (or the weight), added in arrival order; every
//! 2049 added centroids, and before answering, the centroids are sorted and neighbours merged
//! while their combined count stays within 4·ε·n·q(1−q) of the quantile q they sit at
//! (ε = 0.01), merged means moving by count-weighted steps. The median interpolates between
//! the two centroids around n/2, a centroid of count 1 counting as a point. ClickHouse on
//! several threads merges per-thread digests in an order of its own; here rows arrive in one
//! order (as on one thread). NaNs are skipped.

use datafusion::common::{Result, ScalarValue, exec_err};

/// Centroids added before the digest compresses them.
const MAX_UNMERGED: usize = 2048;
const EPSILON: f64 = 0.01;

#[derive(Clone, Copy)]
struct Centroid {
    mean: f32,
    count: f32,
}

#[derive(Default)]
struct Digest {
    centroids: Vec<Centroid>,
    count: f64,
    unmerged: usize,
}

impl Digest {
    fn add(&mut self, x: f64, w: u64) {
        if x.is_nan() {
            return;
        }
        self.centroids.push(Centroid {
            mean: x as f32,
            count: w as f32,
        });
        self.count += w as f64;
        self.unmerged += 1;
        if self.unmerged > MAX_UNMERGED {
            self.compress();
        }
    }

    fn compress(&mut self) {
        if self.unmerged == 0 || self.centroids.is_empty() {
            return;
        }
        self.centroids.sort_by(|a, b| a.mean.total_cmp(&b.mean));
        let count = self.count;
        let eps4 = count * EPSILON * 4.0;
        let mut out: Vec<Centroid> = Vec::with_capacity(self.centroids.len());
        out.push(self.centroids[0]);
        let mut sum = 0.0f64;
        let mut l_mean = self.centroids[0].mean as f64;
        let mut l_count = self.centroids[0].count as f64;
        for r in &self.centroids[1..] {
            let (r_mean, r_count) = (r.mean as f64, r.count as f64);
            let ql = (sum + l_count * 0.5) / count;
            let qr = (sum + l_count + r_count * 0.5) / count;
            let err = (ql * (1.0 - ql)).min(qr * (1.0 - qr));
            let mergeable = l_mean == r_mean || (!l_mean.is_infinite() && !r_mean.is_infinite());
            if l_count + r_count <= eps4 * err && mergeable {
                l_count += r_count;
                if r_mean != l_mean {
                    l_mean += (r_mean - l_mean) * r_count / l_count;
                }
                if let Some(last) = out.last_mut() {
                    *last = Centroid {
                        mean: l_mean as f32,
                        count: l_count as f32,
                    };
                }
            } else {
                sum += out.last().map_or(0.0, |c| c.count as f64);
                out.push(*r);
                l_mean = r_mean;
                l_count = r_count;
            }
        }
        self.centroids = out;
        self.unmerged = 0;
    }

    fn median(&mut self) -> f32 {
        if self.centroids.is_empty() {
            return f32::NAN;
        }
        self.compress();
        if self.centroids.len() == 1 {
            return self.centroids[0].mean;
        }
        let x = 0.5 * self.count;
        let (mut prev_x, mut sum) = (0.0f64, 0.0f64);
        let mut prev = self.centroids[0];
        for c in &self.centroids {
            let current_x = sum + c.count as f64 * 0.5;
            if current_x >= x {
                let left = prev_x + if prev.count == 1.0 { 0.5 } else { 0.0 };
                let right = current_x - if c.count == 1.0 { 0.5 } else { 0.0 };
                if x <= left {
                    return prev.mean;
                }
                if x >= right {
                    return c.mean;
                }
                let (x, left, right) = (x as f32 as f64, left as f32 as f64, right as f32 as f64);
                let k = (x - left) / (right - left);
                let (y1, y2) = (prev.mean as f64, c.mean as f64);
                return (y1 + k * (y2 - y1)) as f32;
            }
            sum += c.count as f64;
            prev = *c;
            prev_x = current_x;
        }
        self.centroids[self.centroids.len() - 1].mean
    }
}

/// The median of `values` (with their weights, else 1 each) as ClickHouse's t-digest gives it.
pub(super) fn median(values: &[f64], weights: Option<&[u64]>) -> Result<ScalarValue> {
    if weights.is_some_and(|w| w.len() != values.len()) {
        return exec_err!("medianTDigestWeighted: one weight per value");
    }
    let mut d = Digest::default();
    for (i, v) in values.iter().enumerate() {
        d.add(*v, weights.map_or(1, |w| w[i]));
    }
    Ok(ScalarValue::Float32(Some(d.median())))
}

#[cfg(test)]
mod tests {
    use super::median;
    use datafusion::common::ScalarValue;

    fn m(v: &[f64], w: Option<&[u64]>) -> f32 {
        match median(v, w).unwrap() {
            ScalarValue::Float32(Some(x)) => x,
            other => panic!("{other:?}"),
        }
    }

    /// Values chdb answers.
    #[test]
    fn answers_as_clickhouse() {
        assert_eq!(m(&[1.0, 2.0, 3.0, 4.0], None), 2.0);
        assert_eq!(m(&(1..=10).map(f64::from).collect::<Vec<_>>(), None), 5.0);
        assert_eq!(m(&[1.0, f64::NAN, 3.0, 4.0], None), 3.0);
        assert_eq!(m(&[f64::INFINITY, 1.0, f64::NEG_INFINITY], None), 1.0);
        assert!(m(&[], None).is_nan());
        assert_eq!(m(&[1.0, 2.0, 3.0, 10.0], Some(&[3, 1, 1, 1])), 2.0);
        assert_eq!(m(&[1.0, 2.0, 3.0], Some(&[0, 0, 1])), 3.0);
        // merged centroids: interpolated (chdb: 1.5066226)
        assert_eq!(
            m(&[1.0, 2.0, 3.0, 10.0], Some(&[300, 1, 1, 100])),
            1.506_622_6
        );
        // i·37 mod 1000 for i < 1000 (one compression) and i < 3000 (one on the way, after
        // 2049 values, then the last; chdb on one thread)
        let v: Vec<f64> = (0..3000).map(|i| ((i * 37) % 1000) as f64).collect();
        assert_eq!(m(&v[..1000], None), 499.5);
        assert_eq!(m(&v, None), 499.444_12);
    }
}
