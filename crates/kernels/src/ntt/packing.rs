//! The packing's online kernels (YPIR, YPIR+SP): key switching with Montgomery
//! multipliers, for one query or a batch at one node, and a node's combine under an
//! automorphism.

use super::{add_mod, montgomery, mul_montgomery, mul_shoup, sub_mod};
use crate::Backend;

/// Most digit products [`mul_add_montgomery_many`] sums before one reduction: four products
/// below `2^62` each would pass `q 2^32`; these stay below `2^60` for `q < 2^29`.
pub const MONTGOMERY_LAZY: usize = 4;

/// `acc[i] = acc[i] + Σ_t x_t[i] w_t[i] mod q` for multipliers in Montgomery form, the
/// products of up to [`MONTGOMERY_LAZY`] pairs summed in 64 bits and reduced once
/// (`x_t[i], w_t[i] < q < 2^29`, `acc[i] < q`): [`mul_add_montgomery_batch`] of one
/// accumulator. Panics on more pairs or on a slice shorter than `acc`.
pub fn mul_add_montgomery_many(
    backend: Backend,
    acc: &mut [u32],
    xs: &[&[u32]],
    ws: &[&[u32]],
    q: u32,
    q_neg_inverse: u32,
) {
    mul_add_montgomery_batch(backend, &mut [acc], xs, &[ws], None, q, q_neg_inverse);
}

/// Where [`mul_add_montgomery_batch`] starts its accumulators instead of adding to them:
/// `acc_j = plus_j + scale_j fixed` (a level-1 packing node, `2 b_e + b_o v`), folded into
/// the same lazy sum as the digit products (all values below `q`).
#[derive(Debug, Clone, Copy)]
pub struct Start<'a> {
    /// The fixed vector, in Montgomery form ([`super::to_montgomery`]).
    pub fixed: &'a [u32],
    /// `(plus_j, scale_j)` for accumulator `j`.
    pub terms: &'a [(u32, u32)],
}

/// [`mul_add_montgomery_many`] for several accumulators that share the digits `xs`, each
/// with its own multipliers: `accs[j][i] += Σ_t xs[t][i] ws[j][t][i] mod q` (or, with a
/// [`Start`], `accs[j][i] = plus_j + scale_j fixed[i] + Σ_t ...`, the old contents unread).
/// The queries of a batch at one packing node: the digits are read once for all of them.
/// Panics unless the accumulators have one length, every `ws[j]` as many slices as `xs` (at
/// most [`MONTGOMERY_LAZY`]), every slice at least that length and a start as many terms as
/// accumulators.
pub fn mul_add_montgomery_batch(
    backend: Backend,
    accs: &mut [&mut [u32]],
    xs: &[&[u32]],
    ws: &[&[&[u32]]],
    start: Option<Start<'_>>,
    q: u32,
    q_neg_inverse: u32,
) {
    let n = accs.first().map_or(0, |a| a.len());
    assert!(
        ws.len() == accs.len()
            && accs.iter().all(|a| a.len() == n)
            && xs.len() <= MONTGOMERY_LAZY
            && xs.iter().all(|x| x.len() >= n)
            && ws
                .iter()
                .all(|w| w.len() == xs.len() && w.iter().all(|w| w.len() >= n))
            && start.is_none_or(|s| s.terms.len() == accs.len() && s.fixed.len() >= n),
        "mul_add_montgomery_batch: shapes"
    );
    #[cfg(target_arch = "x86_64")]
    macro_rules! run {
        ($kernel:ident) => {
            match xs.len() {
                1 => montgomery::$kernel::<1>(accs, xs, ws, start, q, q_neg_inverse),
                2 => montgomery::$kernel::<2>(accs, xs, ws, start, q, q_neg_inverse),
                3 => montgomery::$kernel::<3>(accs, xs, ws, start, q, q_neg_inverse),
                4 => montgomery::$kernel::<4>(accs, xs, ws, start, q, q_neg_inverse),
                _ => 0,
            }
        };
    }
    let done = match backend {
        // SAFETY: the CPU supports AVX-512 F (checked); the shapes were checked above.
        #[cfg(target_arch = "x86_64")]
        Backend::Avx512 if Backend::Avx512.is_available() => unsafe { run!(batch_avx512) },
        // SAFETY: the CPU supports AVX2 (checked); the shapes were checked above.
        #[cfg(target_arch = "x86_64")]
        Backend::Avx2 if Backend::Avx2.is_available() => unsafe { run!(batch_avx2) },
        _ => 0,
    };
    if done < n {
        let xs: Vec<&[u32]> = xs.iter().map(|x| &x[done..]).collect();
        for (j, (acc, ws)) in accs.iter_mut().zip(ws).enumerate() {
            let acc = &mut acc[done..];
            if let Some(start) = start {
                let (plus, scale) = start.terms[j];
                for (a, &v) in acc.iter_mut().zip(&start.fixed[done..]) {
                    *a = add_mod(plus, mul_montgomery(scale, v, q, q_neg_inverse), q);
                }
            }
            let ws: Vec<&[u32]> = ws.iter().map(|w| &w[done..]).collect();
            montgomery_many_compiled(backend, acc, &xs, &ws, q, q_neg_inverse);
        }
    }
}

