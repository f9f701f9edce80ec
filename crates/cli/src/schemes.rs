//! `pir schemes`: the scheme registry (`pir_service::registry`) for users.

use anyhow::Result;
use pir_service::registry;

/// Prints every scheme's name, family, servers, purpose and privacy assumption, or with
/// `markdown` the README's privacy table.
pub fn run(markdown: bool) -> Result<()> {
    let out = if markdown {
        registry::markdown()
    } else {
        registry::text()
    };
    crate::write_stdout(out.as_bytes())
}
