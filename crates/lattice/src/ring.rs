//! The RLWE ring of YPIR's packing layer: `R_q = Z_q[X]/(X^d + 1)` with `d = 4096` and
//! `q = q_1 q_2`, two NTT-friendly primes kept as a residue number system (Menon and Wu,
//! "YPIR", USENIX Security 2024, section 4.1 and the artifact appendix, Menon and Wu 2024:
//! `q2 = 268369921 × 249561089`). The paper's `d = 2048` has 96 bits classical core-SVP with
//! this `q`; `d = 4096` has 245 (`docs/security.md`), and both primes are `≡ 1 mod 2^14`, so
//! the same primes serve every degree up to 8192.
//!
//! A [`Poly`] holds one residue vector per prime, either as coefficients or as NTT
//! evaluations ([`pir_kernels::ntt`]); products are pointwise in the NTT domain. The
//! automorphisms `τ_k: X ↦ X^k` (odd `k`) are what LWE-to-RLWE packing (Chen, Dai, Kim and
//! Song, ACNS 2021) applies to fold ciphertexts together.
//!
//! What it does not do: key switching and packing themselves (next, on top of this), or
//! constant-time guarantees beyond what the arithmetic gives (the server holds no secret).

use pir_core::Error;
use pir_kernels::ntt::{power, NttTable};
use pir_kernels::Backend;

/// Ring dimension `d` (YPIR: 4096; the paper's 2048 is below 128 bits with this `q`), and the
/// largest [`Ring::new`] builds.
pub const RING_D: usize = 4096;

/// The largest ring [`Ring::new`] makes: YPIR's and InsPIRe's `d = 4096` (both primes are
/// `1 mod 8192`).
pub const MAX_RING_D: usize = 4096;
/// The two primes of `q` (each `≡ 1 mod 2d`, below `2^28`).
pub const RNS_PRIMES: [u32; 2] = [268_369_921, 249_561_089];

/// The ring: dimension, primes and NTT tables.
#[derive(Clone, Debug)]
pub struct Ring {
    d: usize,
    tables: [NttTable; 2],
    backend: Backend,
    /// `q_1^-1 mod q_2`, for CRT recombination.
    q1_inverse: u64,
}

/// A ring element as residues mod each prime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Poly {
    pub(crate) residues: [Vec<u32>; 2],
    pub(crate) evaluations: bool,
}

impl Ring {
    /// The ring of dimension `d` (a power of two, 2 to [`MAX_RING_D`]) over [`RNS_PRIMES`].
    pub fn new(d: usize, backend: Backend) -> Result<Ring, Error> {
        let table = |q: u32| {
            NttTable::new(q, d)
                .ok_or_else(|| Error::InvalidParameter(format!("no NTT for d = {d}, q = {q}")))
        };
        if d > MAX_RING_D {
            return Err(Error::InvalidParameter(format!(
                "ring dimension {d} above {MAX_RING_D}"
            )));
        }
        let (q1, q2) = (u64::from(RNS_PRIMES[0]), u64::from(RNS_PRIMES[1]));
        Ok(Ring {
            d,
            tables: [table(RNS_PRIMES[0])?, table(RNS_PRIMES[1])?],
            backend,
            q1_inverse: power(q1 % q2, q2 - 2, q2),
        })
    }

    /// The dimension.
    pub fn dimension(&self) -> usize {
        self.d
    }

    /// The NTT table of prime `i` (0 or 1).
    pub(crate) fn table(&self, i: usize) -> &NttTable {
        &self.tables[i]
    }

    /// The kernel backend.
    pub(crate) fn backend(&self) -> Backend {
        self.backend
    }

    /// The permutation of NTT evaluations that applies `τ_k` (odd `k`) in the evaluation
    /// domain, per prime: `τ_k(p)` has evaluation `i` equal to `p`'s evaluation
    /// `permutation[i]` (the point `ψ_i^k` is another evaluation point `ψ_j`).
    pub(crate) fn automorphism_permutation(&self, k: usize) -> Result<[Vec<u32>; 2], Error> {
        if k.is_multiple_of(2) {
            return Err(Error::InvalidParameter("automorphisms take odd k".into()));
        }
        let one = |i: usize| -> Result<Vec<u32>, Error> {
            let q = u64::from(RNS_PRIMES[i]);
            let mut points = vec![0u32; self.d];
            if self.d > 1 {
                points[1] = 1;
            }
            self.tables[i].forward(self.backend, &mut points);
            let index: std::collections::HashMap<u32, u32> = points
                .iter()
                .enumerate()
                .map(|(j, &x)| (x, j as u32))
                .collect();
            points
                .iter()
                .map(|&x| {
                    index
                        .get(&(power(u64::from(x), k as u64, q) as u32))
                        .copied()
                        .ok_or_else(|| Error::InvalidParameter("not an evaluation point".into()))
                })
                .collect()
        };
        Ok([one(0)?, one(1)?])
    }

