//! ClickHouse's `cityHash64` of a string: Google's CityHash64 in version 1.0.2, the version
//! ClickHouse ships (later versions changed the short-input paths). hedgerow uses it for
//! `SAMPLE`: PostHog's events table samples by `cityHash64(distinct_id)`.

const K0: u64 = 0xc3a5_c85c_97cb_3127;
const K1: u64 = 0xb492_b66f_be98_f273;
const K2: u64 = 0x9ae1_6a3b_2f90_404f;
const K3: u64 = 0xc949_d7c7_509e_6557;

fn fetch64(s: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(s[i..i + 8].try_into().expect("8 bytes"))
}

fn fetch32(s: &[u8], i: usize) -> u64 {
    u32::from_le_bytes(s[i..i + 4].try_into().expect("4 bytes")) as u64
}

fn rotate(v: u64, shift: u32) -> u64 {
    if shift == 0 { v } else { v.rotate_right(shift) }
}

fn shift_mix(v: u64) -> u64 {
    v ^ (v >> 47)
}

fn hash_16(u: u64, v: u64) -> u64 {
    const MUL: u64 = 0x9ddf_ea08_eb38_2d69;
    let mut a = (u ^ v).wrapping_mul(MUL);
    a ^= a >> 47;
    let mut b = (v ^ a).wrapping_mul(MUL);
    b ^= b >> 47;
    b.wrapping_mul(MUL)
}

fn len_0_to_16(s: &[u8]) -> u64 {
    let len = s.len();
    if len > 8 {
        let a = fetch64(s, 0);
        let b = fetch64(s, len - 8);
        // Rotating by at least one bit: `len` is 9 to 16 here.
        return hash_16(a, (b.wrapping_add(len as u64)).rotate_right(len as u32)) ^ b;
    }
    if len >= 4 {
        let a = fetch32(s, 0);
        return hash_16((len as u64).wrapping_add(a << 3), fetch32(s, len - 4));
    }
    if len > 0 {
        let a = s[0] as u64;
        let b = s[len >> 1] as u64;
        let c = s[len - 1] as u64;
        let y = a.wrapping_add(b << 8);
        let z = (len as u64).wrapping_add(c << 2);
        return shift_mix(y.wrapping_mul(K2) ^ z.wrapping_mul(K3)).wrapping_mul(K2);
    }
    K2
}

fn len_17_to_32(s: &[u8]) -> u64 {
    let len = s.len();
    let a = fetch64(s, 0).wrapping_mul(K1);
    let b = fetch64(s, 8);
    let c = fetch64(s, len - 8).wrapping_mul(K2);
    let d = fetch64(s, len - 16).wrapping_mul(K0);
    hash_16(
        rotate(a.wrapping_sub(b), 43)
            .wrapping_add(rotate(c, 30))
            .wrapping_add(d),
        a.wrapping_add(rotate(b ^ K3, 20))
            .wrapping_sub(c)
            .wrapping_add(len as u64),
    )
}

fn weak_32_with_seeds(s: &[u8], i: usize, a: u64, b: u64) -> (u64, u64) {
    let (w, x, y, z) = (
        fetch64(s, i),
        fetch64(s, i + 8),
        fetch64(s, i + 16),
        fetch64(s, i + 24),
    );
    let mut a = a.wrapping_add(w);
    let mut b = rotate(b.wrapping_add(a).wrapping_add(z), 21);
    let c = a;
    a = a.wrapping_add(x).wrapping_add(y);
    b = b.wrapping_add(rotate(a, 44));
    (a.wrapping_add(z), b.wrapping_add(c))
}

fn len_33_to_64(s: &[u8]) -> u64 {
    let len = s.len();
    let mut z = fetch64(s, 24);
    let mut a = fetch64(s, 0).wrapping_add(
        (len as u64)
            .wrapping_add(fetch64(s, len - 16))
            .wrapping_mul(K0),
    );
    let mut b = rotate(a.wrapping_add(z), 52);
    let mut c = rotate(a, 37);
    a = a.wrapping_add(fetch64(s, 8));
    c = c.wrapping_add(rotate(a, 7));
    a = a.wrapping_add(fetch64(s, 16));
    let vf = a.wrapping_add(z);
    let vs = b.wrapping_add(rotate(a, 31)).wrapping_add(c);
    a = fetch64(s, 16).wrapping_add(fetch64(s, len - 32));
    z = fetch64(s, len - 8);
    b = rotate(a.wrapping_add(z), 52);
    c = rotate(a, 37);
    a = a.wrapping_add(fetch64(s, len - 24));
    c = c.wrapping_add(rotate(a, 7));
    a = a.wrapping_add(fetch64(s, len - 16));
    let wf = a.wrapping_add(z);
    let ws = b.wrapping_add(rotate(a, 31)).wrapping_add(c);
    let r = shift_mix(
        vf.wrapping_add(ws)
            .wrapping_mul(K2)
            .wrapping_add(wf.wrapping_add(vs).wrapping_mul(K0)),
    );
    shift_mix(r.wrapping_mul(K0).wrapping_add(vs)).wrapping_mul(K2)
}

