//! The stated security level of every lattice parameter set this crate publishes, next to the
//! parameters themselves.
//!
//! Each [`ParamSet`] is one LWE or ring-LWE instance a scheme sends the server, built from the
//! constants the code runs with ([`LWE_N`], YPIR's `D1`, [`LOG_Q`], [`SIGMA`], [`RING_D`], [`RNS_PRIMES`],
//! the column limits), and carries the core-SVP cost of the cheaper of the primal and dual
//! attacks on it as computed by `benches/security_estimate.py` (method and anchors in
//! `docs/security.md`). The test `crates/lattice/tests/security_levels.rs` runs that script
//! (`--json`) and fails when a set's dimension, modulus, error, secret or sample count differs
//! from the script's, when a stated level differs from what the script computes, or when
//! `docs/security.md`'s table is not the script's output; so changing a parameter here without
//! re-estimating it fails a test.
//!
//! What it is not: an estimator. The numbers are the script's output, written down; nothing
//! here computes an attack cost. A scheme is as strong as its weakest set ([`level`]).

use crate::params::{LOG_Q, LWE_N, MAX_COLUMNS, SIGMA};
use crate::ring::{RING_D, RNS_PRIMES};
use crate::Scheme;

/// The bits a parameter set is meant to reach; every set below it says so wherever its level
/// is printed (`pir schemes`, the README).
pub const TARGET_BITS: u32 = 128;

/// The modulus `q` of a set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Modulus {
    /// `q = 2^k`.
    PowerOfTwo(u32),
    /// `q` = the product of these primes (a residue number system).
    Primes(&'static [u32]),
}

impl Modulus {
    /// `log2 q`.
    pub fn log2(self) -> f64 {
        match self {
            Modulus::PowerOfTwo(k) => f64::from(k),
            Modulus::Primes(primes) => primes.iter().map(|&p| f64::from(p).log2()).sum(),
        }
    }
}

/// How the secret of a set is drawn (it decides how the attacks rescale it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Secret {
    /// Uniform mod `q` (the attack puts it in normal form: it then has the error's law).
    Uniform,
    /// A rounded Gaussian of the error's parameter (LWE's normal form).
    Gaussian,
    /// Uniform in `{-1, 0, 1}`.
    Ternary,
}

impl Secret {
    /// The name `benches/security_estimate.py --json` gives it.
    pub fn name(self) -> &'static str {
        match self {
            Secret::Uniform => "uniform",
            Secret::Gaussian => "gaussian",
            Secret::Ternary => "ternary",
        }
    }
}

/// One LWE or ring-LWE instance and its estimated security.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamSet {
    /// Its name: the first cell of its row in `docs/security.md` and `name` in the script's
    /// JSON.
    pub name: &'static str,
    /// Secret dimension `n` (ring degree `d` for ring-LWE, estimated as LWE of dimension `d`).
    pub dimension: usize,
    /// The ciphertext modulus.
    pub modulus: Modulus,
    /// The error's Gaussian parameter `σ`.
    pub sigma: f64,
    /// The secret's law.
    pub secret: Secret,
    /// Most samples one attacker sees under one secret; `None`: unbounded (a secret reused
    /// across queries and in key-switching keys).
    pub samples: Option<u64>,
    /// Core-SVP bits of the cheaper attack, classical (`0.292 β`).
    pub classical: u32,
    /// Core-SVP bits of the cheaper attack, quantum (`0.265 β`).
    pub quantum: u32,
    /// The primal attack in the lattice estimator's cost model (`0.292 β + 16.4 + log2 8D`),
    /// the model behind the papers' "128 bits".
    pub estimator: u32,
}

impl ParamSet {
    /// Whether the set reaches [`TARGET_BITS`] classical core-SVP bits.
    pub fn meets_target(&self) -> bool {
        self.classical >= TARGET_BITS
    }
}

/// SimplePIR's query and both DoublePIR layers: `n = 1280`, `q = 2^32`, `σ = 6.4`, a fresh
/// uniform secret per query, at most [`MAX_COLUMNS`] samples.
pub const LWE: ParamSet = ParamSet {
    name: "LWE n=1280, q=2^32",
    dimension: LWE_N,
    modulus: Modulus::PowerOfTwo(LOG_Q),
    sigma: SIGMA,
    secret: Secret::Uniform,
    samples: Some(MAX_COLUMNS as u64),
    classical: 128,
    quantum: 116,
    estimator: 160,
};

/// YPIR's first layer: the LWE set over `Z_{2^32}[X]/(X^2048 + 1)` with a fresh ternary
/// secret per query, at most YPIR's [`crate::ypir::MAX_COLUMNS`] samples (the paper's
/// `d1 = 1024` with a Gaussian secret had 94 bits).
pub const YPIR_FIRST: ParamSet = ParamSet {
    name: "RLWE d=2048, q=2^32",
    dimension: crate::params::ypir::D1,
    modulus: Modulus::PowerOfTwo(LOG_Q),
    sigma: SIGMA,
    secret: Secret::Ternary,
    samples: Some(crate::params::ypir::MAX_COLUMNS as u64),
    classical: 208,
    quantum: 189,
    estimator: 240,
};

/// YPIR's second layer and packing keys, YPIR+SP's query, InsPIRe's query and packing keys:
/// `d = 4096`,
/// `q = 268369921 · 249561089`, `σ = 6.4`, a ternary secret the client reuses (unbounded
/// samples; the paper's `d = 2048` had 96 bits).
pub const RING: ParamSet = ParamSet {
    name: "RLWE d=4096, q=q2",
    dimension: RING_D,
    modulus: Modulus::Primes(&RNS_PRIMES),
    sigma: SIGMA,
    secret: Secret::Ternary,
    samples: None,
    classical: 244,
    quantum: 222,
    estimator: 277,
};

// InsPIRe's ring is YPIR's second-layer ring, so one set states both.
const _: () = assert!(crate::params::inspire::D == RING_D);

/// Every set, in the order of `docs/security.md`'s table and the script's output.
pub const SETS: [ParamSet; 3] = [LWE, YPIR_FIRST, RING];

/// The sets a scheme publishes (the instances its queries and keys are made of).
pub const fn sets(scheme: Scheme) -> &'static [ParamSet] {
    match scheme {
        Scheme::SimplePir | Scheme::DoublePir => &[LWE],
        Scheme::Ypir => &[YPIR_FIRST, RING],
        Scheme::YpirSp => &[RING],
        Scheme::Inspire => &[RING],
    }
}

/// A scheme's level: its weakest set (by classical bits).
pub const fn level(scheme: Scheme) -> ParamSet {
    let sets = sets(scheme);
    let mut weakest = sets[0];
    let mut i = 1;
    while i < sets.len() {
        if sets[i].classical < weakest.classical {
            weakest = sets[i];
        }
        i += 1;
    }
    weakest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scheme_is_as_strong_as_its_weakest_set() {
        for scheme in [
            Scheme::SimplePir,
            Scheme::DoublePir,
            Scheme::Ypir,
            Scheme::YpirSp,
            Scheme::Inspire,
        ] {
            let weakest = sets(scheme).iter().map(|s| s.classical).min();
            assert_eq!(Some(level(scheme).classical), weakest, "{scheme:?}");
        }
        assert_eq!(level(Scheme::Ypir).name, YPIR_FIRST.name);
        assert!(SETS.iter().all(ParamSet::meets_target));
    }

    #[test]
    fn the_ring_modulus_is_the_two_primes() {
        assert!((RING.modulus.log2() - 55.894).abs() < 1e-3);
        assert_eq!(LWE.modulus.log2(), 32.0);
    }
}
