//! The config-file merge of `pir-host` ([`pir_host::settings`]) under its old path, for the
//! server commands not yet declared on the host (`pir oram store`). There is one config
//! system: this module only re-exports it.

pub use pir_host::settings::{apply_limits, defaults, merge, merge_text, print, with_limits};
