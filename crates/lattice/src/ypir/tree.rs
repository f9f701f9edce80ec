//! YPIR's packing with the server's offline work (Menon and Wu 2024, section 3: "silent
//! preprocessing"): CDKS `PackLWEs` ([`crate::pack`]) split into the part that depends only on
//! public data and the database, done once, and the part that depends on the query, done per
//! answer.
//!
//! In a packing tree every ciphertext is `(a, b)`. The masks `a` of the leaves that come from
//! the hint rows are fixed by the database and the public matrix `A2`; the key-switching keys'
//! masks come from a public seed too (the client sends only their bodies). So for every node
//! whose leaves are all such rows (a *static* node) the mask, and the gadget digits of
//! `τ(a_even - X^s a_odd)` that key switching multiplies into the key bodies, are computed
//! offline. Online, a static node costs only its bodies, `b = b_e + X^s b_o + τ(b_e - X^s b_o)`
//! plus `Σ_i digit_i ⊙ key_b_i`, all in the NTT domain (`τ` is a permutation of evaluations there).
//! Nodes above a leaf whose mask depends on the query (a *dynamic* node: the rows of the first
//! answer) compute their masks online too; zero subtrees cost nothing.
//!
//! Leaves are placed in bit-reversed order: list element `k` of a tree lands on coefficient
//! `bitrev_12(k)`, so every aligned range of the list is one subtree of the even/odd recursion,
//! and the static rows (listed first) fill whole subtrees.

use std::collections::HashMap;

use pir_core::Error;

use pir_kernels::ntt;
use rayon::prelude::*;

pub use crate::params::ypir::{key_parts, GADGET, LEVELS};

use super::rns::{self, Rns};
use crate::ring::{Ring, RING_D};

/// Shoup companions of a fixed operand, per prime.
fn companions(w: &Rns) -> Rns {
    [
        ntt::shoup_companions(&w[0], rns::q(0)),
        ntt::shoup_companions(&w[1], rns::q(1)),
    ]
}

/// The automorphism of level `l`: `τ_{2^l + 1}`.
pub fn automorphism_of(level: usize) -> usize {
    (1 << level) + 1
}

/// `bitrev_12(k)` (`LEVELS` bits): the coefficient where list element `k` of a tree lands.
pub fn coefficient_of(k: usize) -> usize {
    (k as u32).reverse_bits() as usize >> (32 - LEVELS)
}

/// Index of the public mask of key part `(level, digit)` in the seed's stream.
pub fn key_index(level: usize, digit: usize) -> u64 {
    (level * 8 + digit) as u64
}

/// Public data of the packing: the ring, the automorphism permutations, the shifts `X^s` and
/// the key masks of every level (NTT form).
#[derive(Debug)]
pub struct Packer {
    pub(crate) ring: Ring,
    permutations: Vec<[ntt::Permutation; 2]>,
    shifts: Vec<Rns>,
    shift_companions: Vec<Rns>,
    pub(crate) key_masks: Vec<Vec<Rns>>,
    /// Level 1's `v = X^s - τ(X^s)` (evaluations) in Montgomery form: a node over two leaves
    /// with constant bodies `b_e, b_o` has body `2 b_e + b_o v` before key switching (which
    /// starts from it: [`ntt::Start`]).
    leaf_pair: Rns,
    /// `2^-LEVELS mod q`.
    inverse: u64,
    /// [`ntt::montgomery_constant`] of each prime.
    montgomery_constants: [u32; 2],
}

/// What a static node keeps: the digits of `τ(a_e - X^s a_o)` (internal nodes) and its mask
/// when a dynamic node above it needs it.
#[derive(Debug, Default)]
struct StaticNode {
    /// The digits in Montgomery form (4 bytes per coefficient: the online products stream
    /// these: about 250 MB for a YPIR entry's `d1` leaves and 495 MiB for a full tree of
    /// YPIR+SP, so their size is the packing's memory traffic).
    digits: Vec<Rns>,
    mask: Option<Rns>,
}

/// The offline work of one database: per tree, its static nodes by heap id (root 1).
#[derive(Debug)]
pub struct Plan {
    leaves: usize,
    static_leaves: usize,
    trees: Vec<HashMap<usize, StaticNode>>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Zero,
    Static,
    Dynamic,
}

/// A node's result: its mask (when computed) and body.
struct Node {
    mask: Option<Rns>,
    body: Rns,
}

impl Plan {
    /// Number of trees (response ciphertexts).
    pub fn trees(&self) -> usize {
        self.trees.len()
    }

