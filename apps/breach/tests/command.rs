//! `pir_breach::command` without the binary: the flags and settings of `pir breach`, and
//! breach servers opened and started in this process ([`open_service`], [`start_server`])
//! answering real private checks over HTTPS on 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Parser;
use pir_breach::build::{build_file, key_path_for, BuildOptions};
use pir_breach::check::{check, Credential, Outcome};
use pir_breach::command::{
    build_options, load_servers, open_service, start_server, BreachCommand, BreachServeSettings,
    QdpPolicyArg, ServerPlan, StartedServer,
};
use pir_breach::corpus::{BadLines, CorpusFormat};
use pir_breach::credential::HashKind;
use pir_breach::BreachSession;
use pir_keys::SecretKey;
use pir_service::qdp::SharedSeedStore;
use pir_service::Backend;
use pir_xor::qdp::SeedStore;

/// `pir breach ...` as the binary parses it.
#[derive(Parser)]
struct Pir {
    #[command(subcommand)]
    command: BreachCommand,
}

fn parse(args: &[&str]) -> BreachCommand {
    Pir::try_parse_from(std::iter::once("breach").chain(args.iter().copied()))
        .unwrap()
        .command
}

/// `pir breach serve`'s settings from config file `text` (read from /etc/pir/breach.toml).
fn settings(text: &str) -> anyhow::Result<BreachServeSettings> {
    let file = format!("key = \"server.key\"\nlisten = \"127.0.0.1:0\"\n{text}");
    pir_host::settings::resolve_text(
        Some((&file, Path::new("/etc/pir/breach.toml"))),
        &toml::Table::new(),
    )
}

#[test]
fn serve_settings_take_defaults_and_name_seed_states_after_the_database() {
    let one = settings("db = \"a.db\"\nserver = 1\n").unwrap();
    assert_eq!((one.qdp_policy, one.qdp_queue), (QdpPolicyArg::Half, 500));
    let db = PathBuf::from("/etc/pir/a.db");
    assert_eq!(one.db.paths(), vec![db.clone()]);
    assert_eq!(
        one.seed_state_of(&db),
        PathBuf::from("/etc/pir/a.db.seeds-1")
    );
    let chosen = settings("db = \"a.db\"\nserver = 0\nseed_state = \"s\"\n").unwrap();
    assert_eq!(chosen.seed_state_of(&db), PathBuf::from("/etc/pir/s"));
    let key = SecretKey::generate().unwrap();
    let plan = ServerPlan::of(&one, &db, &key, &db);
    assert_eq!(
        (plan.server, plan.queue, plan.four_russians),
        (1, 500, None)
    );
}

#[test]
fn serve_settings_refuse_what_cannot_be_served() {
    for (text, says) in [
        ("db = \"a.db\"\nserver = 2\n", "server must be 0 or 1"),
        (
            "db = \"a.db\"\nserver = 0\nfour_russians = 9\n",
            "four_russians",
        ),
        ("db = []\nserver = 0\n", "no database"),
        (
            "db = [\"a.db\", \"b.db\"]\nserver = 0\nseed_state = \"s\"\n",
            "--seed-state and --blinding-key do not apply",
        ),
    ] {
        let e = settings(text).unwrap_err();
        assert!(format!("{e:#}").contains(says), "{text}: {e:#}");
    }
}

#[test]
fn build_flags_become_build_options() {
    let BreachCommand::Build(args) = parse(&[
        "build",
        "creds.txt",
        "--format",
        "pairs",
        "--out",
        "x.db",
        "--credential-hash",
        "sha256",
        "--skip-bad-lines",
        "--prefix-bits",
        "3",
    ]) else {
        panic!("not a build");
    };
    let options = build_options(&args).unwrap();
    assert_eq!(options.format, CorpusFormat::Pairs);
    assert_eq!(options.credential_hash, HashKind::Sha256);
    assert_eq!(options.bad_lines, BadLines::Skip);
    assert_eq!(options.prefix_bits, Some(3));
    let BreachCommand::Build(args) = parse(&[
        "build",
        "in",
        "--format",
        "hibp",
        "--out",
        "x",
        "--argon2-memory-kib",
        "64",
        "--blinding-key",
        "/nonexistent/x.key",
    ]) else {
        panic!("not a build");
    };
    assert_eq!(args.argon2_memory_kib, 64);
    assert!(build_options(&args).is_err(), "a missing blinding key file");
}

/// A password-list database of `passwords` in `dir`, named `name`.
fn password_db(dir: &Path, name: &str, passwords: &[&str]) -> PathBuf {
    let corpus = dir.join(format!("{name}.txt"));
    std::fs::write(&corpus, passwords.join("\n")).unwrap();
    let out = dir.join(name);
    let options = BuildOptions::new(CorpusFormat::Passwords);
    build_file(&corpus, &out, &options, &mut rand::rng(), &mut |_, _| {}).unwrap();
    out
}

/// A username:password database in `dir` (SHA-256 credential hash: quick), and its key file.
fn pairs_db(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let corpus = dir.join(format!("{name}.txt"));
    std::fs::write(&corpus, "alice:hunter2\nbob:letmein\n").unwrap();
    let out = dir.join(name);
    let mut options = BuildOptions::new(CorpusFormat::Pairs);
    options.credential_hash = HashKind::Sha256;
    build_file(&corpus, &out, &options, &mut rand::rng(), &mut |_, _| {}).unwrap();
    let key = key_path_for(&out);
    (out, key)
}

