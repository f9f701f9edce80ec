//! InsPIRe-class single-server PIR (Mahdavi, Patel, Seo and Yeo, "InsPIRe:
//! Communication-Efficient PIR with Server-side Preprocessing", IEEE S&P 2025, ePrint
//! 2025/1352): YPIR's two layers with the second layer's answer packed by InspiRING
//! ([`ring_pack`]), which needs two key-switching keys instead of CDKS's `log2 d`, and does
//! all of its mask work before the query arrives.

pub mod ring_pack;

pub use ring_pack::{Gadget, InspiRing, PackingKeys, Prepared};

#[cfg(test)]
mod pack_tests;
