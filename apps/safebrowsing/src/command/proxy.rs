//! `pir safebrowsing proxy`: [`LocalProxy`] on the runtime's bounded loopback listener,
//! refreshed from server 0.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use pir_keys::PublicKey;

use super::{SbProxyArgs, SbScheme, PRIVACY, SERVERS_HEADER};
use crate::LocalProxy;

/// `pir safebrowsing proxy`: [`LocalProxy`] on a bounded loopback listener
/// (`pir_server::local`: loopback `Host` names only, connection cap, timeouts, body limits),
/// refreshed from server 0 every `--refresh-seconds`.
pub(super) async fn proxy(args: &SbProxyArgs) -> Result<()> {
    if !args.listen.ip().is_loopback() {
        bail!(
            "the proxy speaks plain HTTP and sees the browser's prefixes in the clear: listen on \
             a loopback address such as 127.0.0.1:{}",
            args.listen.port()
        );
    }
    let servers = read_servers(&args.servers)?;
    let state_dir = state_dir(&args.servers, args.state.as_deref())?;
    let bar = pir_host::log::progress("hints {bar:40} {bytes}/{total_bytes} {eta} left", 0, false);
    let shown = bar.clone();
    let progress: crate::local::Progress = Arc::new(move |done, total| {
        shown.set_length(total);
        shown.set_position(done);
    });
    let scheme = match args.scheme {
        SbScheme::Checklist => pir_client::LookupScheme::Checklist,
        SbScheme::Singlepass => pir_client::LookupScheme::SinglePass,
        SbScheme::Dpf => pir_client::LookupScheme::Dpf,
    };
    let opened = LocalProxy::open(servers, state_dir, scheme, progress).await;
    bar.finish_and_clear();
    let proxy = Arc::new(opened.context("connecting to the Safe Browsing servers")?);
    println!("{}", proxy.describe().await);
    // Each list served or missing (no source: Firefox gets it empty), also at /health.
    print!("{}", proxy.lists().await);
    let every = Duration::from_secs(args.refresh_seconds.max(1));
    let refresher = tokio::spawn(refresh_loop(proxy.clone(), every));
    let answer = |proxy: Arc<LocalProxy<_>>, request| async move { proxy.handle(request).await };
    let running = pir_server::local::start_shared(args.listen, proxy, answer)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let addr = running.addr;
    println!("Safe Browsing v4 proxy at http://{addr}/v4/ (Ctrl-C stops)");
    println!(
        "Firefox: pir safebrowsing firefox-profile --proxy http://{addr} --out PROFILE, then \
         firefox --profile PROFILE"
    );
    println!("privacy: {PRIVACY}");
    running.run_until_signal().await;
    refresher.abort();
    Ok(())
}

/// The two servers of a servers file (from `pir safebrowsing servers`), server 0 first.
fn read_servers(path: &Path) -> Result<[(String, PublicKey); 2]> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let servers =
        pir_client::servers_file::parse(SERVERS_HEADER, 2, "pir safebrowsing servers", &text)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("{}", path.display()))?;
    Ok([servers[0].clone(), servers[1].clone()])
}

/// Where the proxy keeps its hints: `state`, or `SERVERS.state` beside the servers file.
/// A file there is refused: older versions kept one file, the hints now take a directory.
pub fn state_dir(servers: &Path, state: Option<&Path>) -> Result<PathBuf> {
    let dir = state.map(Path::to_path_buf).unwrap_or_else(|| {
        let mut name = servers.as_os_str().to_owned();
        name.push(".state");
        PathBuf::from(name)
    });
    if dir.is_file() {
        bail!(
            "{} is a file; --state is a directory now (one file per bucket): remove it or \
             give another --state",
            dir.display()
        );
    }
    Ok(dir)
}

/// Asks server 0 for a newer list every `every`.
async fn refresh_loop(proxy: Arc<LocalProxy>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        match proxy.refresh().await {
            Ok(Some(message)) => println!("{message}"),
            Ok(None) => {}
            Err(e) => println!("list refresh failed, still using the version before: {e:#}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_sits_beside_the_servers_file_unless_given() {
        let dir = tempfile::tempdir().unwrap();
        let servers = dir.path().join("sb.servers");
        assert_eq!(
            state_dir(&servers, None).unwrap(),
            dir.path().join("sb.servers.state")
        );
        let given = dir.path().join("hints");
        assert_eq!(state_dir(&servers, Some(&given)).unwrap(), given);
    }

    #[test]
    fn a_state_file_of_an_older_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("old.state");
        std::fs::write(&old, b"hints").unwrap();
        let error = state_dir(Path::new("sb.servers"), Some(&old)).unwrap_err();
        assert!(
            error.to_string().contains("--state is a directory now"),
            "{error}"
        );
    }
}
