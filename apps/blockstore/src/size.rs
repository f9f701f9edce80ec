//! Sizes on the command line: `4096`, `4KiB`, `512MiB`, `1GiB`, `2TiB` (binary units; `K`,
//! `M`, `G`, `T` and `KB`... are read as the same binary units, as disk tools do).

/// Parses a size; the error says what is accepted.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let value: u64 = digits.parse().map_err(|_| {
        format!("'{text}' is not a size: use a number with an optional unit, like 4KiB or 1GiB")
    })?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => {
            return Err(format!(
                "unknown size unit '{other}' in '{text}': use KiB, MiB, GiB or TiB"
            ))
        }
    };
    value
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("'{text}' is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4KiB"), Ok(4096));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("64 MiB"), Ok(64 << 20));
        assert!(parse_size("1.5GiB").is_err());
        assert!(parse_size("1PiB").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999999TiB").is_err());
    }
}
