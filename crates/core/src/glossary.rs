//! Notation used across `pir`, defined once (names follow the RAID-PIR thesis,
//! `shared/seeds/001`, section 2.1, and upPIR, `shared/seeds/000`, section 4).
//!
//! | symbol | meaning |
//! |---|---|
//! | `B` | number of blocks in the database (`block_count`) |
//! | `b` | block size in bytes (`block_size`), a multiple of [`crate::BLOCK_GRANULE`] = 32 (releases use multiples of [`crate::LINE`] = 64) |
//! | `n` | number of servers (mirrors) that take part in one query (`servers`) |
//! | `k` | Chor: every one of the `n` servers must collude to learn the index |
//! | `c` | RAID-PIR: number of chunks the blocks are split into (`chunks`) |
//! | `r` | RAID-PIR: redundancy, servers that process each chunk (`redundancy`), `2 <= r <= n`; privacy holds against any `r - 1` colluding servers |
//! | `κ` | security parameter: seeds are 128 bits |
//! | `idx` | the block index the client wants; never leaves the client |
//!
//! A *query* is the message one server receives; an *answer* is what it sends back; the client
//! *decodes* the answers of all servers into the block(s).
