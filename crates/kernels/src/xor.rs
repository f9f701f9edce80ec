//! XOR of rows into accumulators: the inner loop of Chor and RAID-PIR answers.

/// `acc ^= src`, byte for byte. Panics if the lengths differ (callers size both from the same
/// validated block size).
pub fn xor_into(acc: &mut [u8], src: &[u8]) {
    assert_eq!(acc.len(), src.len(), "xor_into: length mismatch");
    let mut acc_words = acc.chunks_exact_mut(8);
    let mut src_words = src.chunks_exact(8);
    for (a, s) in (&mut acc_words).zip(&mut src_words) {
        let x = u64::from_ne_bytes([a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]])
            ^ u64::from_ne_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]);
        a.copy_from_slice(&x.to_ne_bytes());
    }
    for (a, s) in acc_words
        .into_remainder()
        .iter_mut()
        .zip(src_words.remainder())
    {
        *a ^= s;
    }
}

/// XORs rows `rows` (each `acc.len()` bytes, numbered from the start of `region`) into `acc`.
/// Panics if a row lies outside the region (callers derive rows from validated parameters).
pub fn xor_rows(region: &[u8], rows: impl IntoIterator<Item = usize>, acc: &mut [u8]) {
    let b = acc.len();
    for row in rows {
        xor_into(acc, &region[row * b..(row + 1) * b]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn xor_into_matches_bytewise(a in proptest::collection::vec(any::<u8>(), 0..200), seed in any::<u8>()) {
            let b: Vec<u8> = a.iter().enumerate().map(|(i, x)| x.wrapping_mul(31).wrapping_add(i as u8 ^ seed)).collect();
            let mut acc = a.clone();
            xor_into(&mut acc, &b);
            let expect: Vec<u8> = a.iter().zip(&b).map(|(x, y)| x ^ y).collect();
            prop_assert_eq!(acc, expect);
        }
    }

    #[test]
    fn xor_rows_selects_rows() {
        let region: Vec<u8> = (0..4 * 8).map(|i| i as u8).collect();
        let mut acc = vec![0u8; 8];
        xor_rows(&region, [1, 3], &mut acc);
        let expect: Vec<u8> = (0..8).map(|i| (8 + i) as u8 ^ (24 + i) as u8).collect();
        assert_eq!(acc, expect);
    }

}
