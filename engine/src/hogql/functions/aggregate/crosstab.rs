//! The categorical statistics of two columns from their cross tabulation: `contingency`,
//! `cramersV`, `cramersVBiasCorrected` and `theilsU` (ClickHouse's formulas, checked against
//! chdb).

use super::rows::{RowsKind, keys};
use datafusion::arrow::array::{Array, ArrayRef};
use datafusion::common::Result;
use std::collections::BTreeMap;

/// The cross tabulation of two columns: counts of a, of b and of (a, b) pairs, and n (ordered
/// maps, so the sums run in one order and the answer does not vary between runs).
struct CrossTab {
    a: BTreeMap<Vec<u8>, f64>,
    b: BTreeMap<Vec<u8>, f64>,
    ab: BTreeMap<(Vec<u8>, Vec<u8>), f64>,
    n: f64,
}

impl CrossTab {
    fn new(x: &ArrayRef, y: &ArrayRef) -> Result<Self> {
        let (kx, ky) = (keys(x)?, keys(y)?);
        let mut t = CrossTab {
            a: BTreeMap::new(),
            b: BTreeMap::new(),
            ab: BTreeMap::new(),
            n: kx.len() as f64,
        };
        for (a, b) in kx.into_iter().zip(ky) {
            *t.a.entry(a.clone()).or_default() += 1.0;
            *t.b.entry(b.clone()).or_default() += 1.0;
            *t.ab.entry((a, b)).or_default() += 1.0;
        }
        Ok(t)
    }

    /// φ² = Σ n_ab² / (n_a·n_b) − 1.
    fn phi_squared(&self) -> f64 {
        let s: f64 = self
            .ab
            .iter()
            .map(|((a, b), &ab)| ab * ab / (self.a[a] * self.b[b]))
            .sum();
        s - 1.0
    }
}

/// The statistic `kind` of the rows (x, y); nan for no rows.
pub(super) fn statistic(kind: &RowsKind, x: &ArrayRef, y: &ArrayRef) -> Result<f64> {
    let n = x.len();
    let ct = CrossTab::new(x, y)?;
    let v = if n == 0 {
        f64::NAN
    } else {
        match kind {
            RowsKind::Contingency => {
                let phi = ct.phi_squared();
                (phi / (phi + 1.0)).sqrt()
            }
            RowsKind::CramersV => {
                let phi = ct.phi_squared();
                let q = (ct.a.len() - 1).min(ct.b.len() - 1) as f64;
                (phi / q).sqrt()
            }
            RowsKind::CramersVBiasCorrected => {
                let phi = ct.phi_squared();
                let (ka, kb) = (ct.a.len() as f64, ct.b.len() as f64);
                let (a1, b1, n1) = (ka - 1.0, kb - 1.0, ct.n - 1.0);
                let res = (phi - a1 * b1 / n1).max(0.0);
                let ca = ka - a1 * a1 / n1;
                let cb = kb - b1 * b1 / n1;
                (res / (ca.min(cb) - 1.0)).sqrt()
            }
            _ => {
                let h: f64 = ct.a.values().map(|&c| (c / ct.n) * (c / ct.n).ln()).sum();
                let dep: f64 = ct
                    .ab
                    .iter()
                    .map(|((_, b), &ab)| (ab / ct.n) * (ab / ct.b[b]).ln())
                    .sum();
                // One value of a: no uncertainty to remove (ClickHouse answers 0).
                if h == 0.0 { 0.0 } else { (h - dep) / h }
            }
        }
    };
    Ok(v)
}
