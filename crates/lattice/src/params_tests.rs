//! Unit tests of the lattice parameters: layouts, plaintext moduli, correctness bounds.

use super::*;

#[test]
fn tables_follow_the_derivation() {
    for (i, log_m) in (TABLE_LOG_M.0..=TABLE_LOG_M.1).enumerate() {
        let m = 1u64 << log_m;
        assert_eq!(
            SIMPLE_PIR_P[i],
            max_plaintext_modulus(m, 1),
            "m = 2^{log_m}"
        );
        let p = DOUBLE_PIR_P[i];
        let kappa = digits(p) as u64;
        let bound = max_plaintext_modulus(m, kappa * (LWE_N as u64 + 1));
        assert!(
            p <= bound && bound - p <= 1,
            "m = 2^{log_m}: {p} vs {bound}"
        );
    }
}

#[test]
fn p_for_is_conservative_between_table_points() {
    assert_eq!(p_for(1, Scheme::SimplePir).unwrap(), 991);
    assert_eq!(p_for(8192, Scheme::SimplePir).unwrap(), 991);
    assert_eq!(p_for(8193, Scheme::SimplePir).unwrap(), 833);
    assert_eq!(p_for(1 << 21, Scheme::SimplePir).unwrap(), 247);
    assert_eq!(p_for(1 << 21, Scheme::DoublePir).unwrap(), 231);
    assert!(p_for((1 << 21) + 1, Scheme::SimplePir).is_err());
    for m in [1u64, 100, 8191, 9000, 40_000, 1 << 20, 1_500_000] {
        for scheme in [Scheme::SimplePir, Scheme::DoublePir] {
            assert!(p_for(m, scheme).unwrap() <= max_plaintext_modulus(m, 1));
        }
    }
}

#[test]
fn digit_and_bit_counts() {
    assert_eq!(
        (
            digits(991),
            digits(256),
            digits(255),
            digits(231),
            digits(2)
        ),
        (4, 4, 5, 5, 32)
    );
    assert_eq!((entry_bits(991), element_bits(991)), (9, 10));
    assert_eq!((entry_bits(512), element_bits(512)), (9, 9));
    assert_eq!((entry_bits(247), element_bits(247)), (7, 8));
    assert_eq!(delta(991), (4_294_967_296u64 / 991) as u32);
}

#[test]
fn gigabyte_of_bytes_is_near_square() {
    // the table's p = 701 at m = 2^15 packs 3 x 9 data bits per word; 256 packs 4 x 8
    let shape = Params::new(Scheme::SimplePir, 1 << 30, 8).unwrap();
    assert_eq!(shape.p, 256);
    assert!(p_for(u64::from(shape.columns), Scheme::SimplePir).unwrap() > 256);
    let ratio = f64::from(shape.rows) / f64::from(shape.columns);
    assert!((0.5..2.0).contains(&ratio), "{shape:?}");
    assert!(u64::from(shape.rows) * u64::from(shape.columns) * 8 >= 8 << 30);
    shape.validate().unwrap();
    // DoublePIR at 1 GB: p from max(rows, columns)
    let double = Params::new(Scheme::DoublePir, 1 << 33, 1).unwrap();
    assert!(
        double.p
            <= p_for(
                u64::from(double.rows.max(double.columns)),
                Scheme::DoublePir
            )
            .unwrap()
    );
    double.validate().unwrap();
}

#[test]
fn double_pir_is_wide_so_the_second_layer_is_cheap() {
    // 1 GiB of 32-byte records: p = 276 from the table (m = 2^20), rounded to 256.
    let shape = Params::new(Scheme::DoublePir, 1 << 25, 256).unwrap();
    shape.validate().unwrap();
    assert_eq!(
        (shape.p, shape.digits(), shape.entries_per_record()),
        (256, 4, 32)
    );
    let (rows, columns) = (u64::from(shape.rows), u64::from(shape.columns));
    let second = 33 * 4 * LWE_N as u64 * rows;
    assert!(
        second * DOUBLE_PIR_SECOND_LAYER_SHARE <= rows * columns,
        "{shape:?}"
    );
    // the query (m + e ℓ words) is smaller than the near-square layout's
    let square = Params::with_modulus(Scheme::DoublePir, 1 << 25, 256, 256).unwrap();
    let query = |s: &Params| u64::from(s.columns) + 32 * u64::from(s.rows);
    assert!(query(&shape) < query(&square));
    let small = Params::new(Scheme::DoublePir, 1000, 256).unwrap();
    assert_eq!((small.p, small.digits()), (256, digits(929)));
    assert_eq!(small.rows(), small.entries_per_record());
}

