//! The flags of `pir oram init|info|owner|put|get|store|nbd`, and the settings of `pir oram
//! store` (flags and `--config` merged by `pir-host`).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};

/// `pir oram ...`.
#[derive(Debug, Subcommand)]
pub enum OramCommand {
    /// Create an oblivious store: the client state STATE, its key STATE.key (mode 0600), and
    /// the slot files in every --store directory.
    ///
    /// Keep STATE and STATE.key on a disk you trust; the stores may be anywhere (a rented
    /// server's disk, a network mount). Stores take about 9x the size (sealed slots, dummies,
    /// and two regions per level for crash safety), allocated sparsely.
    Init(OramInitArgs),
    /// Show the store's shape, storage and client memory.
    Info(OramStateArgs),
    /// Make the owner key STATE.client.key (mode 0600) and STATE.client.pub, if missing.
    ///
    /// Remote stores (`pir oram store --owner STATE.client.pub`) serve only the holder of this
    /// key. Run it before `pir oram init` with remote stores, and once for a state made before
    /// stores checked their owner (then restart its stores with --owner).
    Owner(OramStateArgs),
    /// Write FILE into the store at --at (bytes), then flush.
    Put(OramPutArgs),
    /// Read --length bytes at --at from the store into FILE.
    Get(OramGetArgs),
    /// Serve a store directory to its owner over HTTPS (pinned to KEY, from `pir keygen`).
    ///
    /// The store is dumb and untrusted: it keeps sealed slots and reads or writes the slot
    /// ranges it is asked for; it never sees a key or which block is which. It serves one
    /// client, the holder of --owner's key (mutual TLS); clients name it in `pir oram init
    /// --store https://HOST:PORT=KEY.pub`. Stores made before owners existed: run `pir oram
    /// owner --state STATE` on the client and restart the store with `--owner
    /// STATE.client.pub`.
    Store(OramStoreArgs),
    /// Export the store as a Network Block Device, by default on the Unix socket STATE.sock
    /// (mode 0600: only you can connect).
    ///
    /// Any NBD client works unchanged: `nbdinfo 'nbd+unix:///?socket=STATE.sock'`, `nbdcopy
    /// image.raw 'nbd+unix:///?socket=STATE.sock'`, `qemu-img convert -O raw
    /// 'nbd+unix:///?socket=STATE.sock' out.raw`. `--listen 127.0.0.1:PORT` serves on loopback
    /// (every local user can connect there unless --tls-psk is given); any other address also
    /// needs --allow-remote and --tls-psk (TLS with a pre-shared key: `nbdcopy
    /// 'nbds://HOST:PORT/?tls-psk-file=FILE&tls-username=NAME'`). A flush (NBD_CMD_FLUSH, or a
    /// write with FUA) is acknowledged only when the data and the client state are durable.
    /// Ctrl-C or SIGTERM finishes queued requests, flushes and closes; if the store fails or
    /// the flush does not finish within --grace-seconds, it exits non-zero and says so.
    Nbd(OramNbdArgs),
    /// Serve the disk STATE as an ORAM node to one balancer over HTTPS (pinned to KEY, from
    /// `pir keygen`).
    ///
    /// A node is an oblivious disk of its own (`pir oram init --state STATE --size SIZE
    /// --store ...`, SIZE from `pir oram node-size`) that a balancer (`pir oram balancer`)
    /// spreads its blocks over. It serves only the holder of --owner's key (the balancer's
    /// BSTATE.client.pub; default STATE.owner.pub). A flush from the balancer is acknowledged
    /// only when the node's stores and state are durable; a node killed at any point restarts
    /// at its last flush, which is all the balancer relies on.
    Node(super::node_args::OramNodeArgs),
    /// Create a balancer: one block device of --size over the running --node servers, so
    /// that which node serves a request reveals nothing about which block it is.
    ///
    /// Make the owner key first (`pir oram owner --state BSTATE`) and start every node with
    /// `--owner BSTATE.client.pub`. Then export it with `pir oram nbd --balancer BSTATE`.
    Balancer(super::node_args::OramBalancerArgs),
    /// Print the size each of --nodes nodes must have for a balancer of --size (pass it to
    /// `pir oram init --size` of every node).
    NodeSize(super::node_args::OramNodeSizeArgs),
}

/// The client state file.
#[derive(Debug, Args)]
pub struct OramStateArgs {
    /// The client state (its key is STATE.key).
    #[arg(long, value_name = "STATE")]
    pub state: PathBuf,
}

/// `pir oram init`.
#[derive(Debug, Args)]
pub struct OramInitArgs {
    /// The client state to create (its key goes to STATE.key).
    #[arg(long, value_name = "STATE")]
    pub state: PathBuf,
    /// Logical size, e.g. 64MiB or 1GiB.
    #[arg(long, value_name = "SIZE")]
    pub size: String,
    /// Block size: a power of two from 512 bytes to 64KiB.
    #[arg(long, value_name = "SIZE", default_value = "4KiB")]
    pub block: String,
    /// A store: a directory, or a `pir oram store` server as https://HOST:PORT=STORE.pub
    /// (its public key file). Repeat to spread partitions over several stores.
    #[arg(long, value_name = "STORE", required = true)]
    pub store: Vec<String>,
}