#[test]
fn open_service_opens_a_database_and_reserves_its_seeds() {
    let dir = tempfile::tempdir().unwrap();
    let db = password_db(dir.path(), "a.db", &["123456", "hunter2"]);
    let key = SecretKey::generate().unwrap();
    let seed_state = dir.path().join("a.db.seeds-0");
    let metrics = Arc::new(pir_service::Metrics::default());
    let mut plan = ServerPlan::loopback(&db, &key, 0, &seed_state);
    plan.four_russians = Some(2);
    let seeds = SharedSeedStore::new(&seed_state);
    let (service, header, shape) = open_service(&plan, &seeds, &metrics).unwrap();
    assert_eq!(header.corpus, CorpusFormat::Passwords);
    assert_eq!(service.backend().qdp().server(), 0);
    assert_eq!(shape, header.shape().unwrap());
    // Seeds are reserved durably before any is handed out, so a restart never repeats one.
    assert!(SharedSeedStore::new(&seed_state).load().unwrap() > 0);

    let missing = dir.path().join("missing.db");
    let plan = ServerPlan::loopback(&missing, &key, 0, &seed_state);
    assert!(open_service(&plan, &seeds, &metrics).is_err());
    let plan = ServerPlan::loopback(&db, &key, 2, &seed_state);
    let e = open_service(&plan, &seeds, &metrics).unwrap_err();
    assert!(format!("{e:#}").contains("server position 2"), "{e:#}");
}

#[test]
fn open_service_takes_only_the_blinding_key_of_its_database() {
    let dir = tempfile::tempdir().unwrap();
    let (a, a_key) = pairs_db(dir.path(), "a.db");
    let (_, b_key) = pairs_db(dir.path(), "b.db");
    let key = SecretKey::generate().unwrap();
    let seed_state = dir.path().join("seeds");
    let seeds = SharedSeedStore::new(&seed_state);
    let metrics = Arc::new(pir_service::Metrics::default());
    let mut plan = ServerPlan::loopback(&a, &key, 1, &seed_state);
    plan.blinding_key = Some(&b_key);
    assert!(open_service(&plan, &seeds, &metrics).is_err());
    plan.blinding_key = Some(&a_key);
    let (service, header, _) = open_service(&plan, &seeds, &metrics).unwrap();
    assert_eq!(header.corpus, CorpusFormat::Pairs);
    drop(service);
    // Without the key the server still starts (the other server holds it).
    plan.blinding_key = None;
    assert!(open_service(&plan, &seeds, &metrics).is_ok());
}

/// Both servers of `db`, started in this process on 127.0.0.1, and a session to them.
async fn deployment(
    dir: &Path,
    dbs: &[&Path],
    keys: &[SecretKey; 2],
) -> (Vec<StartedServer>, BreachSession) {
    let mut servers = Vec::new();
    for (server, key) in keys.iter().enumerate() {
        let seed_states: Vec<PathBuf> = (0..dbs.len())
            .map(|k| dir.join(format!("seeds-{k}-{server}")))
            .collect();
        let plans: Vec<ServerPlan<'_>> = (dbs.iter().zip(&seed_states))
            .map(|(db, seeds)| {
                let mut plan = ServerPlan::loopback(db, key, server, seeds);
                plan.queue = 4;
                plan
            })
            .collect();
        servers.push(start_server(&plans).await.unwrap());
    }
    let list: Vec<(String, pir_keys::PublicKey)> = (servers.iter())
        .map(|s| (format!("https://{}", s.running.addr), s.public_key))
        .collect();
    let session = BreachSession::open(&list).await.unwrap();
    (servers, session)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn started_servers_answer_private_checks_over_https() {
    let dir = tempfile::tempdir().unwrap();
    let first = password_db(dir.path(), "a.db", &["123456", "hunter2", "letmein"]);
    let second = password_db(dir.path(), "b.db", &["correct horse"]);
    let keys = [
        SecretKey::generate().unwrap(),
        SecretKey::generate().unwrap(),
    ];
    let (servers, session) = deployment(dir.path(), &[&first, &second], &keys).await;
    assert_eq!(servers[0].public_key, keys[0].public());
    assert_eq!(servers[1].served.current().len(), 2);
    let header = pir_breach::header::DbHeader::decode(session.header()).unwrap();
    // The first database is the default, the one the session was opened on.
    assert_eq!(
        servers[0].service().backend().database_id(),
        &header.database_id()
    );
    let found = check(&session, &header, Credential::Password(b"hunter2")).await;
    assert!(matches!(found.unwrap(), Outcome::Found { .. }));
    let missing = check(&session, &header, Credential::Password(b"correct horse")).await;
    assert_eq!(missing.unwrap(), Outcome::NotFound);
    for server in servers {
        server.running.shutdown().await;
    }
    assert!(start_server(&[]).await.is_err(), "no database");
}

#[test]
fn servers_files_are_written_from_url_and_key_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let mut args = Vec::new();
    for name in ["s0", "s1"] {
        let public = dir.path().join(format!("{name}.pub"));
        SecretKey::generate()
            .unwrap()
            .public()
            .save(&public)
            .unwrap();
        args.push(format!("https://127.0.0.1:8443={}", public.display()));
    }
    let out = dir.path().join("servers");
    let command = parse(&[
        "servers",
        "--server",
        &args[0],
        "--server",
        &args[1],
        "--out",
        out.to_str().unwrap(),
    ]);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let code = runtime.block_on(pir_breach::command::run(command)).unwrap();
    assert_eq!(code, std::process::ExitCode::SUCCESS);
    let servers = load_servers(&out).unwrap();
    assert_eq!(servers.len(), 2);
    assert_eq!(servers[0].0, "https://127.0.0.1:8443");
    // One server is not a deployment.
    let one = parse(&[
        "servers",
        "--server",
        &args[0],
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(runtime.block_on(pir_breach::command::run(one)).is_err());
}
