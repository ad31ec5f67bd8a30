//! Fixed decimals without the standard library's precision formatting (`{:.2}`), which would add
//! its exact float-to-decimal code (about 10 kB) to the widget's wasm: integer arithmetic instead.

/// `value` with `places` decimals (at most 6), rounded half away from zero: `fixed(0.456, 2)` is
/// "0.46", `fixed(-1.25, 1)` is "-1.3". A non-finite value is written as `NaN`, `inf` or `-inf`.
pub fn fixed(value: f64, places: u32) -> String {
    if !value.is_finite() {
        return non_finite(value);
    }
    let places = places.min(6);
    let scale = 10u64.pow(places);
    // Past 2^53 an f64 is already an integer; saturating keeps the cast defined.
    let scaled = (value.abs() * scale as f64).round().min(u64::MAX as f64) as u64;
    let (whole, frac) = (scaled / scale, scaled % scale);
    let sign = if value < 0.0 && scaled != 0 { "-" } else { "" };
    if places == 0 {
        format!("{sign}{whole}")
    } else {
        format!("{sign}{whole}.{frac:0width$}", width = places as usize)
    }
}

/// `value` with `places` decimals and always a sign: "+1.5", "-0.3", "+0.0".
pub fn signed_fixed(value: f64, places: u32) -> String {
    let text = fixed(value, places);
    if text.starts_with('-') || !value.is_finite() {
        text
    } else {
        format!("+{text}")
    }
}

/// `value` with at most 6 decimals and no trailing zeros, as a setting or a refused value shows it:
/// `short(0.7)` is "0.7", `short(2.0)` is "2" (an f32 widened to f64 reads as the f32 it was).
/// Used wherever a float is printed in code the widget carries, so the standard library's float
/// printing (about 12 kB of wasm) stays out.
pub fn short(value: f64) -> String {
    let text = fixed(value, 6);
    match text.contains('.') {
        true => text.trim_end_matches('0').trim_end_matches('.').to_owned(),
        false => text,
    }
}

fn non_finite(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value > 0.0 {
        "inf".into()
    } else {
        "-inf".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_rounds_like_the_standard_formatting_away_from_ties() {
        for (v, p) in [
            (0.456, 2),
            (0.0, 2),
            (12.0, 1),
            (-5.43219, 3),
            (99.996, 2),
            (1234567.891, 1),
            (0.3, 2),
            (7.0, 0),
            (0.0001234, 6),
        ] {
            assert_eq!(
                fixed(v, p),
                format!("{v:.*}", p as usize),
                "{v} to {p} places"
            );
        }
        // Unlike `{:.2}`, a value that rounds to zero has no minus sign.
        assert_eq!(fixed(-0.001, 2), "0.00");
        assert_eq!(fixed(-0.04, 1), "0.0");
        assert_eq!(fixed(f64::NAN, 2), "NaN");
        assert_eq!(fixed(f64::NEG_INFINITY, 1), "-inf");
    }

    #[test]
    fn signed_fixed_always_has_a_sign() {
        assert_eq!(signed_fixed(1.54, 1), "+1.5");
        assert_eq!(signed_fixed(-0.26, 1), "-0.3");
        assert_eq!(signed_fixed(0.0, 1), "+0.0");
    }

    #[test]
    fn short_reads_as_the_f32_it_was() {
        for v in [0.7f32, 0.05, 2.0, 0.75, 1.0, 0.3, 0.123456] {
            assert_eq!(short(v.into()), format!("{v}"), "{v}");
        }
        assert_eq!(short(-0.5), "-0.5");
        assert_eq!(short(1e-9), "0");
    }
}
