//! Every scheme the service layer serves, with what a user must trust for privacy.
//!
//! Adding a scheme: give it a [`SchemeId`], implement its sans-I/O scheme (a `pir-xor` or
//! `pir-lattice` trait) and a [`crate::Backend`], and add one [`SchemeEntry`] to [`standard`].
//! The conformance harness ([`crate::conformance::check`]) runs every entry of [`standard`] through
//! the same correctness, malformed-input and privacy-shape checks over the signed-batch
//! service, so a new entry is tested the moment it is registered.

use pir_core::SchemeId;

use crate::conformance::{self, Deploy};

/// Families of schemes, by what privacy rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Family {
    /// Several servers, information-theoretic privacy while they do not collude.
    MultiServer,
    /// One server, privacy from a lattice assumption (LWE).
    SingleServer,
}

/// One registered scheme.
#[derive(Debug, Clone, Copy)]
pub struct SchemeEntry {
    /// Its wire id.
    pub id: SchemeId,
    /// Its family.
    pub family: Family,
    /// What must hold for the servers to learn nothing, in words a user understands.
    pub assumption: &'static str,
    /// A small deployment of it for the conformance harness.
    pub deploy: Deploy,
}

/// The schemes this build serves.
pub fn standard() -> Vec<SchemeEntry> {
    vec![
        SchemeEntry {
            id: SchemeId::Chor,
            family: Family::MultiServer,
            assumption: "at least one of the mirrors asked does not collude with the others",
            deploy: conformance::deploy_chor,
        },
        SchemeEntry {
            id: SchemeId::RaidPir,
            family: Family::MultiServer,
            assumption: "no r of the mirrors asked collude (r is the redundancy, 2 by default)",
            deploy: conformance::deploy_raid_pir,
        },
        SchemeEntry {
            id: SchemeId::Dpf,
            family: Family::MultiServer,
            assumption: "the two mirrors asked do not collude (each sees one DPF key, \
                         pseudorandom under AES: 128-bit security)",
            deploy: conformance::deploy_dpf,
        },
        SchemeEntry {
            id: SchemeId::Qdp,
            family: Family::MultiServer,
            assumption: "the two servers do not collude",
            deploy: conformance::deploy_qdp,
        },
        SchemeEntry {
            id: SchemeId::Checklist,
            family: Family::MultiServer,
            assumption: "the offline and the online server do not collude (each sees sets \
                         punctured at random positions, pseudorandom under AES)",
            deploy: conformance::deploy_checklist,
        },
        SchemeEntry {
            id: SchemeId::SimplePir,
            family: Family::SingleServer,
            assumption: "learning with errors is hard (n = 1024, q = 2^32: 128-bit security); \
                         the server may be anyone",
            deploy: conformance::deploy_simple_pir,
        },
        SchemeEntry {
            id: SchemeId::DoublePir,
            family: Family::SingleServer,
            assumption: "learning with errors is hard (n = 1024, q = 2^32: 128-bit security); \
                         the server may be anyone",
            deploy: conformance::deploy_double_pir,
        },
    ]
}

/// The entry of `id`, if this build serves it.
pub fn lookup(id: SchemeId) -> Option<SchemeEntry> {
    standard().into_iter().find(|entry| entry.id == id)
}
