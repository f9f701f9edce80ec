//! Fuzz target: the config files of every server (`pir mirror serve`, `pir serve`, `pir breach
//! serve`, `pir safebrowsing serve`, `pir oram store`), merged with the built-in defaults as the servers do.
//! Whatever a file says, the merge returns settings or an error; the mirror's settings, once
//! accepted, print as a file that reads back to the same settings.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use pir_cli::cli::{
    BreachServeSettings, MirrorServeArgs, OramStoreSettings, SbServeSettings, ServeSettings,
};
use pir_cli::{mirror_config, server_config};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let file = Some((text, Path::new("/etc/pir/server.toml")));
    let no_flags = toml::Table::new();

    if let Ok(config) = mirror_config::resolve_text(MirrorServeArgs::default(), file) {
        let printed = config.to_toml().expect("accepted settings print");
        let again = mirror_config::resolve_text(
            MirrorServeArgs::default(),
            Some((&printed, Path::new("/elsewhere/printed.toml"))),
        )
        .expect("a printed config reads back");
        assert_eq!(again.to_toml().expect("prints again"), printed);
    }
    let _ = server_config::merge_text::<ServeSettings, _>(
        ServeSettings::defaults(),
        file,
        &no_flags,
        &ServeSettings::PATHS,
    );
    let _ = server_config::merge_text::<BreachServeSettings, _>(
        BreachServeSettings::defaults(),
        file,
        &no_flags,
        &BreachServeSettings::PATHS,
    );
    let _ = server_config::merge_text::<SbServeSettings, _>(
        SbServeSettings::defaults(),
        file,
        &no_flags,
        &SbServeSettings::PATHS,
    );
    let _ = server_config::merge_text::<OramStoreSettings, _>(
        OramStoreSettings::defaults(),
        file,
        &no_flags,
        &OramStoreSettings::PATHS,
    );
});
