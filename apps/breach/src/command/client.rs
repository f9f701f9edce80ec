//! The client commands: `pir breach servers` writes the servers file, `pir breach check`
//! checks one credential read from standard input, `pir breach proxy` answers the HIBP range
//! API on loopback.

use std::io::{BufRead, IsTerminal, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use pir_keys::PublicKey;

use super::{BreachCheckArgs, BreachProxyArgs, BreachServersArgs, CREDENTIAL_FOUND};
use crate::check::{Credential, Outcome, PRIVACY};
use crate::header::DbHeader;
use crate::proxy::RangeProxy;
use crate::{servers, BreachSession};

/// `pir breach servers`.
pub(super) fn write_servers(args: &BreachServersArgs) -> Result<()> {
    let servers = args
        .servers
        .iter()
        .map(|arg| pir_client::servers_file::parse_arg(arg))
        .collect::<Result<Vec<_>, _>>()?;
    let text = servers::encode(&servers)
        .context("give --server URL=SERVER.pub for server 0, then server 1")?;
    pir_fs::write_atomic_bytes(&args.out, text.as_bytes())
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!("servers file {}:", args.out.display());
    print!("{text}");
    Ok(())
}

/// Reads a servers file: `(URL, key)` of server 0, then server 1.
pub fn load_servers(path: &Path) -> Result<Vec<(String, PublicKey)>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    servers::parse(&text).with_context(|| format!("{}", path.display()))
}

/// A database id as `pir breach check --db` takes it: 64 hex digits.
pub fn parse_database_id(text: &str) -> Result<[u8; 32]> {
    hex::decode(text)
        .ok()
        .and_then(|bytes| <[u8; 32]>::try_from(bytes).ok())
        .with_context(|| {
            format!("--db {text}: a database id is 64 hex digits, as `pir breach serve` prints it")
        })
}

/// A session with the servers of servers file `path`, on their database `id` (64 hex
/// digits) or by default their first.
async fn open_session(path: &Path, id: Option<&str>) -> Result<(BreachSession, DbHeader)> {
    let servers = load_servers(path)?;
    let id = id.map(parse_database_id).transpose()?;
    crate::check::connect_database(&servers, id)
        .await
        .context("connecting to the breach servers")
}

/// Whether a prompted value is echoed as it is typed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Echo {
    Shown,
    Hidden,
}

/// Reads one line of standard input (without its line break). On a terminal it prompts, and
/// a `Hidden` value (the password) is read from the terminal with echo turned off.
fn read_secret_line(prompt: &str, echo: Echo) -> Result<Vec<u8>> {
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        if echo == Echo::Hidden {
            let typed = rpassword::prompt_password(format!("{prompt} (not shown): "))
                .with_context(|| format!("reading the {prompt} from the terminal"))?;
            return Ok(typed.into_bytes());
        }
        eprint!("{prompt}: ");
        std::io::stderr().flush()?;
    }
    read_line(&mut stdin.lock(), prompt)
}

/// Reads the `prompt` value, one line of `input` without its line break (`\n` or `\r\n`).
pub fn read_line(input: &mut impl BufRead, prompt: &str) -> Result<Vec<u8>> {
    let mut line = Vec::new();
    let read = input
        .read_until(b'\n', &mut line)
        .context("reading standard input")?;
    if read == 0 {
        bail!("standard input ended before the {prompt}: give it on its own line");
    }
    if line.last() == Some(&b'\n') {
        line.pop();
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Ok(line)
}

/// `pir breach check`.
pub(super) async fn check(args: &BreachCheckArgs) -> Result<ExitCode> {
    let (session, header) = open_session(&args.servers, args.db.as_deref()).await?;
    let (username, password);
    let credential = if header.corpus.is_sha1() {
        password = read_secret_line("password", Echo::Hidden)?;
        Credential::Password(&password)
    } else {
        username = read_secret_line("username", Echo::Shown)?;
        password = read_secret_line("password", Echo::Hidden)?;
        Credential::UserPassword {
            username: &username,
            password: &password,
        }
    };
    let outcome = crate::check::check(&session, &header, credential).await?;
    let report = CheckReport::of(outcome, args.json);
    if let Some(line) = &report.stderr {
        eprintln!("{line}");
    }
    println!("{}", report.stdout);
    Ok(ExitCode::from(report.code))
}

/// What `pir breach check` says about an outcome, and its exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckReport {
    /// The line on standard output: the result, or with `--json` one JSON object.
    pub stdout: String,
    /// The line on standard error (the privacy assumption; none with `--json`, whose object
    /// carries it).
    pub stderr: Option<String>,
    /// The exit code: 0 not found, [`CREDENTIAL_FOUND`] found.
    pub code: u8,
}

