//! InspiRING (Mahdavi, Patel, Seo and Yeo, ePrint 2025/1352): packing up to `d` LWE
//! ciphertexts of dimension `d` into one RLWE ciphertext over `Z_q[X]/(X^d + 1)` with only
//! two key-switching keys, `K_g` (from `τ_g(s)`, `g = 5`) and `K_h` (from `τ_h(s)`,
//! `h = 2d - 1`), and with every step that touches a mask done before the query arrives.
//!
//! # The construction as derived here
//!
//! An LWE ciphertext is given as `(M_k, b_k)`: its mask as the polynomial `M_k` whose product
//! with the secret has constant coefficient `<a_k, s>`, so its phase is
//! `b_k + coeff_0(M_k s)`. Packing must produce `(A, B)` with
//! `B + A s ≈ Σ_k X^k (b_k + coeff_0(M_k s))`. The map `L: s ↦ Σ_k X^k coeff_0(M_k s)` is
//! `Z_q`-linear, and every linear map of the ring is `Σ_σ c_σ σ(s)` over the `d`
//! automorphisms `σ`: in the NTT (slot) basis `L` is a matrix `L̂`, an automorphism is a
//! permutation `π_σ` of the slots, the `d` automorphisms carry a slot to each slot exactly
//! once, so `ĉ_σ[x] = L̂[x][π_σ(x)]`. With `coeff_0(p) = (1/d) Σ_y p̂[y]`, column `y` of `L̂`
//! is `1/d` times the NTT of the sequence `k ↦ M̂_k[y]` ([`Prepared::new`]).
//!
//! The automorphisms are `τ_g^i τ_h^j` (`i < d/2`, `j < 2`), so
//! `L(s) = Σ_i c_{i,0} τ_g^i(s) + τ_h(Σ_i τ_h(c_{i,1}) τ_g^i(s))`, each sum evaluated by Horner's rule in `τ_g`:
//! `R_{n-1} = u_{n-1} s`, `R_i = u_i s + τ_g(R_{i+1})`, `u_i = τ_g^{-i}(c_i)` (for chain 1
//! the coefficients `τ_h(c_{i,1})`, and a last `τ_h` with `K_h`). A step is an automorphism
//! (a permutation of evaluations) and one key switch with `K_g`. The masks of every step
//! depend only on the `M_k` and the keys' public masks, so the final `A` is fixed offline;
//! the body is linear in the client's key bodies, so it is fixed once per key
//! ([`Prepared::key_offset`], about `(d - 1) (2 + 2ℓ)` NTTs), and a query adds only its
//! LWE bodies: `B = offset + Σ_k b_k X^k` ([`Prepared::pack`]).
//!
//! Noise: the `d - 1` key switches each add `Σ_t digit_t e_t` (variance `ℓ d (B²/12) σ²`);
//! automorphisms keep norms, so the total variance is `(d - 1)` times one switch's.

use pir_core::Error;
use pir_kernels::ntt::Permutation;
use rand::CryptoRng;

use crate::gaussian::ErrorSampler;
use crate::prg::Seed;
use crate::ring::Ring;
use crate::ypir::rns::{self, Rns};

/// The generator of the automorphisms' cyclic part (order `d / 2`).
pub const G: usize = 5;

/// A gadget: balanced base `2^bits`, `digits` of them (`bits · digits >= log2 q`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gadget {
    /// `log2` of the base.
    pub bits: u32,
    /// Digits.
    pub digits: usize,
}

/// The packing machinery of one ring: its automorphisms' permutations and the keys' public
/// masks (from a seed, NTT form).
#[derive(Debug, Clone)]
pub struct InspiRing {
    pub(crate) ring: Ring,
    gadget: Gadget,
    g: [Permutation; 2],
    g_inverse: [Vec<u32>; 2],
    h: [Permutation; 2],
    /// Public masks of `K_g`'s and `K_h`'s parts (NTT form).
    mask_g: Vec<Rns>,
    mask_h: Vec<Rns>,
}

/// The client's key bodies (NTT form): `b_t = -a_t s + e_t + 2^(bits t) τ(s)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackingKeys {
    /// `K_g`'s bodies, one per digit.
    pub g: Vec<Rns>,
    /// `K_h`'s bodies, one per digit.
    pub h: Vec<Rns>,
}

