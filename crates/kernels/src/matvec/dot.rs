//! Dot products of 32-bit rows into 64-bit sums (YPIR's second pass).

multiversioned! {
    /// `(Σ_j row[j] · a[j], Σ_j row[j] · b[j])`, 32-bit words multiplied into 64-bit sums
    /// (wrapping mod `2^64`; the caller keeps them exact): YPIR's second pass, one row
    /// against both residues of a query. Panics unless the three lengths agree.
    pub fn dot_pair(row: &[u32], a: &[u32], b: &[u32]) -> (u64, u64) {
        assert!(row.len() == a.len() && row.len() == b.len(), "dot_pair: lengths");
        let (mut x, mut y) = (0u64, 0u64);
        for ((&v, &p), &q) in row.iter().zip(a).zip(b) {
            x = x.wrapping_add(u64::from(v) * u64::from(p));
            y = y.wrapping_add(u64::from(v) * u64::from(q));
        }
        (x, y)
    }
}