impl CheckReport {
    /// The report of `outcome`, as text or (`json`) one JSON object.
    pub fn of(outcome: Outcome, json: bool) -> Self {
        let (code, count) = match outcome {
            Outcome::Found { count } => (CREDENTIAL_FOUND, count),
            Outcome::NotFound => (0, None),
        };
        if json {
            let found = code == CREDENTIAL_FOUND;
            let report = serde_json::json!(
                { "found": found, "count": count, "privacy": PRIVACY.to_string() }
            );
            return CheckReport {
                stdout: report.to_string(),
                stderr: None,
                code,
            };
        }
        let stdout = match outcome {
            Outcome::Found { count: Some(count) } => {
                format!(
                    "found (seen {count} time{})",
                    if count == 1 { "" } else { "s" }
                )
            }
            Outcome::Found { count: None } => "found".to_string(),
            Outcome::NotFound => "not found".to_string(),
        };
        CheckReport {
            stdout,
            stderr: Some(format!("privacy: {PRIVACY}")),
            code,
        }
    }
}

/// Refuses a proxy address other than loopback: the proxy speaks plain HTTP and sees each
/// prefix in the clear.
pub fn loopback_only(listen: SocketAddr) -> Result<()> {
    if !listen.ip().is_loopback() {
        bail!(
            "the proxy speaks plain HTTP and sees each prefix in the clear: listen on a loopback \
             address such as 127.0.0.1:{}",
            listen.port()
        );
    }
    Ok(())
}

/// `pir breach proxy`: the range API on a bounded loopback listener (`pir_server::local`:
/// loopback `Host` names only, connection cap, timeouts).
pub(super) async fn proxy(args: &BreachProxyArgs) -> Result<()> {
    loopback_only(args.listen)?;
    let (session, header) = open_session(&args.servers, None).await?;
    let proxy = Arc::new(
        RangeProxy::new(session, header).context("this database cannot serve the range API")?,
    );
    let answer = |proxy: Arc<RangeProxy<_>>, request| async move { proxy.handle(request).await };
    let running = pir_server::local::start_shared(args.listen, proxy, answer)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    println!(
        "HIBP range proxy at http://{}/range/{{prefix}} (Ctrl-C stops)",
        running.addr
    );
    println!("privacy: {PRIVACY}");
    running.run_until_signal().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_read_without_its_line_break() {
        let mut input = &b"alice\r\nhunter2\nlast"[..];
        assert_eq!(read_line(&mut input, "username").unwrap(), b"alice");
        assert_eq!(read_line(&mut input, "password").unwrap(), b"hunter2");
        assert_eq!(read_line(&mut input, "password").unwrap(), b"last");
        let e = read_line(&mut input, "password").unwrap_err();
        assert!(e.to_string().contains("ended before the password"), "{e}");
        // An empty line is an empty password, not the end.
        assert_eq!(read_line(&mut &b"\n"[..], "password").unwrap(), b"");
    }

    #[test]
    fn reports_say_the_outcome_and_exit_with_its_code() {
        let found = CheckReport::of(Outcome::Found { count: Some(1) }, false);
        assert_eq!(found.stdout, "found (seen 1 time)");
        assert_eq!(found.code, CREDENTIAL_FOUND);
        assert!(found.stderr.unwrap().starts_with("privacy: "));
        let many = CheckReport::of(Outcome::Found { count: Some(3) }, false);
        assert_eq!(many.stdout, "found (seen 3 times)");
        assert_eq!(
            CheckReport::of(Outcome::Found { count: None }, false).stdout,
            "found"
        );
        let missing = CheckReport::of(Outcome::NotFound, false);
        assert_eq!((missing.stdout.as_str(), missing.code), ("not found", 0));

        let json = CheckReport::of(Outcome::Found { count: Some(3) }, true);
        assert_eq!((json.stderr, json.code), (None, CREDENTIAL_FOUND));
        let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
        assert_eq!(value["found"], true);
        assert_eq!(value["count"], 3);
        assert_eq!(value["privacy"], PRIVACY.to_string());
        let json = CheckReport::of(Outcome::NotFound, true);
        assert_eq!(json.code, 0);
        let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
        assert_eq!(
            (&value["found"], &value["count"]),
            (&false.into(), &serde_json::Value::Null)
        );
    }

    #[test]
    fn database_ids_are_64_hex_digits() {
        let id = "ab".repeat(32);
        assert_eq!(parse_database_id(&id).unwrap(), [0xab; 32]);
        for bad in ["ab", "zz".repeat(32).as_str(), &"ab".repeat(33)] {
            let e = parse_database_id(bad).unwrap_err();
            assert!(e.to_string().contains("64 hex digits"), "{e}");
        }
    }

    #[test]
    fn the_proxy_listens_on_loopback_only() {
        assert!(loopback_only("127.0.0.1:8080".parse().unwrap()).is_ok());
        assert!(loopback_only("[::1]:8080".parse().unwrap()).is_ok());
        let e = loopback_only("0.0.0.0:8080".parse().unwrap()).unwrap_err();
        assert!(e.to_string().contains("127.0.0.1:8080"), "{e}");
    }
}
