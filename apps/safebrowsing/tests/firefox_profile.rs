//! `pir safebrowsing firefox-profile` as a library: the preferences that point Firefox's
//! Safe Browsing v4 provider at the local proxy, and the profile directory that holds them.

use pir_safebrowsing::command::{firefox_prefs, write_firefox_profile};

/// The value of `user_pref("NAME", VALUE);` in `text`, if set exactly once.
fn pref<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let start = format!("user_pref(\"{name}\", ");
    let mut values = text
        .lines()
        .filter_map(|line| line.strip_prefix(start.as_str())?.strip_suffix(");"));
    let value = values.next()?;
    values.next().is_none().then_some(value)
}

#[test]
fn the_google4_provider_points_at_the_proxy_and_nothing_reaches_google() {
    let text = firefox_prefs("http://127.0.0.1:8470/");
    let provider = "browser.safebrowsing.provider.google4";
    assert_eq!(
        pref(&text, &format!("{provider}.updateURL")),
        Some(
            "\"http://127.0.0.1:8470/v4/threatListUpdates:fetch?$ct=application/x-protobuf&key=pir&$httpMethod=POST\""
        ),
        "one slash between the proxy and the path"
    );
    assert_eq!(
        pref(&text, &format!("{provider}.gethashURL")),
        Some(
            "\"http://127.0.0.1:8470/v4/fullHashes:find?$ct=application/x-protobuf&key=pir&$httpMethod=POST\""
        )
    );
    // Firefox ESR's default google4 tables, each from the proxy; Google's own providers off.
    let tables = "goog-malware-proto,goog-phish-proto,goog-unwanted-proto,goog-badbinurl-proto,goog-downloadwhite-proto";
    for (name, value) in [
        (format!("{provider}.pver"), "\"4\"".to_string()),
        (format!("{provider}.lists"), format!("\"{tables}\"")),
        (
            "urlclassifier.malwareTable".into(),
            "\"goog-malware-proto,goog-unwanted-proto\"".into(),
        ),
        (
            "urlclassifier.phishTable".into(),
            "\"goog-phish-proto\"".into(),
        ),
        (
            "browser.safebrowsing.provider.google5.enabled".into(),
            "false".into(),
        ),
        (
            "browser.safebrowsing.downloads.remote.enabled".into(),
            "false".into(),
        ),
        (
            "browser.safebrowsing.downloads.remote.url".into(),
            "\"\"".into(),
        ),
    ] {
        assert_eq!(pref(&text, &name), Some(value.as_str()), "{name}");
    }
    // Every URL Firefox would call is the proxy's or empty.
    for line in text.lines().filter(|l| l.contains("URL\"")) {
        assert!(
            line.contains("\"http://127.0.0.1:8470/v4/") || line.ends_with(", \"\");"),
            "{line}"
        );
    }
    assert!(!text.contains("google.com") && !text.contains("googleapis"));
    assert!(text.starts_with("// Written by `pir safebrowsing firefox-profile`"));
}

#[test]
fn the_profile_holds_the_prefs_and_replaces_an_older_user_js() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("profiles/pir");
    let url = write_firefox_profile(&profile, "http://localhost:8470/").unwrap();
    assert_eq!(url, "http://localhost:8470");
    let user_js = profile.join("user.js");
    assert_eq!(
        std::fs::read_to_string(&user_js).unwrap(),
        firefox_prefs("http://localhost:8470")
    );
    write_firefox_profile(&profile, "http://[::1]:9000").unwrap();
    let text = std::fs::read_to_string(&user_js).unwrap();
    assert!(
        text.contains("\"http://[::1]:9000/v4/fullHashes:find"),
        "{text}"
    );
    assert!(!text.contains("localhost"), "the old user.js is replaced");
}

#[test]
fn a_proxy_that_is_not_plain_http_on_this_machine_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("pir");
    for proxy in [
        "https://127.0.0.1:8470",
        "127.0.0.1:8470",
        "http://192.0.2.1:8470",
        "http://127.0.0.1.example.com:8470",
        "http://127.0.0.1@example.com",
        "http://[::2]:8470",
    ] {
        assert!(
            write_firefox_profile(&profile, proxy).is_err(),
            "{proxy} accepted"
        );
    }
    assert!(!profile.exists(), "nothing written for a refused proxy");
}
