//! `pointInPolygon((x, y), [(x, y), …][, hole, …])`: whether the point is in the polygon,
//! its outer ring's boundary counting as inside and a hole's boundary as outside (as
//! ClickHouse answers). ClickHouse first checks the polygon is valid by Boost.Geometry's
//! rules and fails otherwise; hedgerow answers only for polygons it can tell are valid — a
//! simple ring of three or more distinct points with an area, holes simple, strictly inside
//! it and apart from each other — and fails for every other polygon (some of which Boost
//! accepts, e.g. a hole touching the outer ring at one point), so it never answers where
//! ClickHouse fails. A NaN point is outside.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StructArray, UInt8Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::common::{DataFusionError, Result};
use datafusion::logical_expr::Expr;

use super::udf::{Nulls, call};
use super::{FnContext, FunctionError, invalid, type_of};

type P = (f64, f64);
/// Rings as given and as checked.
type Checked = (Vec<Vec<P>>, Vec<Vec<P>>);

fn is_pair(t: &DataType) -> bool {
    matches!(t, DataType::Struct(f) if f.len() == 2
        && f.iter().all(|f| f.data_type().is_numeric()))
}

pub(super) fn translate(args: Vec<Expr>, ctx: &FnContext<'_>) -> Result<Expr, FunctionError> {
    let t = type_of(&args[0], ctx)?;
    if !is_pair(&t) {
        return Err(invalid(format!(
            "The first argument of `pointInPolygon` must be a tuple of two numbers, got {t}"
        )));
    }
    for a in &args[1..] {
        let t = type_of(a, ctx)?;
        if !matches!(&t, DataType::List(f) if is_pair(f.data_type())) {
            return Err(invalid(format!(
                "The rings of `pointInPolygon` must be arrays of tuples of two numbers, got {t}"
            )));
        }
    }
    let k = Arc::new(move |a: &[ArrayRef], rows: usize| -> Result<ArrayRef> {
        let (px, py) = pair_columns(a[0].as_struct())?;
        let rings = a[1..]
            .iter()
            .map(|r| {
                let l = r.as_list::<i32>();
                let (x, y) = pair_columns(l.values().as_struct())?;
                Ok((l.clone(), x, y))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut out = Vec::with_capacity(rows);
        // The previous row's rings as given and as checked: constant rings are checked once.
        let mut last: Option<Checked> = None;
        for r in 0..rows {
            if a[0].is_null(r)
                || px.is_null(r)
                || py.is_null(r)
                || rings.iter().any(|x| x.0.is_null(r))
            {
                out.push(None);
                continue;
            }
            let mut poly: Vec<Vec<P>> = Vec::with_capacity(rings.len());
            for (l, x, y) in &rings {
                let offs = l.value_offsets();
                let ring: Vec<P> = (offs[r] as usize..offs[r + 1] as usize)
                    .map(|j| (x.value(j), y.value(j)))
                    .collect();
                poly.push(ring);
            }
            let cached = matches!(&last, Some((given, _)) if *given == poly);
            if !cached {
                let rings = poly
                    .iter()
                    .map(|r| ring_of(r))
                    .collect::<Result<Vec<_>>>()?;
                check_valid(&rings)?;
                last = Some((poly, rings));
            }
            let Some((_, rings)) = &last else {
                unreachable!("set above")
            };
            let p = (px.value(r), py.value(r));
            out.push(Some(u8::from(contains(rings, p))));
        }
        Ok(Arc::new(UInt8Array::from(out)) as ArrayRef)
    });
    Ok(call(
        "pointInPolygon",
        "",
        DataType::UInt8,
        Nulls::FromArgs,
        args,
        k,
    ))
}

fn pair_columns(
    s: &StructArray,
) -> Result<(
    datafusion::arrow::array::Float64Array,
    datafusion::arrow::array::Float64Array,
)> {
    let x = cast(s.column(0), &DataType::Float64)?;
    let y = cast(s.column(1), &DataType::Float64)?;
    Ok((
        x.as_primitive::<Float64Type>().clone(),
        y.as_primitive::<Float64Type>().clone(),
    ))
}

fn invalid_polygon(why: &str) -> DataFusionError {
    DataFusionError::Execution(format!(
        "pointInPolygon: Polygon is not valid (or not one hedgerow can tell is valid): {why}"
    ))
}

/// A ring without consecutive repeats or its closing point; at least three points.
fn ring_of(points: &[P]) -> Result<Vec<P>> {
    if points.iter().any(|p| !p.0.is_finite() || !p.1.is_finite()) {
        return Err(invalid_polygon("a coordinate is not finite"));
    }
    let mut ring: Vec<P> = vec![];
    for &p in points {
        if ring.last() != Some(&p) {
            ring.push(p);
        }
    }
    while ring.len() > 1 && ring.first() == ring.last() {
        ring.pop();
    }
    if ring.len() < 3 {
        return Err(invalid_polygon("Geometry has too few points"));
    }
    Ok(ring)
}

fn cross(o: P, a: P, b: P) -> f64 {
    (a.0 - o.0) * (b.1 - o.1) - (a.1 - o.1) * (b.0 - o.0)
}

fn on_segment(p: P, a: P, b: P) -> bool {
    cross(a, b, p) == 0.0
        && p.0 >= a.0.min(b.0)
        && p.0 <= a.0.max(b.0)
        && p.1 >= a.1.min(b.1)
        && p.1 <= a.1.max(b.1)
}

/// Whether segments ab and cd share any point.
fn segments_meet(a: P, b: P, c: P, d: P) -> bool {
    let (d1, d2) = (cross(c, d, a), cross(c, d, b));
    let (d3, d4) = (cross(a, b, c), cross(a, b, d));
    if ((d1 > 0.0 && d2 < 0.0) || (d1 < 0.0 && d2 > 0.0))
        && ((d3 > 0.0 && d4 < 0.0) || (d3 < 0.0 && d4 > 0.0))
    {
        return true;
    }
    on_segment(a, c, d) || on_segment(b, c, d) || on_segment(c, a, b) || on_segment(d, a, b)
}

fn edges(r: &[P]) -> impl Iterator<Item = (P, P)> + '_ {
    (0..r.len()).map(move |i| (r[i], r[(i + 1) % r.len()]))
}

/// A simple ring: no spike (an edge folding back on the previous), no two non-adjacent edges
/// meeting, an area.
fn check_simple(r: &[P]) -> Result<()> {
    let n = r.len();
    let area: f64 = edges(r).map(|(a, b)| a.0 * b.1 - b.0 * a.1).sum();
    if area == 0.0 {
        return Err(invalid_polygon("Geometry has no area"));
    }
    for i in 0..n {
        let (prev, cur, next) = (r[(i + n - 1) % n], r[i], r[(i + 1) % n]);
        // Collinear and turning back: a spike.
        if cross(prev, cur, next) == 0.0 && on_segment(next, prev, cur)
            || cross(prev, cur, next) == 0.0 && on_segment(prev, cur, next)
        {
            return Err(invalid_polygon("Geometry has spikes"));
        }
    }
    for i in 0..n {
        for j in i + 1..n {
            let adjacent = j == i + 1 || (i == 0 && j == n - 1);
            if adjacent {
                continue;
            }
            let (a, b) = (r[i], r[(i + 1) % n]);
            let (c, d) = (r[j], r[(j + 1) % n]);
            if segments_meet(a, b, c, d) {
                return Err(invalid_polygon("Geometry has invalid self-intersections"));
            }
        }
    }
    Ok(())
}

/// Even-odd test, strictly inside (the boundary is neither).
fn strictly_inside(r: &[P], p: P) -> bool {
    let mut inside = false;
    for (a, b) in edges(r) {
        if (a.1 > p.1) != (b.1 > p.1) {
            let x = a.0 + (p.1 - a.1) * (b.0 - a.0) / (b.1 - a.1);
            if p.0 < x {
                inside = !inside;
            }
        }
    }
    inside
}

fn on_boundary(r: &[P], p: P) -> bool {
    edges(r).any(|(a, b)| on_segment(p, a, b))
}

fn check_valid(rings: &[Vec<P>]) -> Result<()> {
    for r in rings {
        check_simple(r)?;
    }
    let outer = &rings[0];
    let holes = &rings[1..];
    for (i, h) in holes.iter().enumerate() {
        if h.iter()
            .any(|&p| !strictly_inside(outer, p) || on_boundary(outer, p))
            || edges(h).any(|(a, b)| edges(outer).any(|(c, d)| segments_meet(a, b, c, d)))
        {
            return Err(invalid_polygon(
                "Geometry has interior rings not strictly inside the outer boundary",
            ));
        }
        for g in &holes[i + 1..] {
            if edges(h).any(|(a, b)| edges(g).any(|(c, d)| segments_meet(a, b, c, d)))
                || strictly_inside(g, h[0])
                || strictly_inside(h, g[0])
            {
                return Err(invalid_polygon(
                    "Geometry has interior rings that meet or are nested",
                ));
            }
        }
    }
    Ok(())
}

fn contains(rings: &[Vec<P>], p: P) -> bool {
    if p.0.is_nan() || p.1.is_nan() {
        return false;
    }
    let outer = &rings[0];
    if !(on_boundary(outer, p) || strictly_inside(outer, p)) {
        return false;
    }
    !rings[1..]
        .iter()
        .any(|h| on_boundary(h, p) || strictly_inside(h, p))
}

#[cfg(test)]
mod tests {
    use super::{check_valid, contains, ring_of};

    fn poly(rings: &[&[(f64, f64)]]) -> Result<Vec<Vec<(f64, f64)>>, String> {
        let rings = rings
            .iter()
            .map(|r| ring_of(r))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string())?;
        check_valid(&rings).map_err(|e| e.to_string())?;
        Ok(rings)
    }

    #[test]
    fn points_in_polygons_like_clickhouse() {
        let quad: &[(f64, f64)] = &[(6.0, 0.0), (8.0, 4.0), (5.0, 8.0), (0.0, 2.0)];
        let q = poly(&[quad]).unwrap();
        assert!(contains(&q, (3.0, 3.0)));
        assert!(!contains(&q, (7.0, 7.0)));
        let square: &[(f64, f64)] = &[(0.0, 0.0), (2.0, 0.0), (2.0, 2.0), (0.0, 2.0)];
        let s = poly(&[square]).unwrap();
        for p in [(1.0, 0.0), (0.0, 0.0), (2.0, 1.0), (1.0, 2.0), (0.0, 1.0)] {
            assert!(contains(&s, p), "{p:?} on the boundary is inside");
        }
        assert!(!contains(&s, (f64::NAN, 1.0)));
        let big: &[(f64, f64)] = &[(0.0, 0.0), (4.0, 0.0), (4.0, 4.0), (0.0, 4.0)];
        let hole: &[(f64, f64)] = &[(1.0, 1.0), (3.0, 1.0), (3.0, 3.0), (1.0, 3.0)];
        let h = poly(&[big, hole]).unwrap();
        assert!(!contains(&h, (2.0, 2.0)));
        assert!(!contains(&h, (1.0, 1.0)), "a hole's boundary is outside");
        assert!(!contains(&h, (2.0, 1.0)));
        assert!(contains(&h, (0.5, 0.5)));
        // Clockwise and with a repeated point: valid.
        assert!(poly(&[&[(0.0, 0.0), (0.0, 2.0), (2.0, 2.0), (2.0, 0.0)]]).is_ok());
        assert!(poly(&[&[(0.0, 0.0), (2.0, 0.0), (2.0, 0.0), (2.0, 2.0), (0.0, 2.0)]]).is_ok());
        // Invalid for ClickHouse, refused here too.
        assert!(poly(&[&[(0.0, 0.0), (4.0, 0.0)]]).is_err());
        assert!(poly(&[&[(0.0, 0.0), (2.0, 2.0), (2.0, 0.0), (0.0, 2.0)]]).is_err());
        assert!(poly(&[&[(0.0, 0.0), (4.0, 0.0), (2.0, 0.0), (4.0, 4.0)]]).is_err());
        assert!(poly(&[&[(0.0, 0.0), (4.0, 0.0), (4.0, 4.0), (2.0, 0.0), (0.0, 4.0)]]).is_err());
        assert!(poly(&[big, &[(5.0, 5.0), (6.0, 5.0), (6.0, 6.0)]]).is_err());
        assert!(poly(&[big, &[(0.0, 1.0), (2.0, 1.0), (2.0, 3.0), (0.0, 3.0)]]).is_err());
        assert!(
            poly(&[
                &[(0.0, 0.0), (2.0, 0.0), (2.0, 2.0), (0.0, 2.0)],
                &[(0.5, 0.5), (1.5, 0.5), (1.5, 1.5), (0.5, 1.5)],
                &[(0.6, 0.6), (0.8, 0.6), (0.8, 0.8)],
            ])
            .is_err()
        );
        assert!(poly(&[&[(0.0, 0.0), (2.0, 0.0), (2.0, f64::NAN)]]).is_err());
    }
}