    /// Bytes the offline work takes in memory.
    pub fn memory_bytes(&self) -> usize {
        let d = RING_D * 8;
        self.trees
            .iter()
            .flat_map(|t| t.values())
            .map(|n| n.digits.len() * d + n.mask.as_ref().map_or(0, |_| d))
            .sum()
    }

    fn kind(&self, tree: usize, lo: usize, level: usize) -> Kind {
        let start = tree * RING_D + lo;
        let end = (start + (1 << level)).min(self.leaves);
        if start >= end {
            Kind::Zero
        } else if end > self.static_leaves {
            Kind::Dynamic
        } else {
            Kind::Static
        }
    }
}

impl Packer {
    /// The packer for the key masks of `seed` (see [`key_index`]).
    pub fn new(ring: Ring, seed: &crate::prg::Seed) -> Result<Packer, Error> {
        let d = ring.dimension();
        let mut permutations = Vec::with_capacity(LEVELS);
        let mut shifts = Vec::with_capacity(LEVELS);
        let mut shift_companions = Vec::with_capacity(LEVELS);
        let mut key_masks = Vec::with_capacity(LEVELS);
        for level in 1..=LEVELS {
            let [p0, p1] = ring.automorphism_permutation(automorphism_of(level))?;
            let check = |p| {
                ntt::Permutation::new(p).ok_or_else(|| {
                    Error::InvalidParameter("an automorphism that is not a permutation".into())
                })
            };
            permutations.push([check(p0)?, check(p1)?]);
            let mut shift = vec![0i64; d];
            shift[d >> level] = 1;
            let mut shift = rns::from_signed(&shift);
            rns::forward(&ring, &mut shift);
            shift_companions.push(companions(&shift));
            shifts.push(shift);
            let mut masks = Vec::new();
            for digit in 0..GADGET[level - 1].1 {
                let mut m = rns::public_element(seed, super::KIND_KEY, key_index(level, digit), d)?;
                rns::forward(&ring, &mut m);
                masks.push(m);
            }
            key_masks.push(masks);
        }
        let q = rns::modulus();
        let inverse = crate::pack::inverse_mod(1 << LEVELS, q)
            .ok_or(Error::InvalidParameter("2^LEVELS not invertible".into()))?;
        let v = rns::sub(&shifts[0], &rns::permute(&shifts[0], &permutations[0]));
        let mut leaf_pair = rns::zero(v[0].len());
        for (i, out) in leaf_pair.iter_mut().enumerate() {
            ntt::to_montgomery(ring.backend(), out, &v[i], rns::q(i));
        }
        Ok(Packer {
            ring,
            permutations,
            shifts,
            shift_companions,
            key_masks,
            leaf_pair,
            inverse,
            montgomery_constants: [
                ntt::montgomery_constant(rns::q(0)),
                ntt::montgomery_constant(rns::q(1)),
            ],
        })
    }

    /// `w` in Montgomery form (per prime).
    fn montgomery(&self, w: &Rns) -> Rns {
        let mut out = rns::zero(w[0].len());
        for i in 0..2 {
            ntt::to_montgomery(self.ring.backend(), &mut out[i], &w[i], rns::q(i));
        }
        out
    }

    fn scaled(&self, value: u64) -> u64 {
        (u128::from(value) * u128::from(self.inverse) % u128::from(rns::modulus())) as u64
    }

