//! Handles on a running capture that other threads use: signalling the traced processes,
//! telling whether a pid is one of them, and starting the collector's threads.

use super::*;

/// Sends signals to the traced processes of a [`Capture`] (from any thread).
#[derive(Clone)]
pub struct Signaller {
    pub(super) registry: Arc<Registry>,
    pub(super) root: u32,
    pub(super) root_start: Option<u64>,
}

impl Signaller {
    /// Sends `sig` to every traced process still running (QEMU's first), e.g. to
    /// forward a SIGTERM that this process received. Returns how many were signalled.
    /// A pid that a fork record named but that started before QEMU is never signalled
    /// (the program can write to the plugin's socket: records are not proof).
    pub fn signal(&self, sig: i32) -> usize {
        let mut pids = self.registry.running();
        pids.sort_by_key(|&p| p != self.root);
        let me = std::process::id();
        pids.into_iter()
            .filter(|&p| p > 1 && p != me && alive(p))
            .filter(|&p| {
                p == self.root
                    || start_time(p)
                        .zip(self.root_start)
                        .is_some_and(|(s, r)| s >= r)
            })
            // SAFETY: kill with a pid and a signal number touches no memory of ours.
            .filter(|&p| unsafe { libc::kill(p as libc::pid_t, sig) } == 0)
            .count()
    }
}

impl Signaller {
    /// Whether `pid` is (or was) a process of the traced tree: QEMU's, one a fork record
    /// announced or that connected, or a descendant of QEMU's now.
    pub(crate) fn is_traced(&self, pid: u32) -> bool {
        pid == self.root || self.registry.known(pid) || descends_from(pid, self.root)
    }
}

/// Whether `pid` is `root` or one of its descendants now (for [`crate::signals`]).
pub(crate) fn descends(pid: u32, root: u32) -> bool {
    descends_from(pid, root)
}

/// Starts thread `name` of the capture; an error (not a panic) when it cannot be started
/// (`ulimit -u`, memory). Test aid: `XLAT_TEST_FAIL_THREAD=NAME,…` makes those fail.
pub(crate) fn spawn_thread<T: Send + 'static>(
    name: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<std::thread::JoinHandle<T>, CaptureError> {
    let injected = std::env::var("XLAT_TEST_FAIL_THREAD")
        .is_ok_and(|v| v.split(',').any(|n| n == name))
        .then(|| std::io::Error::from_raw_os_error(libc::EAGAIN));
    let spawned = match injected {
        Some(e) => Err(e),
        None => std::thread::Builder::new()
            .name(format!("xlat-{name}"))
            .spawn(f),
    };
    spawned.map_err(|e| {
        CaptureError::Thread(format!(
            "cannot start the collector's {name} thread ({e}; at the limit of processes, \
             `ulimit -u`?): the capture stops"
        ))
    })
}
