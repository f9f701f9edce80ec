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

multiversioned! {
    /// [`dot_pair`] of four rows against one pair `(a, b)` in one pass: the pair is read
    /// once for the four rows, and four rows that stay in cache serve a batch's queries
    /// one after another (YPIR's second pass for several queries). Panics unless all the
    /// lengths agree.
    pub fn dot_pair4(rows: [&[u32]; 4], a: &[u32], b: &[u32]) -> [(u64, u64); 4] {
        let n = a.len();
        assert!(b.len() == n && rows.iter().all(|r| r.len() == n), "dot_pair4: lengths");
        let [r0, r1, r2, r3] = rows.map(|r| &r[..n]);
        let b = &b[..n];
        let (mut x, mut y) = ([0u64; 4], [0u64; 4]);
        for j in 0..n {
            let (p, q) = (u64::from(a[j]), u64::from(b[j]));
            let v = [r0[j], r1[j], r2[j], r3[j]].map(u64::from);
            for r in 0..4 {
                x[r] = x[r].wrapping_add(v[r] * p);
                y[r] = y[r].wrapping_add(v[r] * q);
            }
        }
        [(x[0], y[0]), (x[1], y[1]), (x[2], y[2]), (x[3], y[3])]
    }
}
