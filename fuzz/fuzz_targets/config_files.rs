//! Fuzz target: the config files of every server (`pir mirror serve`, `pir serve`, `pir breach
//! serve`, `pir safebrowsing serve`, `pir oram store`), merged with the built-in defaults as the
//! servers do (`pir_host::settings`). Whatever a file says, the merge returns settings or an
//! error; settings, once accepted, print as a file that reads back to the same settings.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use pir_cli::cli::{
    BreachServeSettings, MirrorSettings, OramStoreSettings, SbServeSettings, ServeSettings,
};
use pir_host::settings::{self, Settings};

/// Resolves `file` as kind `S`; accepted settings must print and read back the same.
fn round_trip<S: Settings>(file: Option<(&str, &Path)>) {
    let no_flags = toml::Table::new();
    if let Ok(accepted) = settings::resolve_text::<S, _>(file, &no_flags) {
        let printed = settings::print_settings(&accepted).expect("accepted settings print");
        let again: S = settings::resolve_text(
            Some((&printed, Path::new("/elsewhere/printed.toml"))),
            &no_flags,
        )
        .expect("a printed config reads back");
        assert_eq!(
            settings::print_settings(&again).expect("prints again"),
            printed
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file = Some((text, Path::new("/etc/pir/server.toml")));
    round_trip::<MirrorSettings>(file);
    round_trip::<ServeSettings>(file);
    round_trip::<BreachServeSettings>(file);
    round_trip::<SbServeSettings>(file);
    round_trip::<OramStoreSettings>(file);
});