/// The offline work for one set of masks: every key switch's gadget digits (NTT form; the
/// body's part of the packing is linear in the key bodies with these as coefficients) and
/// the packed ciphertext's final mask. `3 (d - 1)` ring elements: 384 MiB at `d = 4096`,
/// traded for a key upload of `3 (d - 1)` products instead of `d - 1` switches' NTTs.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The digits of chain 0's switches, chain 1's, then the `τ_h` switch's.
    digits: Vec<Vec<Rns>>,
    /// The packed ciphertext's mask (NTT form).
    a: Rns,
}

/// `τ_k` of a polynomial in coefficient form (negacyclic: `X^j ↦ ± X^(jk mod d)`).
pub fn automorphism_coefficients(p: &[i64], k: usize) -> Vec<i64> {
    let d = p.len();
    let mut out = vec![0i64; d];
    for (j, &c) in p.iter().enumerate() {
        let e = (j * k) % (2 * d);
        if e < d {
            out[e] += c;
        } else {
            out[e - d] -= c;
        }
    }
    out
}

fn permutation(ring: &Ring, k: usize) -> Result<[Permutation; 2], Error> {
    let [p0, p1] = ring.automorphism_permutation(k)?;
    let wrap = |p: Vec<u32>| {
        Permutation::new(p).ok_or_else(|| Error::InvalidParameter("not a permutation".into()))
    };
    Ok([wrap(p0)?, wrap(p1)?])
}

fn forward_of(ring: &Ring, coefficients: &[i64]) -> Rns {
    let mut r = rns::from_signed(coefficients);
    rns::forward(ring, &mut r);
    r
}

impl InspiRing {
    /// The permutations of `τ_g` and `τ_h` and the keys' masks from `seed`'s stream `kind`
    /// (part `t` of `K_g` at index `t`, of `K_h` at `64 + t`).
    pub fn new(ring: Ring, gadget: Gadget, seed: &Seed, kind: u64) -> Result<InspiRing, Error> {
        let d = ring.dimension();
        if d < 4 || gadget.digits == 0 || gadget.digits > 8 {
            return Err(Error::InvalidParameter("InspiRING needs d >= 4".into()));
        }
        let g = permutation(&ring, G)?;
        let h = permutation(&ring, 2 * d - 1)?;
        let g_inverse = [0, 1].map(|i| {
            let mut inv = vec![0u32; d];
            for (x, &y) in g[i].iter().enumerate() {
                inv[y as usize] = x as u32;
            }
            inv
        });
        let masks = |base: u64| -> Result<Vec<Rns>, Error> {
            (0..gadget.digits)
                .map(|t| {
                    let mut m = rns::public_element(seed, kind, base + t as u64, d)?;
                    rns::forward(&ring, &mut m);
                    Ok(m)
                })
                .collect()
        };
        Ok(InspiRing {
            mask_g: masks(0)?,
            mask_h: masks(64)?,
            ring,
            gadget,
            g,
            g_inverse,
            h,
        })
    }

    /// The ring dimension.
    pub fn dimension(&self) -> usize {
        self.ring.dimension()
    }

    /// Key parts the client sends (bodies of `K_g` and `K_h`).
    pub fn key_parts(&self) -> usize {
        2 * self.gadget.digits
    }

    /// The client's key bodies for the secret with coefficients `s` (ternary or small).
    pub fn keys(
        &self,
        s: &[i64],
        sampler: &ErrorSampler,
        rng: &mut impl CryptoRng,
    ) -> Result<PackingKeys, Error> {
        self.keys_with(s, &mut || i64::from(sampler.sample(rng)))
    }

    /// [`InspiRing::keys`] with the errors drawn by `error` (zero in the exact tests).
    pub(crate) fn keys_with(
        &self,
        s: &[i64],
        error: &mut dyn FnMut() -> i64,
    ) -> Result<PackingKeys, Error> {
        let d = self.dimension();
        if s.len() != d {
            return Err(Error::InvalidParameter(
                "secret of the wrong dimension".into(),
            ));
        }
        let s_hat = forward_of(&self.ring, s);
        let mut one = |k: usize, masks: &[Rns]| -> Vec<Rns> {
            let moved = forward_of(&self.ring, &automorphism_coefficients(s, k));
            masks
                .iter()
                .enumerate()
                .map(|(t, mask)| {
                    let errors: Vec<i64> = (0..d).map(|_| error()).collect();
                    let mut body = forward_of(&self.ring, &errors);
                    body = rns::sub(&body, &rns::mul(mask, &s_hat));
                    let scale = ((1u128 << (self.gadget.bits as usize * t))
                        % u128::from(rns::modulus())) as u64;
                    rns::add_assign(&mut body, &rns::mul(&moved, &rns::constant(d, scale)));
                    body
                })
                .collect()
        };
        let g = one(G, &self.mask_g);
        let h = one(2 * d - 1, &self.mask_h);
        Ok(PackingKeys { g, h })
    }

