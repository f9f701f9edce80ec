//! The `pir` command's definitions as a library: its arguments and the settings of every
//! server's config file (merged by `pir-host`). The binary (`src/main.rs`) is the rest; this
//! part is a library so that the fuzz targets reach the very parsers the servers run on
//! their config files.

// The settings structs repeat the flags one field for one; each field's documentation is its
// flag's (`pir COMMAND --help`, and the config-file keys in the README).
#[allow(missing_docs)]
pub mod cli;