#[test]
fn one_entry_records_keep_the_second_layer_to_an_eighth_of_the_bytes() {
    // 1 GiB of 1-bit records: 2^30 entries of 8 bits, four per word. The multiply-add rule
    // alone allows 26,214 rows; the bytes rule halves them.
    let shape = Params::new(Scheme::DoublePir, 1 << 33, 1).unwrap();
    shape.validate().unwrap();
    assert_eq!(
        (shape.p, shape.digits(), shape.rows, shape.columns),
        (256, 4, 13_107, 81_922)
    );
    // second layer: κ n ℓ digits of one byte and ℓ n words of A2
    let second = (4 + 4) * LWE_N as u64 * u64::from(shape.rows);
    let first = u64::from(shape.rows) * u64::from(shape.columns);
    assert!(second * DOUBLE_PIR_SECOND_LAYER_BYTES_SHARE <= first);
    // one row fewer per column would break it: the layout is as tall as the rule allows
    let taller = (4 + 4) * LWE_N as u64 * (u64::from(shape.rows) + 1);
    assert!(taller * DOUBLE_PIR_SECOND_LAYER_BYTES_SHARE > first);
}

#[test]
fn p_is_a_power_of_two_only_where_it_packs_denser() {
    for scheme in [Scheme::SimplePir, Scheme::DoublePir] {
        // 991 .. 276: 10 stored bits per 9 data bits, three per word; 256 packs four
        assert_eq!(scheme_p(1, scheme).unwrap(), 256);
        assert_eq!(scheme_p(1 << 20, scheme).unwrap(), 256);
    }
    // 231 stores 7 data bits in 8, four per word, as 128 would: a tie keeps the table's
    // p (64 would pack 5 x 6 bits but needs a sixth digit)
    assert_eq!(scheme_p(1 << 21, Scheme::DoublePir).unwrap(), 231);
    // SimplePIR has no digits: 5 x 6 bits beat 4 x 7
    assert_eq!(scheme_p(1 << 21, Scheme::SimplePir).unwrap(), 64);
}

#[test]
fn layouts_cover_every_record_exactly_once() {
    for (records, bits) in [
        (1u64, 1u32),
        (37, 1),
        (37, 3),
        (10, 9),
        (10, 10),
        (7, 100),
        (3, 64 * 8192),
        (1000, 17),
    ] {
        for scheme in [Scheme::SimplePir, Scheme::DoublePir] {
            let Ok(shape) = Params::new(scheme, records, bits) else {
                assert_eq!(scheme, Scheme::DoublePir);
                continue;
            };
            shape.validate().unwrap();
            let mut covered = vec![0u32; (records * u64::from(bits)) as usize];
            for row in 0..shape.rows() {
                for column in 0..shape.columns() {
                    let (start, len) = shape.entry_span(row, column);
                    assert!(len <= shape.entry_bits());
                    for bit in start..start + u64::from(len) {
                        covered[bit as usize] += 1;
                    }
                }
            }
            assert!(covered.iter().all(|&c| c == 1), "{shape:?}");
            let last = shape.locate(records - 1).unwrap();
            assert!(last.column < shape.columns() && last.row + last.entries <= shape.rows());
            assert!(shape.locate(records).is_err());
        }
    }
}

#[test]
fn validate_rejects_inconsistent_headers() {
    let good = Params::new(Scheme::SimplePir, 1000, 8).unwrap();
    for bad in [
        Params {
            p: p_for(u64::from(good.columns), Scheme::SimplePir).unwrap() + 1,
            ..good
        },
        Params {
            columns: good.columns + 1,
            ..good
        },
        Params { rows: 0, ..good },
        Params { records: 0, ..good },
        Params {
            record_bits: MAX_RECORD_BITS + 1,
            ..good
        },
        Params { p: 1, ..good },
    ] {
        assert!(bad.validate().is_err(), "{bad:?}");
    }
    assert!(Params::new(Scheme::DoublePir, 4, 8 * 1024).is_err());
    assert!(Params::new(Scheme::SimplePir, 0, 8).is_err());
}