    /// Balanced gadget digits of `a` (NTT form), each brought back to NTT form.
    fn digits(&self, a: &Rns) -> Vec<Rns> {
        let d = self.dimension();
        let mut c = a.clone();
        rns::inverse(&self.ring, &mut c);
        let values = rns::crt(&c);
        let count = self.gadget.digits;
        let mut per_digit = vec![vec![0i64; d]; count];
        let mut scratch = vec![0i64; count];
        for (j, &x) in values.iter().enumerate() {
            rns::balanced_digits(rns::centered(x), self.gadget.bits, count, &mut scratch);
            for (t, &v) in scratch.iter().enumerate() {
                per_digit[t][j] = v;
            }
        }
        per_digit
            .iter()
            .map(|digit| forward_of(&self.ring, digit))
            .collect()
    }

    /// The mask of one key switch of a ciphertext with mask `a` (under `τ(s)`) to `s`, and
    /// the gadget digits of `a` (NTT form) that the body's switch multiplies the key bodies by.
    fn switch_mask(&self, a: &Rns, masks: &[Rns]) -> (Rns, Vec<Rns>) {
        let digits = self.digits(a);
        let mut out = rns::zero(self.dimension());
        let pairs: Vec<(&Rns, &Rns)> = digits.iter().zip(masks).collect();
        rns::mul_acc_many(&mut out, &pairs);
        (out, digits)
    }

    /// Runs both Horner chains and the last `τ_h` on the masks alone: the final mask, and
    /// every switch's digits in order (chain 0's steps, chain 1's, then the `τ_h` switch).
    fn offline(&self, chains: &[Vec<Rns>; 2]) -> (Rns, Vec<Vec<Rns>>) {
        let d = self.dimension();
        let mut total = rns::zero(d);
        let mut all = Vec::with_capacity(d);
        for (j, chain) in chains.iter().enumerate() {
            let n = chain.len();
            let mut a = chain[n - 1].clone();
            for u in chain[..n - 1].iter().rev() {
                let (next, digits) = self.switch_mask(&rns::permute(&a, &self.g), &self.mask_g);
                all.push(digits);
                a = next;
                rns::add_assign(&mut a, u);
            }
            if j == 1 {
                let (next, digits) = self.switch_mask(&rns::permute(&a, &self.h), &self.mask_h);
                all.push(digits);
                a = next;
            }
            rns::add_assign(&mut total, &a);
        }
        (total, all)
    }

    /// The body the chains leave with `keys`: each step's body permuted like its mask, plus
    /// its digits times the key bodies (`d - 1` permutations and `3 (d - 1)` products). Per
    /// residue, in 64-bit accumulators reduced only when another step could overflow them
    /// (a key upload's cost was its `%`, one per coefficient and step).
    fn offset(&self, digits: &[Vec<Rns>], keys: &PackingKeys) -> Rns {
        let d = self.dimension();
        let steps = d / 2 - 1;
        let mut total = rns::zero(d);
        for (i, out) in total.iter_mut().enumerate() {
            let q = u64::from(rns::q(i));
            let mut b = vec![0u64; d];
            let mut moved = vec![0u64; d];
            for j in 0..2 {
                b.fill(0);
                // Terms below 2^56 each in `b` (a reduced value counts as one): 255 fit.
                let mut terms = 0usize;
                let chain = digits[j * steps..(j + 1) * steps]
                    .iter()
                    .map(|step| (step, &self.g[i], &keys.g));
                let last = (j == 1).then(|| (&digits[2 * steps], &self.h[i], &keys.h));
                for (step, permutation, key) in chain.chain(last) {
                    for (o, &from) in moved.iter_mut().zip(permutation.iter()) {
                        *o = b[from as usize];
                    }
                    std::mem::swap(&mut b, &mut moved);
                    if terms + step.len() > 255 {
                        b.iter_mut().for_each(|x| *x %= q);
                        terms = 1;
                    }
                    for (digit, key) in step.iter().zip(key) {
                        for ((x, &a), &k) in b.iter_mut().zip(&digit[i]).zip(&key[i]) {
                            *x += u64::from(a) * u64::from(k);
                        }
                    }
                    terms += step.len();
                }
                for (o, &x) in out.iter_mut().zip(&b) {
                    *o = ((u64::from(*o) + x % q) % q) as u32;
                }
            }
        }
        total
    }
}