/// CityHash64 v1.0.2 of `s`, as ClickHouse's `cityHash64(string)`.
pub(crate) fn city_hash_64(s: &[u8]) -> u64 {
    let len = s.len();
    if len <= 16 {
        return len_0_to_16(s);
    }
    if len <= 32 {
        return len_17_to_32(s);
    }
    if len <= 64 {
        return len_33_to_64(s);
    }
    // Over 64 bytes: the end first, then 64-byte chunks keeping 56 bytes of state.
    let mut x = fetch64(s, 0);
    let mut y = fetch64(s, len - 16) ^ K1;
    let mut z = fetch64(s, len - 56) ^ K0;
    let mut v = weak_32_with_seeds(s, len - 64, len as u64, y);
    let mut w = weak_32_with_seeds(s, len - 32, (len as u64).wrapping_mul(K1), K0);
    z = z.wrapping_add(shift_mix(v.1).wrapping_mul(K1));
    x = rotate(z.wrapping_add(x), 39).wrapping_mul(K1);
    y = rotate(y, 33).wrapping_mul(K1);
    let mut pos = 0;
    let mut left = (len - 1) & !63;
    loop {
        x = rotate(
            x.wrapping_add(y)
                .wrapping_add(v.0)
                .wrapping_add(fetch64(s, pos + 16)),
            37,
        )
        .wrapping_mul(K1);
        y = rotate(y.wrapping_add(v.1).wrapping_add(fetch64(s, pos + 48)), 42).wrapping_mul(K1);
        x ^= w.1;
        y ^= v.0;
        z = rotate(z ^ w.0, 33);
        v = weak_32_with_seeds(s, pos, v.1.wrapping_mul(K1), x.wrapping_add(w.0));
        w = weak_32_with_seeds(s, pos + 32, z.wrapping_add(w.1), y);
        std::mem::swap(&mut z, &mut x);
        pos += 64;
        left -= 64;
        if left == 0 {
            break;
        }
    }
    hash_16(
        hash_16(v.0, w.0)
            .wrapping_add(shift_mix(y).wrapping_mul(K1))
            .wrapping_add(z),
        hash_16(v.1, w.1).wrapping_add(x),
    )
}

/// `cityHash64(s)` of a string column (any string type), NULL for NULL.
pub(crate) fn city_hash_64_of(
    arg: datafusion::logical_expr::Expr,
) -> datafusion::logical_expr::Expr {
    use datafusion::arrow::array::{ArrayRef, AsArray, UInt64Array};
    use datafusion::arrow::datatypes::DataType;
    super::udf::call(
        "cityHash64",
        "",
        DataType::UInt64,
        super::udf::Nulls::FromArgs,
        vec![arg],
        std::sync::Arc::new(|args: &[ArrayRef], _rows: usize| {
            let s = datafusion::arrow::compute::cast(&args[0], &DataType::Utf8)?;
            let out: UInt64Array = s
                .as_string::<i32>()
                .iter()
                .map(|v| v.map(|v| city_hash_64(v.as_bytes())))
                .collect();
            Ok(std::sync::Arc::new(out) as ArrayRef)
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::city_hash_64;

    /// ClickHouse's own answers (`SELECT cityHash64('…')`), one per length class.
    #[test]
    fn matches_clickhouse() {
        let alphabet = "abcdefghijklmnopqrstuvwxyz0123456789".repeat(3);
        let cases: &[(&str, u64)] = &[
            ("", 11160318154034397263),
            ("a", 2603192927274642682),
            ("abc", 4220206313085259313),
            ("abcd", 17823623939509273229),
            ("hello", 2578220239953316063),
            ("user-123", 11228518812836715907),
            ("0123456789abcdef", 692747204941329175),
            ("0123456789abcdefg", 792568009951096890),
            (
                "The quick brown fox jumps over the lazy dog",
                16697807905646383735,
            ),
            (&alphabet, 15862723700437437464),
            ("é漢字", 6223125794344762648),
        ];
        for (s, want) in cases {
            assert_eq!(city_hash_64(s.as_bytes()), *want, "{s:?}");
        }
        let long = |c: &str, n| c.repeat(n);
        assert_eq!(city_hash_64(long("z", 33).as_bytes()), 1727261284475876765);
        assert_eq!(city_hash_64(long("r", 64).as_bytes()), 4709995892011736845);
        assert_eq!(city_hash_64(long("s", 65).as_bytes()), 9135910621767289098);
        assert_eq!(city_hash_64(long("u", 128).as_bytes()), 7482068025624566610);
        assert_eq!(city_hash_64(long("v", 129).as_bytes()), 8142938828103008255);
        assert_eq!(
            city_hash_64(long("w", 200).as_bytes()),
            13773410344366577830
        );
    }
}
