//! Where the NBD export listens, and who may reach it.
//!
//! The export hands out the decrypted disk, so by default only its owner reaches it: a Unix
//! socket created mode 0600 (other local users cannot connect), or a TCP port on loopback.
//! Anything else must be asked for explicitly ([`Policy::allow_remote`]) and needs TLS with a
//! pre-shared key, as nbdkit and qemu-nbd require for exports beyond the machine.

use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use tokio::net::{TcpListener, UnixListener};

/// A bound listening socket.
#[derive(Debug)]
pub enum Listener {
    /// A TCP port.
    Tcp(TcpListener),
    /// A Unix socket (removed again when the listener is dropped).
    Unix(UnixListener, UnixPath),
}

/// The path of a Unix socket this process created; removed on drop.
#[derive(Debug)]
pub struct UnixPath(PathBuf);

impl Drop for UnixPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// What a listen request is allowed to do.
#[derive(Clone, Copy, Debug, Default)]
pub struct Policy {
    /// A non-loopback TCP address was asked for explicitly.
    pub allow_remote: bool,
    /// The export requires TLS with a pre-shared key.
    pub tls: bool,
}

/// Checks a TCP address against `policy`: loopback is always allowed; anything else only with
/// `allow_remote` and TLS. Returns the warning to print for a non-loopback address.
pub fn check_tcp(addr: SocketAddr, policy: Policy) -> Result<Option<String>, String> {
    if addr.ip().is_loopback() {
        return Ok(None);
    }
    if !policy.allow_remote {
        return Err(format!(
            "{addr} is not a loopback address: the export would hand the decrypted disk to \
             other machines; pass --allow-remote (with --tls-psk FILE) if that is meant"
        ));
    }
    if !policy.tls {
        return Err(format!(
            "listening on {addr} needs --tls-psk FILE (a psktool key file): without it anyone \
             who reaches the port reads and writes the disk"
        ));
    }
    Ok(Some(format!(
        "warning: exporting the disk on {addr}, beyond this machine; only clients holding a key \
         of the PSK file can connect, but anyone can try"
    )))
}

impl Listener {
    /// Binds a TCP address (after [`check_tcp`]).
    pub async fn tcp(addr: SocketAddr) -> std::io::Result<Listener> {
        Ok(Listener::Tcp(TcpListener::bind(addr).await?))
    }

    /// Binds a Unix socket at `path`, mode 0600 from the moment it appears there: it is
    /// created in a fresh private directory beside `path`, restricted, then renamed into
    /// place. A stale socket (nothing listening) is replaced; anything else is refused.
    pub fn unix(path: &Path) -> std::io::Result<Listener> {
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_socket() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    format!("{} exists and is not a socket", path.display()),
                ));
            }
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::AddrInUse,
                    format!("another server is listening on {}", path.display()),
                ));
            }
        }
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let private = parent.join(format!(".pir-nbd-{:016x}", rand::random::<u64>()));
        std::fs::DirBuilder::new().mode(0o700).create(&private)?;
        let staged = private.join("sock");
        let bound = UnixListener::bind(&staged).and_then(|listener| {
            std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))?;
            std::fs::rename(&staged, path)?;
            Ok(listener)
        });
        let _ = std::fs::remove_file(&staged);
        let _ = std::fs::remove_dir(&private);
        Ok(Listener::Unix(bound?, UnixPath(path.to_path_buf())))
    }

    /// The URI an NBD client uses (libnbd syntax), `tls` giving the `nbds` schemes.
    pub fn uri(&self, tls: bool) -> String {
        let s = if tls { "s" } else { "" };
        match self {
            Listener::Tcp(l) => match l.local_addr() {
                Ok(addr) => format!("nbd{s}://{addr}"),
                Err(_) => format!("nbd{s}://?"),
            },
            Listener::Unix(_, path) => format!("nbd{s}+unix:///?socket={}", path.0.display()),
        }
    }

    /// The TCP address, if TCP.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match self {
            Listener::Tcp(l) => l.local_addr().ok(),
            Listener::Unix(..) => None,
        }
    }
}

/// File descriptors kept free for the store files, the state and the runtime.
const RESERVED_FILES: u64 = 64;

/// The most connections worth accepting: `wanted`, but never so many that the open-file limit
/// (the soft `RLIMIT_NOFILE`) runs out and the store cannot open its files.
pub fn connection_cap(wanted: usize) -> usize {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    match limit {
        Some(limit) => {
            let room = usize::try_from(limit.saturating_sub(RESERVED_FILES)).unwrap_or(usize::MAX);
            wanted.min(room).max(1)
        }
        None => wanted.max(1),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn only_loopback_without_asking_and_never_remote_without_tls() {
        let local: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let v6: SocketAddr = "[::1]:1".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:1".parse().unwrap();
        assert_eq!(check_tcp(local, Policy::default()), Ok(None));
        assert_eq!(check_tcp(v6, Policy::default()), Ok(None));
        assert!(check_tcp(any, Policy::default()).is_err());
        let no_tls = Policy {
            allow_remote: true,
            tls: false,
        };
        assert!(check_tcp(any, no_tls).unwrap_err().contains("--tls-psk"));
        let ok = Policy {
            allow_remote: true,
            tls: true,
        };
        assert!(check_tcp(any, ok).unwrap().unwrap().starts_with("warning"));
        assert!(connection_cap(1 << 40) < 1 << 40);
        assert_eq!(connection_cap(3), 3);
    }

    #[tokio::test]
    async fn unix_socket_is_0600_replaces_stale_and_refuses_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nbd.sock");
        let listener = Listener::unix(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(
            Listener::unix(&path).is_err(),
            "a live socket is not replaced"
        );
        assert!(listener.uri(true).starts_with("nbds+unix:///?socket="));
        // Only the socket is left beside it (the staging directory is gone).
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        drop(listener);
        assert!(!path.exists());
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        assert!(Listener::unix(&file).is_err());
    }
}
