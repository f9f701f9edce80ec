//! `pir safebrowsing firefox-profile`: a Firefox profile whose Safe Browsing provider is the
//! local proxy.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::SbFirefoxArgs;
use crate::list::Threat;

/// `pir safebrowsing firefox-profile`.
pub(super) fn firefox_profile(args: &SbFirefoxArgs) -> Result<()> {
    let url = write_firefox_profile(&args.out, &args.proxy)?;
    println!(
        "Firefox profile {} (Safe Browsing v4 provider google4 pointed at {url}); start \
         Firefox with\n  \
         firefox --profile {} --no-remote",
        args.out.display(),
        args.out.display()
    );
    Ok(())
}

/// Writes the profile directory `dir` (created if missing) whose `user.js` holds
/// [`firefox_prefs`] for the proxy at `proxy`, replacing an existing `user.js`. The proxy
/// must be an `http://` URL on this machine (127.0.0.1, localhost or [::1]): the browser
/// sends it prefixes in the clear. Returns the proxy's URL as written (no trailing `/`).
pub fn write_firefox_profile(dir: &Path, proxy: &str) -> Result<String> {
    let url = loopback_url(proxy)?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path: PathBuf = dir.join("user.js");
    pir_fs::write_atomic_bytes(&path, firefox_prefs(url).as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(url.to_string())
}

/// `proxy` without a trailing `/`, if it is an `http://` URL on this machine.
fn loopback_url(proxy: &str) -> Result<&str> {
    let url = proxy.trim_end_matches('/');
    let Some(rest) = url.strip_prefix("http://") else {
        bail!("--proxy is the proxy's http:// URL, e.g. http://127.0.0.1:8470");
    };
    let authority = rest.split('/').next().unwrap_or(rest);
    // An IPv6 literal is bracketed and holds colons itself.
    let host = match authority.find(']') {
        Some(end) if authority.starts_with('[') => &authority[..=end],
        _ => authority.split(':').next().unwrap_or(authority),
    };
    if !(host == "127.0.0.1" || host == "localhost" || host == "[::1]") {
        bail!("--proxy must be on this machine (127.0.0.1, localhost or [::1])");
    }
    Ok(url)
}

/// The preferences that make Firefox use the proxy as its Safe Browsing v4 provider.
///
/// Firefox (checked with ESR 153) builds v4 protobuf update requests only for the provider
/// named `google4` (any other name is "Unknown provider for protobuf" in its list manager), so
/// the profile points `google4` at the proxy instead of adding a provider of another name, and
/// empties Google's v2 and v5 providers (v5 otherwise claims the same tables). The tables are
/// Firefox's defaults for the `google4` provider ([`Threat`]: malware, unwanted software,
/// phishing, and the download block and allow lists, checked locally only: the remote download
/// check is off). Every URL that would reach Google (reports, advisories, data sharing,
/// download checks) is blanked.
pub fn firefox_prefs(proxy: &str) -> String {
    let base = proxy.trim_end_matches('/');
    let provider = "browser.safebrowsing.provider.google4";
    let quoted = |v: &str| format!("\"{v}\"");
    let tables = |threats: &[Threat]| {
        quoted(
            &threats
                .iter()
                .map(|t| t.table())
                .collect::<Vec<_>>()
                .join(","),
        )
    };
    let prefs: Vec<(String, String)> = vec![
        (format!("{provider}.pver"), quoted("4")),
        (format!("{provider}.lists"), tables(&Threat::ALL)),
        (
            format!("{provider}.updateURL"),
            quoted(&format!(
                "{base}/v4/threatListUpdates:fetch?$ct=application/x-protobuf&key=pir&$httpMethod=POST"
            )),
        ),
        (
            format!("{provider}.gethashURL"),
            quoted(&format!(
                "{base}/v4/fullHashes:find?$ct=application/x-protobuf&key=pir&$httpMethod=POST"
            )),
        ),
        (format!("{provider}.reportURL"), quoted("")),
        (format!("{provider}.reportMalwareMistakeURL"), quoted("")),
        (format!("{provider}.reportPhishMistakeURL"), quoted("")),
        (format!("{provider}.advisoryURL"), quoted("")),
        (format!("{provider}.advisoryName"), quoted("pir")),
        (format!("{provider}.dataSharing.enabled"), "false".into()),
        (format!("{provider}.dataSharingURL"), quoted("")),
        // Fetch the list as soon as Firefox starts.
        (format!("{provider}.nextupdatetime"), quoted("1")),
        ("browser.safebrowsing.provider.google.lists".into(), quoted("")),
        ("browser.safebrowsing.provider.google5.lists".into(), quoted("")),
        ("browser.safebrowsing.provider.google5.enabled".into(), "false".into()),
        ("urlclassifier.malwareTable".into(), tables(&[Threat::Malware, Threat::Unwanted])),
        ("urlclassifier.phishTable".into(), tables(&[Threat::Phishing])),
        ("urlclassifier.downloadBlockTable".into(), tables(&[Threat::Download])),
        ("urlclassifier.downloadAllowTable".into(), tables(&[Threat::DownloadAllow])),
        ("browser.safebrowsing.malware.enabled".into(), "true".into()),
        ("browser.safebrowsing.phishing.enabled".into(), "true".into()),
        // The download lists are fetched and checked locally; nothing goes to Google.
        ("browser.safebrowsing.downloads.enabled".into(), "true".into()),
        ("browser.safebrowsing.downloads.remote.enabled".into(), "false".into()),
        ("browser.safebrowsing.downloads.remote.url".into(), quoted("")),
    ];
    let mut text = String::from(
        "// Written by `pir safebrowsing firefox-profile`: Safe Browsing through the pir proxy.\n",
    );
    for (name, value) in prefs {
        text.push_str(&format!("user_pref(\"{name}\", {value});\n"));
    }
    text
}
