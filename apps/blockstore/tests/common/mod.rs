//! A small NBD client and export fixture for the export's tests (loopback and Unix sockets).
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::path::Path;
use std::sync::Arc;

use pir_blockstore::nbd::export::{self, ExportError, ExportOptions, ExportStats};
use pir_blockstore::nbd::listen::Listener;
use pir_blockstore::{Disk, StoreSpec};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Creates and opens a disk of `size` bytes with `block`-byte blocks in `dir`.
pub fn disk(dir: &Path, size: u64, block: u32) -> Disk {
    let state = dir.join("state");
    Disk::init(
        &state,
        size,
        block,
        &[StoreSpec::Dir(dir.join("store"))],
        None,
    )
    .unwrap();
    Disk::open(&state, None).unwrap()
}

/// A running export.
pub struct Running {
    pub stats: Arc<ExportStats>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub task: tokio::task::JoinHandle<Result<(), ExportError>>,
}

impl Running {
    pub fn start(disk: Disk, listener: Listener, options: ExportOptions) -> Running {
        let stats = Arc::new(ExportStats::default());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(export::serve(
            disk,
            listener,
            options,
            stats.clone(),
            async {
                let _ = stopped.await;
            },
        ));
        Running {
            stats,
            stop: Some(stop),
            task,
        }
    }

    /// Asks the export to stop and returns how it ended.
    pub async fn stop(mut self) -> Result<(), ExportError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.await.unwrap()
    }
}

pub const OPT_STARTTLS: u32 = 5;
pub const OPT_GO: u32 = 7;
pub const REP_ACK: u32 = 1;
pub const REP_ERR_TLS_REQD: u32 = (1 << 31) + 5;

/// Reads the greeting and sends the client flags (fixed newstyle, no zeroes).
pub async fn greet<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) -> std::io::Result<()> {
    let mut greeting = [0u8; 18];
    s.read_exact(&mut greeting).await?;
    assert_eq!(&greeting[..8], b"NBDMAGIC");
    s.write_all(&3u32.to_be_bytes()).await
}

/// Sends one option.
pub async fn option<S: AsyncWrite + Unpin>(s: &mut S, option: u32, data: &[u8]) {
    let mut out = b"IHAVEOPT".to_vec();
    out.extend_from_slice(&option.to_be_bytes());
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
    s.write_all(&out).await.unwrap();
}

/// Reads one option reply: (reply type, data).
pub async fn option_reply<S: AsyncRead + Unpin>(s: &mut S) -> std::io::Result<(u32, Vec<u8>)> {
    let mut head = [0u8; 20];
    s.read_exact(&mut head).await?;
    let kind = u32::from_be_bytes(head[12..16].try_into().unwrap());
    let len = u32::from_be_bytes(head[16..20].try_into().unwrap());
    let mut data = vec![0u8; len as usize];
    s.read_exact(&mut data).await?;
    Ok((kind, data))
}

/// `NBD_OPT_GO` for the default export; `Ok(())` once transmission starts, else the refusal.
pub async fn go<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) -> Result<(), u32> {
    option(s, OPT_GO, &[0, 0, 0, 0, 0, 0]).await;
    loop {
        let (kind, _) = option_reply(s).await.map_err(|_| 0u32)?;
        match kind {
            REP_ACK => return Ok(()),
            3 => continue,
            other => return Err(other),
        }
    }
}

/// Sends one request (simple replies: structured replies were not negotiated).
pub async fn send<S: AsyncWrite + Unpin>(
    s: &mut S,
    command: u16,
    cookie: u64,
    offset: u64,
    length: u32,
    data: &[u8],
) -> std::io::Result<()> {
    let mut out = Vec::with_capacity(28 + data.len());
    out.extend_from_slice(&0x2560_9513u32.to_be_bytes());
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&command.to_be_bytes());
    out.extend_from_slice(&cookie.to_be_bytes());
    out.extend_from_slice(&offset.to_be_bytes());
    out.extend_from_slice(&length.to_be_bytes());
    out.extend_from_slice(data);
    s.write_all(&out).await
}

/// Reads one simple reply: (error, cookie); `data_len` bytes follow a successful read.
pub async fn reply<S: AsyncRead + Unpin>(
    s: &mut S,
    data_len: usize,
) -> std::io::Result<(u32, u64, Vec<u8>)> {
    let mut head = [0u8; 16];
    s.read_exact(&mut head).await?;
    let error = u32::from_be_bytes(head[4..8].try_into().unwrap());
    let cookie = u64::from_be_bytes(head[8..16].try_into().unwrap());
    let mut data = vec![0u8; if error == 0 { data_len } else { 0 }];
    s.read_exact(&mut data).await?;
    Ok((error, cookie, data))
}

/// Writes `data` at `offset`, flushes, reads it back.
pub async fn write_flush_read<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    offset: u64,
    data: &[u8],
) -> Vec<u8> {
    send(s, 1, 1, offset, data.len() as u32, data)
        .await
        .unwrap();
    assert_eq!(reply(s, 0).await.unwrap().0, 0);
    send(s, 3, 2, 0, 0, &[]).await.unwrap();
    assert_eq!(reply(s, 0).await.unwrap().0, 0);
    send(s, 0, 3, offset, data.len() as u32, &[]).await.unwrap();
    let (error, cookie, back) = reply(s, data.len()).await.unwrap();
    assert_eq!((error, cookie), (0, 3));
    back
}

/// Whether this process runs as root (needed to act as a second local user).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}
