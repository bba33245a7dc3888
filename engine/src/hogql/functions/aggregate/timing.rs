//! `medianTiming` and `medianTimingWeighted` as ClickHouse computes them while exact.
//!
//! Values are truncated to integers and capped at 30000; the answer is the sorted values'
//! element at ⌊n/2⌋ (each value counted w times), as Float32, nan for no values. ClickHouse is
//! exact up to 5670 values and then switches to a histogram whose answers are not reproduced
//! here: more values fail with an error naming the function. Negative values (undefined in
//! ClickHouse) fail too.

use datafusion::common::{Result, ScalarValue, exec_err};

const EXACT: u64 = 5670;
const CAP: u64 = 30000;

pub(super) fn median(values: &[f64], weights: Option<&[u64]>) -> Result<ScalarValue> {
    let name = if weights.is_some() {
        "medianTimingWeighted"
    } else {
        "medianTiming"
    };
    let mut kept: Vec<(u64, u64)> = vec![];
    for (i, v) in values.iter().enumerate() {
        if v.is_nan() {
            continue;
        }
        if *v < 0.0 {
            return exec_err!("{name}: negative values are not supported");
        }
        kept.push(((*v as u64).min(CAP), weights.map_or(1, |w| w[i])));
    }
    let total: u64 = kept.iter().map(|p| p.1).fold(0u64, u64::saturating_add);
    if total > EXACT {
        return exec_err!(
            "{name} over more than {EXACT} values is not supported: ClickHouse then answers \
             from a histogram that hedgerow does not reproduce"
        );
    }
    if total == 0 {
        return Ok(ScalarValue::Float32(Some(f32::NAN)));
    }
    kept.sort_unstable();
    let target = total / 2;
    let mut acc = 0u64;
    for (v, w) in &kept {
        acc += w;
        if acc > target {
            return Ok(ScalarValue::Float32(Some(*v as f32)));
        }
    }
    Ok(ScalarValue::Float32(Some(kept[kept.len() - 1].0 as f32)))
}

#[cfg(test)]
mod tests {
    use super::median;
    use datafusion::common::ScalarValue;

    #[test]
    fn exact_while_clickhouse_is() {
        let f = |v: ScalarValue| match v {
            ScalarValue::Float32(Some(x)) => x,
            other => panic!("{other:?}"),
        };
        // chdb: 3, 30000 (capped), 2 (NaN skipped, fractions truncated)
        assert_eq!(f(median(&[1.0, 2.0, 3.0, 10.0], None).unwrap()), 3.0);
        assert_eq!(f(median(&[1e5, 2e5, 5.0], None).unwrap()), 30000.0);
        assert_eq!(f(median(&[1.9, 2.9, f64::NAN], None).unwrap()), 2.0);
        assert_eq!(
            f(median(&[1.0, 2.0, 3.0, 4.0], Some(&[3, 1, 1, 1])).unwrap()),
            2.0
        );
        assert!(f(median(&[], None).unwrap()).is_nan());
        assert!(median(&[-1.0], None).is_err());
        assert!(median(&vec![1.0; 5671], None).is_err());
        assert!(median(&vec![1.0; 5670], None).is_ok());
    }
}
