//! The two servers of `pir oram`: `store` (a slot directory served to its owner over HTTPS)
//! and `nbd` (the oblivious store exported as a block device).

use std::path::Path;

use anyhow::{bail, Context, Result};

use super::{blocking, open, OramNbdArgs, OramStoreArgs, OramStoreSettings};
use crate::nbd::export::{self, ExportOptions, ExportStats};
use crate::nbd::listen::{self, Listener};
use crate::nbd::psk::{self, PskKeys};
use crate::remote::StoreService;

pub(super) async fn serve_store(flags: &OramStoreArgs) -> Result<()> {
    let Some(settings) = flags.config.load::<OramStoreSettings, _>(flags)? else {
        return Ok(());
    };
    let Some(owner_file) = &settings.owner else {
        bail!(
            "pir oram store needs --owner CLIENT.pub: the store serves only the client holding \
             that key (`pir oram owner --state STATE` makes it beside the client's state, as \
             STATE.client.pub)"
        );
    };
    let owner = pir_keys::PublicKey::load(owner_file)
        .with_context(|| format!("cannot read the owner key {}", owner_file.display()))?;
    let mut host = pir_host::Host::new(&settings.common).with_context(|| {
        format!(
            "cannot read the store key {}",
            settings.common.key.display()
        )
    })?;
    host.owner = Some(owner);
    super::one_client(&mut host.options);
    let service = std::sync::Arc::new(
        StoreService::open(&settings.dir)
            .with_context(|| format!("cannot open the store {}", settings.dir.display()))?,
    );
    let dir = settings.dir.display().to_string();
    pir_host::serve_static(host, service, "the store", |running, key| {
        vec![format!(
            "serving an oblivious slot store from {dir} at https://{} with key {} to its owner {} \
             only (Ctrl-C or SIGTERM stops)",
            running.addr,
            key.public().fingerprint(),
            owner.fingerprint()
        )]
    })
    .await
}

/// The listener and TLS of `pir oram nbd`, checked against the address policy.
async fn nbd_listener(args: &OramNbdArgs) -> Result<(Listener, ExportOptions)> {
    let mut options = ExportOptions {
        max_connections: args.max_connections,
        idle_timeout: (args.idle_timeout_seconds > 0)
            .then(|| std::time::Duration::from_secs(args.idle_timeout_seconds)),
        grace: std::time::Duration::from_secs(args.grace_seconds),
        ..ExportOptions::default()
    };
    if let Some(file) = &args.tls_psk {
        let keys = PskKeys::load(file)?;
        options.tls = Some(psk::server_context(std::sync::Arc::new(keys))?);
    }
    let listener = match args.listen {
        Some(addr) => {
            let policy = listen::Policy {
                allow_remote: args.allow_remote,
                tls: options.tls.is_some(),
            };
            if let Some(warning) = listen::check_tcp(addr, policy).map_err(anyhow::Error::msg)? {
                eprintln!("{warning}");
            } else if options.tls.is_none() {
                eprintln!(
                    "note: every local user can connect to {addr}; the default Unix socket (or --tls-psk) admits only you"
                );
            }
            Listener::tcp(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))?
        }
        None => {
            let path = args
                .socket
                .clone()
                .unwrap_or_else(|| socket_path(super::nodes::nbd_state(args)));
            Listener::unix(&path).with_context(|| format!("cannot listen on {}", path.display()))?
        }
    };
    Ok((listener, options))
}

/// The default socket beside the state: `STATE.sock`, absolute so the printed URI works
/// from any directory.
fn socket_path(state: &Path) -> std::path::PathBuf {
    let mut name = state.as_os_str().to_owned();
    name.push(".sock");
    std::path::absolute(&name).unwrap_or_else(|_| name.into())
}

pub(super) async fn serve_nbd(args: &OramNbdArgs) -> Result<()> {
    let (listener, options) = nbd_listener(args).await?;
    if args.balancer.is_some() {
        let disk = super::nodes::open_balanced(args).await?;
        return export_device(disk, listener, options).await;
    }
    let state = super::nodes::nbd_state(args).to_path_buf();
    let disk = blocking(move |rt| open(&state, rt)).await?;
    export_device(disk, listener, options).await
}

/// Exports an opened device until Ctrl-C or SIGTERM, then flushes and closes it.
async fn export_device<D: crate::device::BlockDevice>(
    disk: D,
    listener: Listener,
    options: ExportOptions,
) -> Result<()> {
    let uri = listener.uri(options.tls.is_some());
    println!(
        "serving an oblivious store of {} bytes at {uri} (Ctrl-C or SIGTERM flushes and stops)",
        disk.size()
    );
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot watch SIGTERM")?;
    let shutdown = async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
    };
    let stats = std::sync::Arc::new(ExportStats::default());
    match export::serve(disk, listener, options, stats, shutdown).await {
        Ok(()) => {
            println!("flushed and closed cleanly");
            Ok(())
        }
        Err(e) => Err(anyhow::Error::new(e).context(
            "the store was NOT closed cleanly: writes after the last acknowledged flush may be lost; the next open recovers the last flushed state",
        )),
    }
}
