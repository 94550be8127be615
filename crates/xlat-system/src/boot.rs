//! Booting the guest under `qemu-system-x86_64` (TCG) and reading its console.

use crate::SystemError;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering::Acquire};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The kallsyms boot copies ~95,000 lines through an emulated UART.
pub const KALLSYMS_TIMEOUT: Duration = Duration::from_secs(600);
/// After a SIGTERM (QEMU flushes the plugin's records and exits), how long to wait before
/// SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(20);
/// Console lines kept for error messages.
const TAIL: usize = 40;
/// After QEMU exits, how long its console pipe may stay open (held by a process it left
/// behind) before what was read is taken as the console.
const CONSOLE_GRACE: Duration = Duration::from_secs(5);
/// The longest console line kept whole.
const MAX_LINE: u64 = 64 << 10;

/// One boot of the guest.
#[derive(Clone, Debug)]
pub struct Boot {
    pub qemu: PathBuf,
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    /// Guest memory, MiB.
    pub mem_mib: u32,
    /// vCPUs (1 or more).
    pub smp: u32,
    /// Kernel parameters after the fixed ones.
    pub append: String,
    /// `-plugin` argument (path and its `,key=value` arguments).
    pub plugin: Option<String>,
    /// A second serial port (the guest's ttyS1) written to this file.
    pub second_serial: Option<PathBuf>,
}

/// What the guest's console said.
#[derive(Clone, Debug, Default)]
pub struct Console {
    /// The command's exit status (`XLAT-EXIT status=N`), if it got that far.
    pub status: Option<i32>,
    /// The kernel panicked (`Kernel panic` on the console).
    pub panicked: bool,
    /// The console's first `Kernel panic` line (it may be far above the tail: the stack
    /// dump after it has a varying length).
    pub panic_line: Option<String>,
    /// The last console lines (the command's output included).
    pub tail: Vec<String>,
}

/// A running guest.
pub struct Running {
    child: Child,
    console: JoinHandle<()>,
    /// What the console thread has read so far.
    seen: Arc<Mutex<Console>>,
}

/// How a guest ended.
#[derive(Debug)]
pub struct Ended {
    pub qemu: ExitStatus,
    pub console: Console,
    /// It was still running at the deadline and was stopped.
    pub timed_out: bool,
}

impl Boot {
    fn command(&self) -> Command {
        let mut c = Command::new(&self.qemu);
        // Kernel parameters: no KASLR (kallsyms addresses hold), no PTI (one CR3 per
        // process; qemu64 is an AMD model, so PTI would stay off anyway), a panic powers
        // off at once (with -no-reboot), no crypto self-tests (80 % of boot instructions).
        let append = format!(
            "console=ttyS0 nokaslr nopti panic=-1 quiet cryptomgr.notests {}",
            self.append
        );
        // Several vCPUs run on their own threads (multi-threaded TCG: round-robin TCG
        // passes plugins a wrong vCPU index in QEMU 10, see xlat-qemu-system).
        let accel = if self.smp > 1 {
            "tcg,thread=multi"
        } else {
            "tcg"
        };
        c.args(["-accel", accel, "-cpu", "qemu64", "-smp"])
            .arg(self.smp.max(1).to_string())
            .arg("-m")
            .arg(format!("{}M", self.mem_mib))
            .args([
                "-display",
                "none",
                "-monitor",
                "none",
                "-no-reboot",
                "-net",
                "none",
            ])
            .args(["-serial", "stdio"]);
        if let Some(f) = &self.second_serial {
            c.arg("-serial").arg(format!("file:{}", f.display()));
        }
        c.arg("-kernel").arg(&self.kernel);
        c.arg("-initrd").arg(&self.initrd);
        c.arg("-append").arg(append);
        if let Some(p) = &self.plugin {
            c.arg("-plugin").arg(p);
        }
        c.stdin(Stdio::null()).stdout(Stdio::piped());
        c
    }

    /// Starts QEMU; the command's output (between the console markers) goes to this
    /// process's standard output.
    pub fn spawn(&self) -> Result<Running, SystemError> {
        let mut child = self.command().spawn().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => SystemError::Missing {
                what: self.qemu.display().to_string(),
                package: crate::QEMU_PACKAGES.to_string(),
            },
            _ => SystemError::Guest(format!("cannot start {}: {e}", self.qemu.display())),
        })?;
        let out = child.stdout.take().expect("piped");
        let seen = Arc::new(Mutex::new(Console::default()));
        let s = seen.clone();
        let console = std::thread::spawn(move || read_console_into(out, &s));
        Ok(Running {
            child,
            console,
            seen,
        })
    }

    /// Boots, waits for the guest to power off (or the deadline), and fails unless it
    /// ended by itself with QEMU's status 0.
    pub fn run_to_end(&self, timeout: Duration) -> Result<Console, SystemError> {
        let end = self.spawn()?.wait(timeout);
        if end.timed_out || !end.qemu.success() || end.console.panicked {
            let last = end.console.tail.len().saturating_sub(8);
            return Err(SystemError::Guest(format!(
                "the guest {} ({}); its console ended with: {}",
                if end.timed_out {
                    "did not finish in time"
                } else if end.console.panicked {
                    "crashed (a kernel panic)"
                } else {
                    "failed"
                },
                end.qemu,
                end.console.tail[last..].join(" | ")
            )));
        }
        Ok(end.console)
    }
}

