//! `pir-kernels`: the loops every PIR server runs over its whole database, and the one crate of
//! the workspace that may use `unsafe` (each block carries a `// SAFETY:` comment).
//!
//! Main items:
//! - [`Backend`]: portable, AVX2 or AVX-512, chosen at run time (see [`backend`]).
//! - [`xor`]: `acc ^= row` scans for Chor and RAID-PIR answers.
//! - [`matvec`]: matrix-vector products mod 2^32 for the lattice schemes.
//! - [`map`]: read-only memory maps of database files.
//!
//! What it does not do: no scheme logic, no parameter validation beyond slice lengths.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod backend;
pub mod map;
pub mod matvec;
pub mod xor;

pub use backend::Backend;
pub use map::map_readonly;
pub use xor::{xor_into, xor_rows};
