//! The open-file limit: connection caps that fit under it, and an accept loop that backs off
//! when the process runs out of file descriptors instead of spinning on the error.
//!
//! Every connection is a file descriptor. A cap above the soft `RLIMIT_NOFILE` limit (1,024 by
//! default on many systems) lets an idle flood take every descriptor, after which the server
//! can open neither its database on reload nor an outgoing connection, and `accept` fails in a
//! loop. So the caps are clamped to the limit minus the descriptors already open minus
//! [`FD_RESERVE`], once, at start.

use std::time::Duration;

/// Descriptors kept free for everything that is not an accepted connection: database files
/// opened on reload, log files, outgoing connections of a proxy, the runtime's own.
pub const FD_RESERVE: usize = 64;

/// How many more descriptors the process may open beyond [`FD_RESERVE`]: the soft
/// `RLIMIT_NOFILE` limit minus those open now. `None` when unlimited or unknown.
pub fn open_file_room() -> Option<usize> {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    let soft = usize::try_from(limit.current?).ok()?;
    let open = open_descriptors().unwrap_or(0);
    Some(soft.saturating_sub(open).saturating_sub(FD_RESERVE))
}

/// The soft `RLIMIT_NOFILE` limit (`None`: unlimited).
pub fn open_file_limit() -> Option<u64> {
    rustix::process::getrlimit(rustix::process::Resource::Nofile).current
}

/// Descriptors open now (Linux: the entries of `/proc/self/fd`).
fn open_descriptors() -> Option<usize> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count())
}

/// Splits the descriptors left (`room`) between listeners that want `wanted[i]` connections
/// each: unchanged if they all fit, else every listener gets at most an equal share of the
/// room (small listeners keep what they asked for when it is below that share), and at least
/// one.
pub fn fit_caps(wanted: &[usize], room: Option<usize>) -> Vec<usize> {
    let Some(room) = room else {
        return wanted.to_vec();
    };
    if wanted.iter().sum::<usize>() <= room {
        return wanted.to_vec();
    }
    // Water-filling: listeners below the fair share keep their wish; the others share the rest.
    let mut caps = wanted.to_vec();
    let mut order: Vec<usize> = (0..wanted.len()).collect();
    order.sort_by_key(|&i| wanted[i]);
    let mut left = room;
    for (k, &i) in order.iter().enumerate() {
        let share = left / (wanted.len() - k);
        caps[i] = wanted[i].min(share).max(1);
        left = left.saturating_sub(caps[i]);
    }
    caps
}

/// How the accept loop reacts to failures: a failure for lack of descriptors (or memory) is
/// logged once per episode and waited out with a growing pause (up to a second); other
/// failures (a connection reset before it was accepted) are retried at once.
#[derive(Debug, Default)]
pub struct AcceptBackoff {
    pause: Duration,
    failures: u64,
}

/// The longest pause between two accepts while descriptors are exhausted.
pub const MAX_ACCEPT_PAUSE: Duration = Duration::from_secs(1);

impl AcceptBackoff {
    /// After a failed accept: how long to pause, and whether to log it (only the first of an
    /// episode).
    pub fn failed(&mut self, error: &std::io::Error) -> (Duration, bool) {
        if !is_exhaustion(error) {
            return (Duration::ZERO, false);
        }
        self.failures += 1;
        self.pause = if self.pause.is_zero() {
            Duration::from_millis(10)
        } else {
            (self.pause * 2).min(MAX_ACCEPT_PAUSE)
        };
        (self.pause, self.failures == 1)
    }

    /// After an accept succeeded: the episode's failures if one just ended.
    pub fn succeeded(&mut self) -> Option<u64> {
        self.pause = Duration::ZERO;
        (self.failures > 0).then(|| std::mem::take(&mut self.failures))
    }
}

/// EMFILE, ENFILE, ENOBUFS, ENOMEM: the process or system is out of something that frees up
/// only when connections close.
fn is_exhaustion(error: &std::io::Error) -> bool {
    use rustix::io::Errno;
    error.raw_os_error().is_some_and(|code| {
        let errno = Errno::from_raw_os_error(code);
        errno == Errno::MFILE
            || errno == Errno::NFILE
            || errno == Errno::NOBUFS
            || errno == Errno::NOMEM
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_fit_the_room_and_small_listeners_keep_theirs() {
        assert_eq!(fit_caps(&[4096, 16], None), vec![4096, 16]);
        assert_eq!(fit_caps(&[100, 16], Some(1000)), vec![100, 16]);
        assert_eq!(fit_caps(&[4096, 16], Some(960)), vec![944, 16]);
        assert_eq!(fit_caps(&[4096, 16, 4096], Some(960)), vec![472, 16, 472]);
        assert_eq!(fit_caps(&[4096], Some(0)), vec![1]);
    }

    #[test]
    fn exhaustion_is_logged_once_and_paused_on_up_to_a_second() {
        let mut backoff = AcceptBackoff::default();
        let emfile = std::io::Error::from_raw_os_error(rustix::io::Errno::MFILE.raw_os_error());
        let mut logged = 0;
        let mut last = Duration::ZERO;
        for _ in 0..100 {
            let (pause, log) = backoff.failed(&emfile);
            logged += usize::from(log);
            assert!(pause >= last && pause <= MAX_ACCEPT_PAUSE);
            last = pause;
        }
        assert_eq!(logged, 1);
        assert_eq!(last, MAX_ACCEPT_PAUSE);
        assert_eq!(backoff.succeeded(), Some(100));
        assert_eq!(backoff.succeeded(), None);
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert_eq!(backoff.failed(&reset), (Duration::ZERO, false));
    }
}
