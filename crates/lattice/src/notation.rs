//! Notation of the lattice schemes, defined once (after Henzinger et al., "One Server for the
//! Price of Two: Simple and Fast Single-Server Private Information Retrieval", USENIX Security
//! 2023, and YPIR, Menon and Wu 2024). Symbols of `pir_core::glossary` keep their meaning elsewhere.
//!
//! | symbol | meaning |
//! |---|---|
//! | `n` | LWE secret dimension, [`crate::params::LWE_N`] = 1280 (YPIR's first layer: `d1` = [`crate::params::ypir::D1`] = 1024) |
//! | `q` | ciphertext modulus, `2^32`: arithmetic in `Z_q` is wrapping `u32` arithmetic |
//! | `p` | plaintext modulus, from [`crate::params::p_for`] |
//! | `Δ` | `floor(q / p)`, the scale of an encoded plaintext |
//! | `σ` | parameter of the rounded Gaussian error, [`crate::params::SIGMA`] = 6.4 |
//! | `χ` | the error distribution ([`crate::gaussian`]) |
//! | `N` | number of records |
//! | `ℓ` | rows of the database matrix (`rows`) |
//! | `m` | columns of the database matrix (`columns`); a query selects one |
//! | `b` | data bits per entry, `floor(log2 p)` |
//! | `D` | the database, an `ℓ × m` matrix over `Z_p`; `D' = D - floor(p/2)` is its centered form |
//! | `A`, `A1`, `A2` | public uniform matrices over `Z_q` (`m × n`, `m × n`, `ℓ × n`), expanded from seeds ([`crate::prg`]) |
//! | `s`, `e` | a client's LWE secret (uniform in `Z_q^n`) and error vector |
//! | `H` | SimplePIR hint `D'A`; DoublePIR: `H1 = D'A1`, `H2 = Decomp(H1ᵀ)'A2` |
//! | `κ` | base-`p` digits per element of `Z_q`, least `κ` with `p^κ >= q` |
//! | `Decomp` | writes each `Z_q` entry as its `κ` digits, one below the other |
//! | `u_i` | the unit vector with 1 at position `i` |
//! | `δ` | decoding failure probability per entry, `2^-40` |
