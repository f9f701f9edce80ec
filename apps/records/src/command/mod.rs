//! `pir db build`, `pir serve`, `pir get`, `pir shard serve` and `pir front serve` as a library: the commands' flags
//! ([`RecordsCommand`]), the single server as a server kind on `pir-host`, and the client's
//! lookup written to a file, standard output or JSON. The `pir` binary parses the flags and
//! calls [`run`].

use anyhow::Result;

mod args;
mod build;
mod get;
mod serve;
mod shard;
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
    pub const ALL: [LatticeSchemeArg; 3] = [
        LatticeSchemeArg::Simplepir,
        LatticeSchemeArg::Doublepir,
        LatticeSchemeArg::Ypir,
    ];

    /// The scheme this flag names.
    pub fn scheme(self) -> pir_lattice::Scheme {
        match self {
            LatticeSchemeArg::Simplepir => pir_lattice::Scheme::SimplePir,
            LatticeSchemeArg::Doublepir => pir_lattice::Scheme::DoublePir,
            LatticeSchemeArg::Ypir => pir_lattice::Scheme::Ypir,
        }
    }

    /// The scheme's name, as the registry and the server print it.
    pub fn name(self) -> &'static str {
        self.scheme().id().name()
    }
}