multiversioned! {
    /// [`mul_add_montgomery_many`] as the compiler vectorises it (the portable backend and
    /// the words past the SIMD kernels' last whole step).
    fn montgomery_many_compiled(
        acc: &mut [u32],
        xs: &[&[u32]],
        ws: &[&[u32]],
        q: u32,
        q_neg_inverse: u32,
    ) {
        let n = acc.len();
        let reduce = |o: &mut u32, t: u64| {
            let m = (t as u32).wrapping_mul(q_neg_inverse);
            let u = ((t + u64::from(m) * u64::from(q)) >> 32) as u32;
            let u = if u >= q { u - q } else { u };
            *o = add_mod(*o, u, q);
        };
        let p = |a: u32, b: u32| u64::from(a) * u64::from(b);
        // The common digit counts as one loop over all the streams (no temporary sums).
        match (xs, ws) {
            ([x0, x1, x2, x3], [w0, w1, w2, w3]) => {
                let (x0, x1, x2, x3) = (&x0[..n], &x1[..n], &x2[..n], &x3[..n]);
                let (w0, w1, w2, w3) = (&w0[..n], &w1[..n], &w2[..n], &w3[..n]);
                for i in 0..n {
                    let t = p(x0[i], w0[i]) + p(x1[i], w1[i]) + p(x2[i], w2[i]) + p(x3[i], w3[i]);
                    reduce(&mut acc[i], t);
                }
            }
            ([x0, x1, x2], [w0, w1, w2]) => {
                let (x0, x1, x2) = (&x0[..n], &x1[..n], &x2[..n]);
                let (w0, w1, w2) = (&w0[..n], &w1[..n], &w2[..n]);
                for i in 0..n {
                    let t = p(x0[i], w0[i]) + p(x1[i], w1[i]) + p(x2[i], w2[i]);
                    reduce(&mut acc[i], t);
                }
            }
            _ => {
                for i in 0..n {
                    let t = xs.iter().zip(ws).map(|(x, w)| p(x[i], w[i])).sum::<u64>();
                    reduce(&mut acc[i], t);
                }
            }
        }
    }
}

/// A permutation of `0 .. n`, checked once when it is made, so that [`pack_combine`] (run
/// for every packing node) need not check its indices again (the check took a third of the
/// kernel's time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permutation(Vec<u32>);

impl Permutation {
    /// `indices` if they are a permutation of `0 .. indices.len()`, else `None`.
    pub fn new(indices: Vec<u32>) -> Option<Permutation> {
        let mut seen = vec![false; indices.len()];
        for &j in &indices {
            let slot = seen.get_mut(j as usize)?;
            if std::mem::replace(slot, true) {
                return None;
            }
        }
        Some(Permutation(indices))
    }
}

impl std::ops::Deref for Permutation {
    type Target = [u32];

    fn deref(&self) -> &[u32] {
        &self.0
    }
}

multiversioned! {
    /// One packing node's bodies before key switching, in place: `even[i] <- e[i] + y[i] +
    /// (e[p[i]] - y[p[i]]) mod q`, the even body `e` plus the odd one times `X^s`
    /// (`y = odd ⊙ shift`, the fixed `shift` with its Shoup companions) plus the automorphism
    /// `p` of their difference (`e[i] < q`, `odd[i]` any `u32`). `odd` is the scratch, left
    /// holding `d = e - y`: then `even[i] = 2 e[i] - d[i] + d[p[i]]`, so a node needs no
    /// buffer of its own. Panics unless `odd`, the shift and the permutation are as long as
    /// `even`.
    pub fn pack_combine(
        even: &mut [u32],
        odd: &mut [u32],
        shift: (&[u32], &[u32]),
        permutation: &Permutation,
        q: u32,
    ) {
        let n = even.len();
        assert!(
            odd.len() == n && shift.0.len() == n && shift.1.len() == n && permutation.len() == n,
            "pack_combine: lengths"
        );
        let (w, w_shoup) = (&shift.0[..n], &shift.1[..n]);
        for (((d, &e), &w), &w_shoup) in odd.iter_mut().zip(even.iter()).zip(w).zip(w_shoup) {
            *d = sub_mod(e, mul_shoup(*d, w, w_shoup, q), q);
        }
        let indices: &[u32] = permutation;
        for i in 0..n {
            // SAFETY: a `Permutation` holds only indices below its length, which is n =
            // odd.len() (asserted above).
            let moved = unsafe { *odd.get_unchecked(indices[i] as usize) };
            even[i] = add_mod(sub_mod(add_mod(even[i], even[i], q), odd[i], q), moved, q);
        }
    }
}
