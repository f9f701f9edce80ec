//! Which scheme a fetch uses ([`SchemeChoice`]) and the privacy assumption it prints: its own
//! module so that the fetch flow and the chunk placement ([`crate::chunks`]) both use it
//! without importing each other.

use pir_core::SchemeId;

/// Which scheme to fetch with, and what it assumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemeChoice {
    /// Chor et al. over `servers` mirrors: as long as at least one of the mirrors asked does
    /// not collude with the others, none of them learns which file you fetched. Each mirror
    /// receives `B` bits per block.
    Chor {
        /// Mirrors asked per query.
        servers: usize,
    },
    /// RAID-PIR over `servers` mirrors with redundancy `r` and `c` chunks: as long as no `r`
    /// of the mirrors asked collude, none of them learns which file you fetched. Each mirror
    /// receives a 128-bit seed plus about `B / n` bits, and scans about `r / n` of the data.
    RaidPir {
        /// Mirrors asked per query (`n`).
        servers: usize,
        /// Redundancy `r`, `2 <= r <= n`.
        redundancy: usize,
        /// Chunks `c` (defaults to `n`); one query fetches up to `c` blocks.
        chunks: usize,
    },
    /// DPF PIR (Boyle, Gilboa, Ishai) over 2 mirrors: as long as the two mirrors asked do not
    /// collude, neither learns which file you fetched. Each mirror receives a DPF key of about
    /// 20 bytes per level of the block tree (267 bytes for 2^20 blocks) instead of `B` bits.
    Dpf,
}

impl SchemeChoice {
    /// The scheme's wire id.
    pub fn id(&self) -> SchemeId {
        match self {
            SchemeChoice::Chor { .. } => SchemeId::Chor,
            SchemeChoice::RaidPir { .. } => SchemeId::RaidPir,
            SchemeChoice::Dpf => SchemeId::Dpf,
        }
    }

    /// The privacy assumption, in words a user understands: the registry's, after the
    /// parameters of this fetch.
    pub fn assumption(&self) -> String {
        let (name, assumption) = match pir_service::registry::lookup(self.id()) {
            Some(entry) => (entry.name, entry.assumption),
            // Not reached: pir-service's tests check that mirrors' schemes are registered.
            None => (
                self.id().name(),
                "not a registered scheme, no privacy promise",
            ),
        };
        let servers = self.servers();
        match *self {
            SchemeChoice::RaidPir { redundancy, .. } => {
                format!("{name} over {servers} mirrors, redundancy r = {redundancy}: {assumption}")
            }
            _ => format!("{name} over {servers} mirrors: {assumption}"),
        }
    }

    /// Mirrors one query goes to.
    pub fn servers(&self) -> usize {
        match *self {
            SchemeChoice::Chor { servers } | SchemeChoice::RaidPir { servers, .. } => servers,
            SchemeChoice::Dpf => 2,
        }
    }
}
