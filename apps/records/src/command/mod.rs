//! `pir db build`, `pir serve`, `pir get`, `pir shard serve` and `pir front serve` as a library: the commands' flags
//! ([`RecordsCommand`]), the single server as a server kind on `pir-host`, and the client's
//! lookup written to a file, standard output or JSON. The `pir` binary parses the flags and
//! calls [`run`].

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;

mod args;
mod build;
mod get;
mod reload;
mod serve;
mod shard;
mod shard_breach;
mod shard_xor;

pub use args::ServeSettings;
pub use args::{DbBuildArgs, DbCommand, GetArgs, LatticeSchemeArg, RecordsCommand, ServeArgs};
pub use build::served_by;
pub use shard::{
    FrontCommand, FrontServeArgs, FrontSettings, ShardCommand, ShardServeArgs, ShardSettings,
};

/// `pir get --lookup`: neither candidate slot holds the key. The binary exits with
/// [`KeyNotFound::EXIT_CODE`] on it.
#[derive(Debug, thiserror::Error)]
#[error("not found: key {0:?} is not in the database")]
pub struct KeyNotFound(pub String);

impl KeyNotFound {
    /// The exit code of `pir get` for a key that is not in the database.
    pub const EXIT_CODE: u8 = 4;
}

/// Runs `pir db build`, `pir serve` or `pir get`. A key that is not in the database is the
/// error [`KeyNotFound`].
pub async fn run(command: RecordsCommand) -> Result<()> {
    match command {
        RecordsCommand::Db(DbCommand::Build(args)) => build::build(&args),
        RecordsCommand::Serve(args) => serve::serve(&args).await,
        RecordsCommand::Get(args) => get::get(&args).await,
        RecordsCommand::Shard(ShardCommand::Serve(args)) => shard::serve_shard(&args).await,
        RecordsCommand::Front(FrontCommand::Serve(args)) => shard::serve_front(&args).await,
    }
}

impl LatticeSchemeArg {
    /// Every scheme, in the order `pir db build` lists them.
    pub const ALL: [LatticeSchemeArg; 4] = [
        LatticeSchemeArg::Simplepir,
        LatticeSchemeArg::Doublepir,
        LatticeSchemeArg::Ypir,
        LatticeSchemeArg::Inspire,
    ];

    /// The scheme this flag names.
    pub fn scheme(self) -> pir_lattice::Scheme {
        match self {
            LatticeSchemeArg::Simplepir => pir_lattice::Scheme::SimplePir,
            LatticeSchemeArg::Doublepir => pir_lattice::Scheme::DoublePir,
            LatticeSchemeArg::Ypir => pir_lattice::Scheme::Ypir,
            LatticeSchemeArg::Inspire => pir_lattice::Scheme::Inspire,
        }
    }

    /// The scheme's name, as the registry and the server print it.
    pub fn name(self) -> &'static str {
        self.scheme().id().name()
    }
}

/// How often a front end asks every shard replica whether it is up (for `/health`).
const PROBE_EVERY: Duration = Duration::from_secs(2);

/// Probes a front end's replicas every [`PROBE_EVERY`] while `service` lives, so that
/// `/health`'s shard coverage stays current without client traffic; each probe is a manifest
/// request (no pass over a shard's records).
fn keep_probing<T: Send + Sync + 'static>(service: &Arc<T>, probe: fn(&T)) {
    let probed = Arc::downgrade(service);
    tokio::spawn(async move {
        let mut every = tokio::time::interval(PROBE_EVERY);
        loop {
            every.tick().await;
            match probed.upgrade() {
                Some(service) => probe(&service),
                None => break,
            }
        }
    });
}
