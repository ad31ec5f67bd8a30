//! Unit conversion: length, mass, volume, speed, area and temperature.

/// A unit: its kind and how it maps onto the kind's base unit (`base = value * factor + offset`).
struct Unit {
    names: &'static [&'static str],
    kind: &'static str,
    factor: f64,
    offset: f64,
}

const fn unit(names: &'static [&'static str], kind: &'static str, factor: f64) -> Unit {
    Unit {
        names,
        kind,
        factor,
        offset: 0.0,
    }
}

const UNITS: &[Unit] = &[
    unit(&["m", "meter", "meters", "metre", "metres"], "length", 1.0),
    unit(
        &["km", "kilometer", "kilometers", "kilometre", "kilometres"],
        "length",
        1000.0,
    ),
    unit(&["cm", "centimeter", "centimeters"], "length", 0.01),
    unit(&["mm", "millimeter", "millimeters"], "length", 0.001),
    unit(&["mi", "mile", "miles"], "length", 1609.344),
    unit(&["yd", "yard", "yards"], "length", 0.9144),
    unit(&["ft", "foot", "feet"], "length", 0.3048),
    unit(&["in", "inch", "inches"], "length", 0.0254),
    unit(
        &["nmi", "nautical mile", "nautical miles"],
        "length",
        1852.0,
    ),
    unit(&["kg", "kilogram", "kilograms"], "mass", 1.0),
    unit(&["g", "gram", "grams"], "mass", 0.001),
    unit(&["mg", "milligram", "milligrams"], "mass", 1e-6),
    unit(&["t", "tonne", "tonnes"], "mass", 1000.0),
    unit(&["lb", "lbs", "pound", "pounds"], "mass", 0.453_592_37),
    unit(&["oz", "ounce", "ounces"], "mass", 0.028_349_523_125),
    unit(&["st", "stone", "stones"], "mass", 6.350_293_18),
    unit(&["l", "liter", "liters", "litre", "litres"], "volume", 1.0),
    unit(
        &[
            "ml",
            "milliliter",
            "milliliters",
            "millilitre",
            "millilitres",
        ],
        "volume",
        0.001,
    ),
    unit(&["gal", "gallon", "gallons"], "volume", 3.785_411_784),
    unit(&["qt", "quart", "quarts"], "volume", 0.946_352_946),
    unit(&["pt", "pint", "pints"], "volume", 0.473_176_473),
    unit(&["cup", "cups"], "volume", 0.236_588_236_5),
    unit(
        &["fl oz", "fluid ounce", "fluid ounces"],
        "volume",
        0.029_573_529_562_5,
    ),
    unit(&["m/s", "meters per second"], "speed", 1.0),
    unit(&["km/h", "kph", "kilometers per hour"], "speed", 1.0 / 3.6),
    unit(&["mph", "miles per hour"], "speed", 0.447_04),
    unit(&["kn", "knot", "knots"], "speed", 0.514_444_444_444_444_5),
    unit(&["m2", "m²", "square meter", "square meters"], "area", 1.0),
    unit(
        &["km2", "km²", "square kilometer", "square kilometers"],
        "area",
        1e6,
    ),
    unit(&["ha", "hectare", "hectares"], "area", 1e4),
    unit(&["acre", "acres"], "area", 4_046.856_422_4),
    unit(
        &["ft2", "ft²", "square foot", "square feet"],
        "area",
        0.092_903_04,
    ),
    Unit {
        names: &["c", "°c", "celsius"],
        kind: "temperature",
        factor: 1.0,
        offset: 273.15,
    },
    Unit {
        names: &["f", "°f", "fahrenheit"],
        kind: "temperature",
        factor: 5.0 / 9.0,
        offset: 273.15 - 32.0 * 5.0 / 9.0,
    },
    unit(&["k", "kelvin"], "temperature", 1.0),
];

/// Why a conversion is impossible.
#[derive(Debug, Clone, PartialEq)]
pub enum ConvertError {
    Unknown(String),
    Kinds {
        from: &'static str,
        to: &'static str,
    },
    NotFinite,
}

impl std::fmt::Display for ConvertError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConvertError::Unknown(u) => write!(
                f,
                "unknown unit {u:?}; known: {}",
                UNITS
                    .iter()
                    .map(|u| u.names[0])
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            ConvertError::Kinds { from, to } => {
                write!(f, "cannot convert a {from} into a {to}")
            }
            ConvertError::NotFinite => write!(f, "the value must be a finite number"),
        }
    }
}

fn find(name: &str) -> Result<&'static Unit, ConvertError> {
    let wanted = name.trim().to_lowercase();
    UNITS
        .iter()
        .find(|u| u.names.contains(&wanted.as_str()))
        .ok_or_else(|| ConvertError::Unknown(name.to_owned()))
}

/// `value` in unit `from`, expressed in unit `to`.
pub fn convert(value: f64, from: &str, to: &str) -> Result<f64, ConvertError> {
    if !value.is_finite() {
        return Err(ConvertError::NotFinite);
    }
    let (a, b) = (find(from)?, find(to)?);
    if a.kind != b.kind {
        return Err(ConvertError::Kinds {
            from: a.kind,
            to: b.kind,
        });
    }
    Ok((value * a.factor + a.offset - b.offset) / b.factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn conversions_match_published_values() {
        assert!(close(convert(1.0, "mi", "km").unwrap(), 1.609_344));
        assert!(close(convert(100.0, "C", "F").unwrap(), 212.0));
        assert!(close(
            convert(-40.0, "celsius", "fahrenheit").unwrap(),
            -40.0
        ));
        assert!(close(convert(0.0, "K", "c").unwrap(), -273.15));
        assert!(close(convert(1.0, "gallon", "l").unwrap(), 3.785_411_784));
        assert!(close(convert(16.0, "oz", "lb").unwrap(), 1.0));
        assert!(close(
            convert(100.0, "km/h", "mph").unwrap(),
            62.137_119_223_733_4
        ));
        assert!(close(
            convert(1.0, "ha", "acre").unwrap(),
            2.471_053_814_671_653
        ));
    }

    #[test]
    fn impossible_conversions_say_why() {
        assert!(matches!(
            convert(1.0, "kg", "m"),
            Err(ConvertError::Kinds { .. })
        ));
        let e = convert(1.0, "parsec", "m").unwrap_err();
        assert!(e.to_string().contains("unknown unit \"parsec\""), "{e}");
        assert_eq!(convert(f64::NAN, "m", "m"), Err(ConvertError::NotFinite));
    }
}