impl Prepared {
    /// The offline work for the masks `M_k` (NTT form, at most `d` of them): `L̂` column by
    /// column, the chains' coefficients read off its generalized diagonals, and the final
    /// mask.
    pub fn new(packer: &InspiRing, masks: &[Rns]) -> Result<Prepared, Error> {
        let ring = &packer.ring;
        let d = ring.dimension();
        if masks.is_empty() || masks.len() > d || masks.iter().any(|m| m[0].len() != d) {
            return Err(Error::InvalidParameter(
                "InspiRING packs 1 to d masks".into(),
            ));
        }
        // Column y of L̂: (1/d) NTT(k ↦ M̂_k[y]).
        let mut columns: Vec<Rns> = Vec::with_capacity(d);
        let inverse_d = [0, 1].map(|i| {
            let q = u64::from(rns::q(i));
            pir_kernels::ntt::power(d as u64, q - 2, q)
        });
        for y in 0..d {
            let mut column = rns::zero(d);
            for i in 0..2 {
                let q = u64::from(rns::q(i));
                for (k, m) in masks.iter().enumerate() {
                    column[i][k] = (u64::from(m[i][y]) * inverse_d[i] % q) as u32;
                }
                ring.table(i).forward(ring.backend(), &mut column[i]);
            }
            columns.push(column);
        }
        // û_i[x] = L̂[ρ_i(x)][x] (chain 0), L̂[π_h(ρ_i(x))][x] (chain 1), ρ_i = π_g^-i.
        let n = d / 2;
        let mut chains = [Vec::with_capacity(n), Vec::with_capacity(n)];
        let mut rho: [Vec<u32>; 2] = [0, 1].map(|_| (0..d as u32).collect());
        for _ in 0..n {
            for (j, chain) in chains.iter_mut().enumerate() {
                let mut u = rns::zero(d);
                for i in 0..2 {
                    for (x, out) in u[i].iter_mut().enumerate() {
                        let mut row = rho[i][x] as usize;
                        if j == 1 {
                            row = packer.h[i][row] as usize;
                        }
                        *out = columns[x][i][row];
                    }
                }
                chain.push(u);
            }
            for (i, r) in rho.iter_mut().enumerate() {
                for v in r.iter_mut() {
                    *v = packer.g_inverse[i][*v as usize];
                }
            }
        }
        drop(columns);
        let (a, digits) = packer.offline(&chains);
        Ok(Prepared { digits, a })
    }

    /// The packed ciphertext's mask (NTT form).
    pub fn mask(&self) -> &Rns {
        &self.a
    }

    /// Bytes it keeps: the digits and the mask.
    pub fn memory_bytes(&self) -> usize {
        (self.digits.iter().map(Vec::len).sum::<usize>() + 1) * 8 * self.a[0].len()
    }

    /// The part of the body fixed by the client's keys (NTT form): computed once per key.
    pub fn key_offset(&self, packer: &InspiRing, keys: &PackingKeys) -> Result<Rns, Error> {
        let parts = packer.gadget.digits;
        if keys.g.len() != parts || keys.h.len() != parts {
            return Err(Error::InvalidParameter(
                "packing keys of the wrong shape".into(),
            ));
        }
        Ok(packer.offset(&self.digits, keys))
    }

    /// The packed ciphertext `(A, B)` (NTT form) for the LWE bodies `bodies` (mod `q`, at
    /// most `d`; `bodies[k]` goes to coefficient `k`) and the key's `offset`.
    pub fn pack(&self, packer: &InspiRing, offset: &Rns, bodies: &[u64]) -> (Rns, Rns) {
        let d = packer.dimension();
        let mut b = rns::zero(d);
        for (i, residues) in b.iter_mut().enumerate() {
            let q = u64::from(rns::q(i));
            for (o, &x) in residues.iter_mut().zip(bodies) {
                *o = (x % q) as u32;
            }
        }
        rns::forward(&packer.ring, &mut b);
        rns::add_assign(&mut b, offset);
        (self.a.clone(), b)
    }
}
