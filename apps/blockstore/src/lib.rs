//! `pir-blockstore`: an oblivious block store people can use as a disk.
//!
//! Main items:
//! - [`Disk`] ([`disk`]): the `pir-oram` client over [`FileStores`] ([`files`]) with a sealed,
//!   crash-safe state file and its key; byte-range reads and writes, flush, recovery;
//! - [`nbd`]: the NBD protocol (fixed newstyle handshake, `NBD_OPT_GO`, structured replies)
//!   as a sans-I/O codec, so `nbdcopy`, `nbdinfo` and `qemu-img` can use the store unchanged;
//! - [`size`]: `1GiB`/`4KiB` size arguments.
//!
//! What it does not do: sockets (the `pir oram nbd` command runs the NBD loop), or trust the
//! stores: they see sealed slots, slot numbers and timing only.

pub mod bench;
pub mod disk;
pub mod files;
pub mod nbd;
pub mod remote;
pub mod size;

pub use disk::{key_path, Disk, DiskError, StoreSpec};
pub use files::FileStores;
pub use pir_oram;