    /// `q = q_1 q_2`.
    pub fn modulus(&self) -> u64 {
        u64::from(RNS_PRIMES[0]) * u64::from(RNS_PRIMES[1])
    }

    /// The element with these coefficients (any integers; reduced mod `q`).
    pub fn from_coefficients(&self, coefficients: &[i64]) -> Result<Poly, Error> {
        if coefficients.len() != self.d {
            return Err(Error::InvalidParameter(
                "a polynomial of the wrong length".into(),
            ));
        }
        let residue = |q: u32| -> Vec<u32> {
            coefficients
                .iter()
                .map(|&c| c.rem_euclid(i64::from(q)) as u32)
                .collect()
        };
        Ok(Poly {
            residues: [residue(RNS_PRIMES[0]), residue(RNS_PRIMES[1])],
            evaluations: false,
        })
    }

    /// The zero element (coefficient form).
    pub fn zero(&self) -> Poly {
        Poly {
            residues: [vec![0; self.d], vec![0; self.d]],
            evaluations: false,
        }
    }

    /// To NTT evaluations (no-op if already there).
    pub fn to_evaluations(&self, p: &mut Poly) {
        if !p.evaluations {
            for (table, residue) in self.tables.iter().zip(p.residues.iter_mut()) {
                table.forward(self.backend, residue);
            }
            p.evaluations = true;
        }
    }

    /// To coefficients (no-op if already there).
    pub fn to_coefficients(&self, p: &mut Poly) {
        if p.evaluations {
            for (table, residue) in self.tables.iter().zip(p.residues.iter_mut()) {
                table.inverse(self.backend, residue);
            }
            p.evaluations = false;
        }
    }

    /// `a b` (both in evaluation form; the result is too).
    pub fn mul(&self, a: &Poly, b: &Poly) -> Result<Poly, Error> {
        if !a.evaluations || !b.evaluations {
            return Err(Error::InvalidParameter("multiply in the NTT domain".into()));
        }
        let mut out = Poly {
            residues: [vec![0; self.d], vec![0; self.d]],
            evaluations: true,
        };
        for i in 0..2 {
            self.tables[i].pointwise(
                self.backend,
                &a.residues[i],
                &b.residues[i],
                &mut out.residues[i],
            );
        }
        Ok(out)
    }

    /// `a + b` (same form).
    pub fn add(&self, a: &Poly, b: &Poly) -> Result<Poly, Error> {
        self.combine(a, b, |x, y, q| (x + y) % q)
    }

    /// `a - b` (same form).
    pub fn sub(&self, a: &Poly, b: &Poly) -> Result<Poly, Error> {
        self.combine(a, b, |x, y, q| (x + q - y) % q)
    }

    fn combine(&self, a: &Poly, b: &Poly, f: impl Fn(u32, u32, u32) -> u32) -> Result<Poly, Error> {
        if a.evaluations != b.evaluations {
            return Err(Error::InvalidParameter(
                "adding elements in different forms".into(),
            ));
        }
        let mut out = a.clone();
        for (i, &q) in RNS_PRIMES.iter().enumerate() {
            for (x, &y) in out.residues[i].iter_mut().zip(&b.residues[i]) {
                *x = f(*x, y, q);
            }
        }
        Ok(out)
    }

    /// `τ_k(p)(X) = p(X^k)` for odd `k` (coefficient form): coefficient `i` moves to
    /// `i k mod 2d`, negated when that passes `d` (`X^d = -1`).
    pub fn automorphism(&self, p: &Poly, k: usize) -> Result<Poly, Error> {
        if p.evaluations || k.is_multiple_of(2) {
            return Err(Error::InvalidParameter(
                "automorphisms take odd k, in coefficient form".into(),
            ));
        }
        let two_d = 2 * self.d;
        let mut out = self.zero();
        for (i, &q) in RNS_PRIMES.iter().enumerate() {
            for (j, &c) in p.residues[i].iter().enumerate() {
                let target = j * k % two_d;
                if target < self.d {
                    out.residues[i][target] = c;
                } else {
                    out.residues[i][target - self.d] = if c == 0 { 0 } else { q - c };
                }
            }
        }
        Ok(out)
    }