impl Running {
    /// QEMU's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until QEMU exits; at `timeout` asks it to stop (SIGTERM: the plugin sends
    /// what it holds), then kills it.
    pub fn wait(self, timeout: Duration) -> Ended {
        self.wait_or_stop(timeout, &AtomicBool::new(false))
    }

    /// [`Running::wait`], also stopping QEMU (SIGTERM, then SIGKILL) once `stop` is set
    /// (its records are no longer read). `timed_out` is only for the timeout.
    pub fn wait_or_stop(mut self, timeout: Duration, stop: &AtomicBool) -> Ended {
        let deadline = Instant::now() + timeout;
        let mut timed_out = false;
        let mut termed: Option<Instant> = None;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) => {}
                Err(_) => break self.child.wait().expect("wait for QEMU"),
            }
            let now = Instant::now();
            if termed.is_none() && (now > deadline || stop.load(Acquire)) {
                timed_out = now > deadline;
                termed = Some(now);
                // SAFETY: signals our own child.
                unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            }
            if termed.is_some_and(|t| now > t + TERM_GRACE) {
                let _ = self.child.kill();
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let exit = Instant::now();
        while !self.console.is_finished() && exit.elapsed() < CONSOLE_GRACE {
            std::thread::sleep(Duration::from_millis(20));
        }
        let console = self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Ended {
            qemu: status,
            console,
            timed_out,
        }
    }
}

#[cfg(test)]
fn read_console(out: impl std::io::Read) -> Console {
    let c = Mutex::new(Console::default());
    read_console_into(out, &c);
    c.into_inner().unwrap()
}

/// Reads QEMU's console into `seen` (line by line) until the pipe closes. A line longer
/// than [`MAX_LINE`] bytes is taken in pieces of that size (memory stays bounded whatever
/// the guest's command prints).
fn read_console_into(out: impl std::io::Read, seen: &Mutex<Console>) {
    let mut inside = false;
    let stdout = std::io::stdout();
    let mut r = BufReader::new(out);
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut r).take(MAX_LINE).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        let line = String::from_utf8_lossy(&line)
            .trim_end_matches('\r')
            .to_string();
        let mut c = seen.lock().unwrap_or_else(|e| e.into_inner());
        if line == "XLAT-BEGIN" {
            inside = true;
            continue;
        }
        if let Some(s) = line.strip_prefix("XLAT-EXIT status=") {
            inside = false;
            c.status = s.trim().parse().ok();
            continue;
        }
        if inside {
            let mut o = stdout.lock();
            let _ = writeln!(o, "{line}");
            let _ = o.flush();
        }
        if line.contains("Kernel panic") {
            c.panicked = true;
            c.panic_line.get_or_insert_with(|| line.clone());
        }
        if c.tail.len() == TAIL {
            c.tail.remove(0);
        }
        c.tail.push(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_without_end_is_read_in_bounded_pieces() {
        let mut text = vec![b'x'; 3 * MAX_LINE as usize + 10];
        text.extend_from_slice(b"\nXLAT-EXIT status=0\n");
        let c = read_console(&text[..]);
        assert_eq!(c.status, Some(0));
        assert_eq!(c.tail.len(), 4);
        assert!(c.tail.iter().all(|l| l.len() <= MAX_LINE as usize));
    }

    #[test]
    fn a_panic_line_is_kept_however_long_the_dump_after_it() {
        let mut text = String::from("XLAT-BEGIN\ngoing\n");
        text.push_str("[    3.0] Kernel panic - not syncing: sysrq triggered crash\n");
        for i in 0..(TAIL + 50) {
            text.push_str(&format!("[    3.1]  ? frame_{i}+0x10/0x20\n"));
        }
        let c = read_console(text.as_bytes());
        assert!(c.panicked);
        assert_eq!(
            c.panic_line.as_deref(),
            Some("[    3.0] Kernel panic - not syncing: sysrq triggered crash")
        );
        assert_eq!(c.tail.len(), TAIL);
        assert!(!c.tail.iter().any(|l| l.contains("Kernel panic")));
        assert_eq!(c.status, None);
    }
}