/// `pir oram put`.
#[derive(Debug, Args)]
pub struct OramPutArgs {
    // The state flag, documented in `OramStateArgs` (a doc comment here would be its help).
    #[allow(missing_docs)]
    #[command(flatten)]
    pub state: OramStateArgs,
    /// Byte offset in the store.
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    pub at: u64,
    /// The file to write into the store.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

/// `pir oram get`.
#[derive(Debug, Args)]
pub struct OramGetArgs {
    // The state flag, documented in `OramStateArgs` (a doc comment here would be its help).
    #[allow(missing_docs)]
    #[command(flatten)]
    pub state: OramStateArgs,
    /// Byte offset in the store.
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    pub at: u64,
    /// Bytes to read (default: to the end of the store).
    #[arg(long, value_name = "BYTES")]
    pub length: Option<u64>,
    /// Where to write them (replaced atomically).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

/// `pir oram nbd`.
#[derive(Debug, Args)]
pub struct OramNbdArgs {
    /// The client state (its key is STATE.key).
    #[arg(
        long,
        value_name = "STATE",
        required_unless_present = "balancer",
        conflicts_with = "balancer"
    )]
    pub state: Option<PathBuf>,
    /// Export a disk over ORAM nodes instead: the balancer state BSTATE (`pir oram balancer`).
    #[arg(long, value_name = "BSTATE")]
    pub balancer: Option<PathBuf>,
    /// With --balancer: the nodes as https://HOST:PORT=NODE.pub, all of them in their
    /// original order, when one moved or was replaced (default: those recorded).
    #[arg(long, value_name = "NODE", requires = "balancer")]
    pub node: Vec<String>,
    /// TCP address to listen on instead of the Unix socket (port 0 picks a free port; the
    /// address is printed). Loopback unless --allow-remote.
    #[arg(long, value_name = "ADDR", conflicts_with = "socket")]
    pub listen: Option<SocketAddr>,
    /// The Unix socket to create, mode 0600 (default STATE.sock).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Allow a --listen address beyond loopback (needs --tls-psk).
    #[arg(long, requires = "listen")]
    pub allow_remote: bool,
    /// Require TLS with a pre-shared key from FILE (psktool's format, `username:hexkey`
    /// lines; make one with `psktool -u NAME -p FILE`).
    #[arg(long, value_name = "FILE")]
    pub tls_psk: Option<PathBuf>,
    /// Most NBD connections at once (also kept below the open-file limit).
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub max_connections: usize,
    /// Close a connection with nothing in flight after this many quiet seconds (0: never).
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    pub idle_timeout_seconds: u64,
    /// On SIGTERM or Ctrl-C, time allowed for queued requests and the final flush.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub grace_seconds: u64,
}

/// `pir oram store`. Every setting can also come from a TOML file (`--config`).
#[derive(Debug, Args, Serialize)]
#[command(mut_arg("config", |arg| arg.help(
    "TOML file with any of: dir, owner and the settings every server takes (key, \
     listen, grace_seconds, admin_listen, max_connections, header_timeout_seconds, \
     body_timeout_seconds, memory_budget_mib, ...: the flag names with `_`; flags \
     win)"
)))]
pub struct OramStoreArgs {
    // `--config` (its help is set above: the keys of this command) and `--print-config`.
    #[allow(missing_docs)]
    #[command(flatten)]
    #[serde(skip)]
    pub config: pir_host::ConfigArgs,
    /// The directory holding the slots (created if missing).
    #[arg(long, value_name = "DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    /// The public key of the one client this store serves (`pir oram owner --state STATE`
    /// makes it as STATE.client.pub). Every other client is refused in the TLS handshake,
    /// before any slot is read or written. Required.
    #[arg(long, value_name = "CLIENT.pub")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<PathBuf>,
    // Documented flag by flag in `CommonArgs` (a doc comment here would be clap's help text).
    #[allow(missing_docs)]
    #[command(flatten)]
    #[serde(flatten)]
    pub common: pir_host::settings::CommonArgs,
}

/// The settings of `pir oram store` after defaults, file and flags are merged.
#[derive(Debug, Serialize, Deserialize)]
pub struct OramStoreSettings {
    /// The directory holding the slots.
    pub dir: PathBuf,
    /// The owner's public key file (required to serve; checked when serving, so that
    /// `--print-config` works without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<PathBuf>,
    /// The settings every server takes.
    #[serde(flatten)]
    pub common: pir_host::settings::Common,
}

/// Why `workers` and `batch_window_ms` are refused: a store's one client sends its slot I/O
/// in order, so the store always answers on one worker with no batching window.
const ONE_CLIENT: &str = "pir oram store serves one client whose slot reads and writes \
     come in order: it always answers on one worker with no batching window, so --workers \
     and --batch-window-ms (workers, batch_window_ms in --config) do not apply; remove them";

impl pir_host::Settings for OramStoreSettings {
    const KEYS: &'static [&'static str] = &["dir", "owner"];
    const PATHS: &'static [&'static str] = &["dir", "owner"];

    fn defaults() -> toml::Table {
        let mut defaults =
            pir_host::settings::Common::defaults(pir_host::settings::DEFAULT_RETIRE_SECONDS);
        defaults.insert(
            "listen".into(),
            toml::Value::String("127.0.0.1:8460".into()),
        );
        // What the store runs with (`command::one_client`), so --print-config says so.
        defaults.insert("batch_window_ms".into(), toml::Value::Integer(0));
        defaults
    }

    fn validate(&self) -> anyhow::Result<()> {
        if self.common.workers.is_some() || self.common.batch_window_ms != 0 {
            anyhow::bail!("{ONE_CLIENT}");
        }
        Ok(())
    }

    fn common(&self) -> &pir_host::settings::Common {
        &self.common
    }
}