    /// The coefficients in `[0, q)` (coefficient form), by CRT.
    pub fn coefficients(&self, p: &Poly) -> Result<Vec<u64>, Error> {
        if p.evaluations {
            return Err(Error::InvalidParameter(
                "convert to coefficients first".into(),
            ));
        }
        let (q1, q2) = (u64::from(RNS_PRIMES[0]), u64::from(RNS_PRIMES[1]));
        Ok(p.residues[0]
            .iter()
            .zip(&p.residues[1])
            .map(|(&a, &b)| {
                // x = a + q1 ((b - a) q1^-1 mod q2)
                let t = (u64::from(b) + q2 - u64::from(a) % q2) % q2 * self.q1_inverse % q2;
                u64::from(a) + q1 * t
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    /// `d` coefficients drawn uniformly from `[-bound, bound]`.
    fn random(seed: u64, d: usize, bound: i64) -> Vec<i64> {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        (0..d).map(|_| rng.random_range(-bound..=bound)).collect()
    }

    /// Schoolbook negacyclic product over `Z_q` with `q = q1 q2`, in u128.
    fn schoolbook(a: &[i64], b: &[i64], q: u64) -> Vec<u64> {
        let d = a.len();
        let q = i128::from(q);
        let mut out = vec![0i128; d];
        for (i, &x) in a.iter().enumerate() {
            for (j, &y) in b.iter().enumerate() {
                let p = i128::from(x) * i128::from(y);
                if i + j < d {
                    out[i + j] = (out[i + j] + p).rem_euclid(q);
                } else {
                    out[i + j - d] = (out[i + j - d] - p).rem_euclid(q);
                }
            }
        }
        out.into_iter().map(|x| x as u64).collect()
    }

    /// `x y` in coefficient form, through the evaluation form.
    fn times(ring: &Ring, x: &Poly, y: &Poly) -> Poly {
        let (mut x, mut y) = (x.clone(), y.clone());
        ring.to_evaluations(&mut x);
        ring.to_evaluations(&mut y);
        let mut z = ring.mul(&x, &y).unwrap();
        ring.to_coefficients(&mut z);
        z
    }

    #[test]
    fn products_over_the_full_modulus_match_the_schoolbook_at_ring_d() {
        let ring = Ring::new(RING_D, Backend::best()).unwrap();
        // Coefficients as large as q/2 either way: the CRT path is exercised in full.
        let half = (ring.modulus() / 2) as i64;
        let (a, b) = (random(1, RING_D, half), random(2, RING_D, half));
        let (x, y) = (
            ring.from_coefficients(&a).unwrap(),
            ring.from_coefficients(&b).unwrap(),
        );
        let product = ring.coefficients(&times(&ring, &x, &y)).unwrap();
        assert_eq!(product, schoolbook(&a, &b, ring.modulus()));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]
        #[test]
        fn automorphisms_are_ring_homomorphisms(log_d in 2u32..8, seed in any::<u64>(), k_half in 0usize..64) {
            let d = 1usize << log_d;
            let ring = Ring::new(d, Backend::best()).unwrap();
            let k = (2 * k_half + 1) % (2 * d);
            let (a, b) = (random(seed, d, 1 << 40), random(seed ^ 5, d, 1 << 40));
            let (pa, pb) = (ring.from_coefficients(&a).unwrap(), ring.from_coefficients(&b).unwrap());
            // tau(a b) = tau(a) tau(b), tau(a + b) = tau(a) + tau(b).
            let times = |x: &Poly, y: &Poly| times(&ring, x, y);
            let left = ring.automorphism(&times(&pa, &pb), k).unwrap();
            let right = times(&ring.automorphism(&pa, k).unwrap(), &ring.automorphism(&pb, k).unwrap());
            prop_assert_eq!(left, right);
            let sum = ring.automorphism(&ring.add(&pa, &pb).unwrap(), k).unwrap();
            let sums = ring.add(&ring.automorphism(&pa, k).unwrap(), &ring.automorphism(&pb, k).unwrap()).unwrap();
            prop_assert_eq!(sum, sums);
            // tau_k then tau_j is tau_{kj mod 2d}; tau_1 is the identity.
            let j = 3 % (2 * d);
            let twice = ring.automorphism(&ring.automorphism(&pa, k).unwrap(), j).unwrap();
            prop_assert_eq!(twice, ring.automorphism(&pa, k * j % (2 * d)).unwrap());
            prop_assert_eq!(ring.automorphism(&pa, 1).unwrap(), pa.clone());
            // CRT gives back the coefficients mod q.
            let q = ring.modulus() as i128;
            let back = ring.coefficients(&pa).unwrap();
            let want: Vec<u64> = a.iter().map(|&c| i128::from(c).rem_euclid(q) as u64).collect();
            prop_assert_eq!(back, want);
        }
    }

    #[test]
    fn misuse_is_an_error_not_a_panic() {
        let ring = Ring::new(16, Backend::Portable).unwrap();
        assert!(ring.from_coefficients(&[1; 15]).is_err());
        let p = ring.from_coefficients(&[1; 16]).unwrap();
        assert!(ring.mul(&p, &p).is_err(), "coefficient form");
        assert!(ring.automorphism(&p, 2).is_err(), "even k");
        let mut e = p.clone();
        ring.to_evaluations(&mut e);
        assert!(ring.add(&p, &e).is_err(), "mixed forms");
        assert!(ring.coefficients(&e).is_err());
        assert!(Ring::new(2 * RING_D, Backend::Portable).is_err());
        assert!(Ring::new(12, Backend::Portable).is_err());
    }
}
