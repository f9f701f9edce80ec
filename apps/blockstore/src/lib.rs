//! `pir-blockstore`: an oblivious block store people can use as a disk.
//!
//! Main items:
//! - [`Disk`] ([`disk`]): the `pir-oram` client over [`FileStores`] ([`files`]) with a sealed,
//!   crash-safe state file and its key; byte-range reads and writes, flush, recovery;
//! - [`nbd`]: the NBD protocol (fixed newstyle handshake, `NBD_OPT_GO`, structured replies)
//!   as a sans-I/O codec, so `nbdcopy`, `nbdinfo` and `qemu-img` can use the store unchanged;
//! - [`nbd::export`]: the export itself on a Unix socket, loopback, or (with a pre-shared
//!   key, [`nbd::psk`]) beyond, with per-connection limits;
//! - [`node`] and [`balanced`]: ORAM nodes (`pir oram node`: a [`Disk`] served to a
//!   balancer) and the disk over several of them behind the oblivious load balancer
//!   (`pir_oram::balance`), exported like a [`Disk`] ([`device::BlockDevice`]);
//! - [`room`]: free space checked before init, a reserve so a full disk still opens;
//! - [`size`]: `1GiB`/`4KiB` size arguments;
//! - [`command`]: the `pir oram` commands (flags, what each does, `pir oram store` as a server
//!   kind on `pir-host`, the NBD export's socket and signals) and the `pir bench --oram`
//!   driver; the `pir` binary only dispatches to it.
//!
//! What it does not do: trust the stores: they see sealed slots, slot numbers and timing only.
//! Command-line parsing and signal handling live in [`command`] only; the rest is a library.

pub mod balanced;
pub mod bench;
pub mod command;
pub mod device;
pub mod disk;
pub mod files;
pub mod nbd;
pub mod node;
pub mod remote;
pub mod room;
pub mod size;

pub use disk::{key_path, Disk, DiskError, StoreSpec};
pub use files::FileStores;
pub use pir_oram;
