//! The one rule for tests that need an external tool or data set, shared by every test tree
//! (`crates/cli/tests/support` uses it as a module, other crates' tests include it by path).

/// Whether a test may use an external tool or data set: `true` if `available`; otherwise, in
/// CI (`CI=true`), the test fails (CI installs everything, so a missing tool is a broken set-up,
/// never a pass), and outside CI it prints what to install and is skipped.
pub fn require(available: bool, what: &str, install: &str) -> bool {
    if available {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{what} is missing in CI: {install}");
    }
    println!("SKIPPED: {what} is missing ({install})");
    false
}