    /// The offline work for `leaves` leaves of which the first `static_leaves` have masks
    /// `leaf_mask(k)` (NTT form) known now.
    pub fn plan(
        &self,
        leaves: usize,
        static_leaves: usize,
        leaf_mask: &(dyn Fn(usize) -> Result<Rns, Error> + Sync),
    ) -> Result<Plan, Error> {
        let mut plan = Plan {
            leaves,
            static_leaves,
            trees: Vec::new(),
        };
        // Trees are independent: built in parallel.
        let trees = leaves.div_ceil(RING_D);
        plan.trees = (0..trees)
            .into_par_iter()
            .map(|tree| {
                let mut nodes = HashMap::new();
                self.build(&plan, &mut nodes, tree, 1, LEVELS, 0, true, leaf_mask)?;
                Ok(nodes)
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(plan)
    }

    #[allow(clippy::too_many_arguments)]
    fn build(
        &self,
        plan: &Plan,
        nodes: &mut HashMap<usize, StaticNode>,
        tree: usize,
        id: usize,
        level: usize,
        lo: usize,
        keep_mask: bool,
        leaf_mask: &(dyn Fn(usize) -> Result<Rns, Error> + Sync),
    ) -> Result<Option<Rns>, Error> {
        let kind = plan.kind(tree, lo, level);
        let half = (1 << level) >> 1;
        // The two children's masks (even, odd), their static nodes put in `nodes`.
        let children = |nodes: &mut HashMap<usize, StaticNode>, keep_mask: bool| {
            let even = self.build(
                plan,
                nodes,
                tree,
                2 * id,
                level - 1,
                lo,
                keep_mask,
                leaf_mask,
            )?;
            let odd = self.build(
                plan,
                nodes,
                tree,
                2 * id + 1,
                level - 1,
                lo + half,
                keep_mask,
                leaf_mask,
            )?;
            Ok::<_, Error>((even, odd))
        };
        match kind {
            Kind::Zero => Ok(None),
            Kind::Dynamic => {
                if level > 0 {
                    children(nodes, true)?;
                }
                Ok(None)
            }
            Kind::Static => {
                let (mask, digits) = if level == 0 {
                    let mut mask = leaf_mask(tree * RING_D + lo)?;
                    let scale = rns::constant(RING_D, self.inverse);
                    mask = rns::mul(&mask, &scale);
                    (mask, Vec::new())
                } else {
                    let (even, odd) = children(nodes, false)?;
                    self.combine_masks(level, even.as_ref(), odd.as_ref())?
                };
                let node = StaticNode {
                    digits: digits.iter().map(|d| self.montgomery(d)).collect(),
                    mask: keep_mask.then(|| mask.clone()),
                };
                if !node.digits.is_empty() || node.mask.is_some() {
                    nodes.insert(id, node);
                }
                Ok(Some(mask))
            }
        }
    }

    /// `(a_e + X^s a_o + KS(τ(a_e - X^s a_o)).a, digits of τ(a_e - X^s a_o))`.
    fn combine_masks(
        &self,
        level: usize,
        even: Option<&Rns>,
        odd: Option<&Rns>,
    ) -> Result<(Rns, Vec<Rns>), Error> {
        let d = RING_D;
        let zero = rns::zero(d);
        let even = even.unwrap_or(&zero);
        let shifted = match odd {
            Some(o) => rns::mul(o, &self.shifts[level - 1]),
            None => rns::zero(d),
        };
        let sum = rns::add(even, &shifted);
        let mut moved = rns::permute(&rns::sub(even, &shifted), &self.permutations[level - 1]);
        rns::inverse(&self.ring, &mut moved);
        let coefficients = rns::crt(&moved);
        let (bits, count) = GADGET[level - 1];
        let mut digit_values = vec![vec![0i64; d]; count];
        let mut scratch = [0i64; 4];
        for (c, &x) in coefficients.iter().enumerate() {
            rns::balanced_digits(rns::centered(x), bits, count, &mut scratch);
            for (i, values) in digit_values.iter_mut().enumerate() {
                values[c] = scratch[i];
            }
        }
        let digits: Vec<Rns> = digit_values
            .iter()
            .map(|v| {
                let mut r = rns::from_signed(v);
                rns::forward(&self.ring, &mut r);
                r
            })
            .collect();
        let mut out = sum;
        let pairs: Vec<(&Rns, &Rns)> = digits.iter().zip(&self.key_masks[level - 1]).collect();
        rns::mul_acc_many(&mut out, &pairs);
        Ok((out, digits))
    }

    /// `b_e + X^s b_o + τ(b_e - X^s b_o)` (evaluations; the key switching follows in
    /// [`Packer::switch_keys`]), `X^s` multiplied by Shoup's method in the kernel. The
    /// children's bodies are consumed: the result is written over the even one, the odd one
    /// is the kernel's scratch (no allocation per node).
    /// Returns the node's body and the odd child's buffer, free for reuse.
    fn combine_bodies(&self, level: usize, even: Option<Rns>, odd: Option<Rns>) -> (Rns, Rns) {
        let backend = self.ring.backend();
        // An absent child is the zero body (only at the end of the last tree).
        let mut even = even.unwrap_or_else(|| rns::zero(RING_D));
        let mut odd = odd.unwrap_or_else(|| rns::zero(RING_D));
        for i in 0..2 {
            ntt::pack_combine(
                backend,
                &mut even[i],
                &mut odd[i],
                (
                    &self.shifts[level - 1][i],
                    &self.shift_companions[level - 1][i],
                ),
                &self.permutations[level - 1][i],
                rns::q(i),
            );
        }
        (even, odd)
    }

    /// `body_j += Σ_t digit_t ⊙ key_b_t` of job `j`, both primes (Montgomery digits, lazily
    /// reduced): every job's body against the same digits, read once for all of them. With
    /// `leaf_terms` (a level-1 node), `body_j = plus_j + scale_j v + Σ_t ...` per prime
    /// instead, the old bodies unread.
    fn switch_keys(
        &self,
        level: usize,
        bodies: &mut [Rns],
        digits: &[Rns],
        jobs: &[PackJob<'_>],
        leaf_terms: Option<&[[(u32, u32); 2]]>,
    ) {
        for i in 0..2 {
            let digits: Vec<&[u32]> = digits.iter().map(|d| d[i].as_slice()).collect();
            let keys: Vec<Vec<&[u32]>> = jobs
                .iter()
                .map(|job| {
                    job.key_bodies[level - 1]
                        .iter()
                        .take(digits.len())
                        .map(|k| k[i].as_slice())
                        .collect()
                })
                .collect();
            let keys: Vec<&[&[u32]]> = keys.iter().map(Vec::as_slice).collect();
            let terms: Option<Vec<(u32, u32)>> =
                leaf_terms.map(|terms| terms.iter().map(|t| t[i]).collect());
            let start = terms.as_deref().map(|terms| ntt::Start {
                fixed: &self.leaf_pair[i],
                terms,
            });
            let mut accs: Vec<&mut [u32]> =
                bodies.iter_mut().map(|b| b[i].as_mut_slice()).collect();
            ntt::mul_add_montgomery_batch(
                self.ring.backend(),
                &mut accs,
                &digits,
                &keys,
                start,
                rns::q(i),
                self.montgomery_constants[i],
            );
        }
    }

    /// Packs one tree online: `body(k)` is leaf `k`'s body (a value mod `q`), `dynamic_mask(k)`
    /// the mask (NTT form) of a leaf past the static ones, `key_bodies[l][i]` the client's key
    /// bodies (NTT form). Returns the packed ciphertext `(a, b)` in NTT form.
    pub fn pack(
        &self,
        plan: &Plan,
        tree: usize,
        body: &(dyn Fn(usize) -> u64 + Sync),
        dynamic_mask: &(dyn Fn(usize) -> Result<Rns, Error> + Sync),
        key_bodies: &[Vec<Rns>],
    ) -> Result<(Rns, Rns), Error> {
        let job = PackJob {
            body,
            dynamic_mask,
            key_bodies,
        };
        self.pack_batch(plan, tree, &[job])?
            .pop()
            .ok_or_else(|| Error::InvalidParameter("an empty packing batch".into()))
    }

    /// [`Packer::pack`] for several queries at once, node by node: a static node's digits
    /// (the packing's memory traffic) are read from memory once and stay in cache for the
    /// other queries' products. Any error fails the whole batch.
    pub fn pack_batch(
        &self,
        plan: &Plan,
        tree: usize,
        jobs: &[PackJob<'_>],
    ) -> Result<Vec<(Rns, Rns)>, Error> {
        if tree >= plan.trees.len() || jobs.iter().any(|j| j.key_bodies.len() != LEVELS) {
            return Err(Error::InvalidParameter("no such packing tree".into()));
        }
        let place = Place {
            tree,
            id: 1,
            level: LEVELS,
            lo: 0,
        };
        self.online(plan, place, true, jobs, &mut Vec::new())?
            .into_iter()
            .map(|root| match root {
                Some(Node {
                    mask: Some(mask),
                    body,
                }) => Ok((mask, body)),
                _ => Err(Error::InvalidParameter("an empty packing tree".into())),
            })
            .collect()
    }

    /// The node at `place` for every job (in order). `spare` holds bodies a combine has
    /// finished with, for level-1 nodes to write over (every word is written there), so the
    /// tree's bodies are allocated about once per level-1 node of a job, not once per node.
    fn online(
        &self,
        plan: &Plan,
        place: Place,
        need_mask: bool,
        jobs: &[PackJob<'_>],
        spare: &mut Vec<Rns>,
    ) -> Result<Vec<Option<Node>>, Error> {
        let Place {
            tree,
            id,
            level,
            lo,
        } = place;
        let kind = plan.kind(tree, lo, level);
        let half = (1 << level) >> 1;
        let nodes = &plan.trees[tree];
        let missing = || Error::InvalidParameter("packing plan is missing a node".into());
        if kind == Kind::Zero {
            return Ok(jobs.iter().map(|_| None).collect());
        }
        let k = tree * RING_D + lo;
        if level == 0 {
            return jobs
                .iter()
                .map(|job| {
                    let b = rns::constant(RING_D, self.scaled((job.body)(k)));
                    let mask = match (need_mask, kind) {
                        (false, _) => None,
                        (true, Kind::Static) => Some(
                            nodes
                                .get(&id)
                                .and_then(|n| n.mask.clone())
                                .ok_or_else(missing)?,
                        ),
                        (true, _) => {
                            let scale = rns::constant(RING_D, self.inverse);
                            Some(rns::mul(&(job.dynamic_mask)(k)?, &scale))
                        }
                    };
                    Ok(Some(Node { mask, body: b }))
                })
                .collect();
        }
        if level == 1 && kind == Kind::Static && !need_mask {
            let node = nodes.get(&id).ok_or_else(missing)?;
            let has_odd = plan.kind(tree, lo + 1, 0) != Kind::Zero;
            // Per job and prime, `2 b_e` and `b_o` (0 without an odd leaf): the body
            // `2 b_e + b_o v` is where the key switching starts.
            let terms: Vec<[(u32, u32); 2]> = jobs
                .iter()
                .map(|job| {
                    let even = self.scaled((job.body)(k));
                    let odd = has_odd.then(|| self.scaled((job.body)(k + 1)));
                    [0, 1].map(|i| {
                        let q = u64::from(rns::q(i));
                        let twice = (2 * (even % q) % q) as u32;
                        (twice, odd.map_or(0, |o| (o % q) as u32))
                    })
                })
                .collect();
            let mut bodies: Vec<Rns> = jobs
                .iter()
                .map(|_| spare.pop().unwrap_or_else(|| rns::zero(RING_D)))
                .collect();
            self.switch_keys(1, &mut bodies, &node.digits, jobs, Some(&terms));
            return Ok(bodies
                .into_iter()
                .map(|body| Some(Node { mask: None, body }))
                .collect());
        }
        let child_needs = kind == Kind::Dynamic;
        let child = |id: usize, lo: usize| Place {
            tree,
            id,
            level: level - 1,
            lo,
        };
        let evens = self.online(plan, child(2 * id, lo), child_needs, jobs, spare)?;
        let odds = self.online(plan, child(2 * id + 1, lo + half), child_needs, jobs, spare)?;
        let static_node = match kind {
            Kind::Static => Some(nodes.get(&id).ok_or_else(missing)?),
            _ => None,
        };
        // Each query's node before key switching (and a dynamic node's own digits).
        let mut nodes_out = Vec::with_capacity(jobs.len());
        let mut own_digits = Vec::new();
        for (even, odd) in evens.into_iter().zip(odds) {
            let mask = match static_node {
                Some(node) if need_mask => Some(node.mask.clone().ok_or_else(missing)?),
                Some(_) => None,
                None => {
                    let (m, d) = self.combine_masks(
                        level,
                        even.as_ref().and_then(|n| n.mask.as_ref()),
                        odd.as_ref().and_then(|n| n.mask.as_ref()),
                    )?;
                    own_digits.push(d.iter().map(|d| self.montgomery(d)).collect::<Vec<Rns>>());
                    Some(m)
                }
            };
            let (body, scratch) =
                self.combine_bodies(level, even.map(|n| n.body), odd.map(|n| n.body));
            spare.push(scratch);
            nodes_out.push(Node { mask, body });
        }
        let mut bodies: Vec<Rns> = nodes_out
            .iter_mut()
            .map(|n| std::mem::take(&mut n.body))
            .collect();
        match static_node {
            // Every query's key switching against the node's digits in one pass over them.
            Some(node) => self.switch_keys(level, &mut bodies, &node.digits, jobs, None),
            None => {
                for ((body, digits), job) in bodies.iter_mut().zip(&own_digits).zip(jobs) {
                    self.switch_keys(
                        level,
                        std::slice::from_mut(body),
                        digits,
                        std::slice::from_ref(job),
                        None,
                    );
                }
            }
        }
        Ok(nodes_out
            .into_iter()
            .zip(bodies)
            .map(|(node, body)| Some(Node { body, ..node }))
            .collect())
    }
}

/// One query's part of [`Packer::pack_batch`]: its leaves' bodies, the masks of its leaves
/// past the static ones, and its key bodies.
pub struct PackJob<'a> {
    /// Leaf `k`'s body (a value mod `q`).
    pub body: &'a (dyn Fn(usize) -> u64 + Sync),
    /// The mask (NTT form) of a leaf past the static ones.
    pub dynamic_mask: &'a (dyn Fn(usize) -> Result<Rns, Error> + Sync),
    /// The client's key bodies, `[level][part]` (NTT form).
    pub key_bodies: &'a [Vec<Rns>],
}

/// A node's place: its tree, heap id (root 1), level (leaves 0) and first leaf.
#[derive(Clone, Copy)]
struct Place {
    tree: usize,
    id: usize,
    level: usize,
    lo: usize,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::gaussian::ErrorSampler;
    use crate::rlwe::Secret;
    use pir_kernels::Backend;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn bit_reversal_places_the_first_half_on_even_coefficients() {
        let half = RING_D / 2;
        assert_eq!(coefficient_of(0), 0);
        assert_eq!(coefficient_of(half), 1);
        assert_eq!(coefficient_of(1), half);
        assert!((0..half).all(|k| coefficient_of(k).is_multiple_of(2)));
        assert_eq!(key_parts(), 39);
    }

    /// Packs `d1 + 1` LWE ciphertexts (`d1` static, one dynamic: YPIR's tree of a 1-byte
    /// record) with the offline plan and checks every message.
    #[test]
    fn planned_packing_decodes_every_leaf() {
        let ring = Ring::new(RING_D, Backend::best()).unwrap();
        let seed = [3u8; 16];
        let packer = Packer::new(ring.clone(), &seed).unwrap();
        let sampler = ErrorSampler::new();
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        let secret = Secret::generate(&ring, &mut rng).unwrap();
        let s_eval: Vec<i64> = secret.coefficients().to_vec();
        let key_bodies = super::super::key_bodies(&packer, &secret, &sampler, &mut rng).unwrap();
        let q = rns::modulus();
        // 1025 LWE ciphertexts under s: masks uniform, body = -<a, s> + e + Δ m.
        let p_bits = crate::params::ypir::PACKED_P_BITS;
        let delta = q >> p_bits;
        let d1 = crate::params::ypir::D1;
        let leaves = d1 + 1;
        let mut masks = Vec::new();
        let mut bodies = Vec::new();
        let mut messages = Vec::new();
        for k in 0..leaves {
            let a = rns::public_element(&seed, 9, k as u64, RING_D).unwrap();
            let coefficients = rns::crt(&a);
            let mut mask = a.clone();
            rns::forward(&ring, &mut mask);
            // Phase constant term of (A, b) is b + Σ_i A_i s_{-i}.
            let inner = (0..RING_D).fold(0i128, |acc, i| {
                let s = if i == 0 {
                    s_eval[0]
                } else {
                    -s_eval[RING_D - i]
                };
                acc + i128::from(coefficients[i]) * i128::from(s)
            });
            let m = rng.random_range(0..1u64 << p_bits);
            let e = i128::from(sampler.sample(&mut rng));
            let b = (i128::from(m * delta) + e - inner).rem_euclid(i128::from(q)) as u64;
            masks.push(mask);
            bodies.push(b);
            messages.push(m);
        }
        let plan = packer
            .plan(leaves, d1, &|k: usize| Ok(masks[k].clone()))
            .unwrap();
        assert_eq!(plan.trees(), 1);
        let (a, b) = packer
            .pack(
                &plan,
                0,
                &|k| bodies[k],
                &|k| Ok(masks[k].clone()),
                &key_bodies,
            )
            .unwrap();
        let ct = crate::rlwe::Ciphertext {
            a: crate::ring::Poly {
                residues: a,
                evaluations: true,
            },
            b: crate::ring::Poly {
                residues: b,
                evaluations: true,
            },
        };
        let mut phase = secret.phase(&ring, &ct).unwrap();
        ring.to_coefficients(&mut phase);
        let values = ring.coefficients(&phase).unwrap();
        let mut worst = 0i64;
        for (k, &m) in messages.iter().enumerate() {
            let c = values[coefficient_of(k)];
            let noise = rns::centered((c + q - (m * delta) % q) % q);
            worst = worst.max(noise.abs());
            assert!(noise.unsigned_abs() < delta / 2, "leaf {k}: noise {noise}");
        }
        // The analysis in GADGET's documentation: about 2^34.9; allow 8 sigma.
        assert!(
            worst < 1 << 38,
            "worst noise 2^{:.1}",
            (worst as f64).log2()
        );
    }
}
