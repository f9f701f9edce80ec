//! The `pir` command's definition as a library: the top-level [`cli::Cli`] and its list of
//! commands, each naming the flags of the application that carries it out (`command`
//! modules of pir-updates, pir-records, pir-breach, pir-safebrowsing, pir-blockstore and
//! pir-bench). The binary (`src/main.rs`) dispatches to them. This part is a library so that
//! the config-file fuzz target reaches every server's settings type through one path.

pub mod cli;
