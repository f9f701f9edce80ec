//! Config files for `pir serve` and `pir breach serve`: defaults, then the TOML file
//! (`--config`), then the flags, merged into one validated settings struct; `--print-config`
//! prints the result as a file.
//!
//! Each command's settings are a serde struct whose field names are the long flag names with
//! `_` for `-` (`grace_seconds` for `--grace-seconds`). Relative paths in a file are taken
//! relative to the file's directory; printed files hold absolute paths, so they stay right
//! wherever they are saved.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Merges `defaults`, the file at `config` (if any) and `flags` (only the flags given), later
/// ones winning, into `S`. `paths` names the fields that hold paths.
pub fn merge<S: DeserializeOwned, F: Serialize>(
    defaults: toml::Table,
    config: Option<&Path>,
    flags: &F,
    paths: &[&str],
) -> Result<S> {
    let text = match config {
        Some(path) => Some(
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
        ),
        None => None,
    };
    merge_text(
        defaults,
        config.zip(text.as_deref()).map(|(path, text)| (text, path)),
        flags,
        paths,
    )
}

/// [`merge`] with the config file's text given: `(text, path it was read from)`.
pub fn merge_text<S: DeserializeOwned, F: Serialize>(
    defaults: toml::Table,
    config: Option<(&str, &Path)>,
    flags: &F,
    paths: &[&str],
) -> Result<S> {
    let mut merged = defaults;
    if let Some((text, path)) = config {
        let mut file: toml::Table =
            toml::from_str(text).with_context(|| format!("{} is not TOML", path.display()))?;
        let base = path.parent().unwrap_or(Path::new(""));
        for field in paths {
            if let Some(value) = file.get_mut(*field) {
                map_paths(value, &|p| base.join(p).to_string_lossy().into_owned());
            }
        }
        merged.extend(file);
    }
    let flags = toml::Table::try_from(flags).context("reading the flags")?;
    merged.extend(flags);
    let settings: std::result::Result<S, _> = toml::Value::Table(merged).try_into();
    settings.map_err(|e| {
        anyhow::anyhow!(
            "{}: every setting is a flag (--name) or a line `name = value` in --config",
            e.to_string().trim()
        )
    })
}

/// `settings` as a config file, with the `paths` fields made absolute.
pub fn print<S: Serialize>(settings: &S, paths: &[&str]) -> Result<String> {
    let mut table = toml::Table::try_from(settings).context("writing the settings")?;
    for field in paths {
        if let Some(value) = table.get_mut(*field) {
            map_paths(value, &|p| {
                std::path::absolute(PathBuf::from(p))
                    .map(|a| a.to_string_lossy().into_owned())
                    .unwrap_or_else(|_| p.to_string())
            });
        }
    }
    toml::to_string(&table).context("writing the settings as TOML")
}

/// Applies `f` to a path setting: a string, or each string of a list.
fn map_paths(value: &mut toml::Value, f: &dyn Fn(&str) -> String) {
    match value {
        toml::Value::String(p) => *p = f(p),
        toml::Value::Array(items) => {
            for item in items {
                if let toml::Value::String(p) = item {
                    *p = f(p);
                }
            }
        }
        _ => {}
    }
}

/// `defaults` with the connection bounds every server takes (`LimitArgs`) added.
pub fn with_limits(mut defaults: toml::Table) -> toml::Table {
    let bounds = [
        (
            "max_connections",
            pir_server::DEFAULT_MAX_CONNECTIONS as i64,
        ),
        (
            "header_timeout_seconds",
            pir_server::DEFAULT_HEADER_TIMEOUT.as_secs() as i64,
        ),
        (
            "body_timeout_seconds",
            pir_server::DEFAULT_BODY_TIMEOUT.as_secs() as i64,
        ),
    ];
    for (name, value) in bounds {
        defaults.insert(name.to_string(), toml::Value::Integer(value));
    }
    defaults
}

/// Puts resolved connection bounds into `options` (each at least 1).
pub fn apply_limits(
    options: &mut pir_server::ServerOptions,
    max_connections: usize,
    header_timeout_seconds: u64,
    body_timeout_seconds: u64,
) -> Result<()> {
    if max_connections == 0 || header_timeout_seconds == 0 || body_timeout_seconds == 0 {
        anyhow::bail!(
            "max_connections, header_timeout_seconds and body_timeout_seconds must be at least 1"
        );
    }
    options.max_connections = max_connections;
    options.header_timeout = std::time::Duration::from_secs(header_timeout_seconds);
    options.body_timeout = std::time::Duration::from_secs(body_timeout_seconds);
    Ok(())
}

/// Makes a defaults table from `(name, value)` pairs.
pub fn defaults<const N: usize>(pairs: [(&str, toml::Value); N]) -> toml::Table {
    pairs
        .into_iter()
        .map(|(name, value)| (name.to_string(), value))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, Serialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Settings {
        db: PathBuf,
        workers: Option<usize>,
        grace_seconds: u64,
    }

    #[derive(Serialize)]
    struct Flags {
        #[serde(skip_serializing_if = "Option::is_none")]
        db: Option<PathBuf>,
        #[serde(skip_serializing_if = "Option::is_none")]
        grace_seconds: Option<u64>,
    }

    #[test]
    fn defaults_then_file_then_flags() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("server.toml");
        std::fs::write(&file, "db = \"a.db\"\nworkers = 3\ngrace_seconds = 5\n").unwrap();
        let defaults = || defaults([("grace_seconds", toml::Value::Integer(10))]);
        let none = Flags {
            db: None,
            grace_seconds: None,
        };
        let s: Settings = merge(defaults(), Some(&file), &none, &["db"]).unwrap();
        assert_eq!(s.db, dir.path().join("a.db"), "relative to the file");
        assert_eq!((s.workers, s.grace_seconds), (Some(3), 5));
        let flags = Flags {
            db: Some("b.db".into()),
            grace_seconds: Some(1),
        };
        let s: Settings = merge(defaults(), Some(&file), &flags, &["db"]).unwrap();
        assert_eq!((s.db, s.grace_seconds), (PathBuf::from("b.db"), 1));
        let missing = merge::<Settings, _>(defaults(), None, &none, &["db"]).unwrap_err();
        assert!(missing.to_string().contains("db"), "{missing}");
        std::fs::write(&file, "db = \"a.db\"\nlisten_on = 1\n").unwrap();
        assert!(merge::<Settings, _>(defaults(), Some(&file), &none, &["db"]).is_err());
        let printed = print(
            &Settings {
                db: "x.db".into(),
                workers: None,
                grace_seconds: 2,
            },
            &["db"],
        )
        .unwrap();
        assert!(
            printed.contains("grace_seconds = 2") && !printed.contains("\"x.db\""),
            "{printed}"
        );
    }
}
