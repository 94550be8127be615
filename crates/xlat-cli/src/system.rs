//! `xlat trace --system`: a whole guest (Debian's kernel, busybox, the command) to `.xlt`.

use crate::capture::{finish_trace, label, Dest, Shared, TraceArgs};
use anyhow::{bail, Context, Result};
use std::cell::RefCell;
use std::io::Write;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};
use xlat_system::{Guest, SystemCapture, SystemError, QEMU_PACKAGES};
use xlat_trace::{Header, TraceWriter};
use xlat_types::{Event, EventSource, PageSize};

const BATCH: usize = 1 << 16;

/// The oldest QEMU whose plugin API (v4) the system plugin needs.
const QEMU_MIN: (u32, u32) = (10, 0);

/// Where guests are cached: `$XLAT_GUEST_CACHE`, else `$XDG_CACHE_HOME/xlat/guest`, else
/// `~/.cache/xlat/guest` (never a shared directory such as `/tmp`: another user could put
/// a guest there first).
fn cache_dir() -> Result<PathBuf> {
    if let Some(d) = std::env::var_os("XLAT_GUEST_CACHE") {
        return Ok(d.into());
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .context("no directory for the guest cache: set XLAT_GUEST_CACHE (or HOME)")?;
    Ok(base.join("xlat").join("guest"))
}

/// `qemu-system-x86_64` (`$XLAT_QEMU_SYSTEM` overrides), checked to be QEMU ≥ 10.0.
fn qemu() -> Result<PathBuf> {
    let q = std::env::var_os("XLAT_QEMU_SYSTEM")
        .map(PathBuf::from)
        .unwrap_or_else(|| "qemu-system-x86_64".into());
    let missing = || SystemError::Missing {
        what: q.display().to_string(),
        package: QEMU_PACKAGES.to_string(),
    };
    let out = std::process::Command::new(&q)
        .arg("--version")
        .output()
        .map_err(|_| missing())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text
        .split_whitespace()
        .skip_while(|w| *w != "version")
        .nth(1)
        .and_then(|v| {
            let mut p = v.split('.').map(|x| x.parse::<u32>().ok());
            Some((p.next()??, p.next()??))
        });
    match version {
        Some(v) if v >= QEMU_MIN => Ok(q),
        Some((a, b)) => bail!(
            "{} is QEMU {a}.{b}; system capture needs QEMU {}.{} or newer (plugin API v4 \
             reads registers): install {QEMU_PACKAGES}",
            q.display(),
            QEMU_MIN.0,
            QEMU_MIN.1
        ),
        None => bail!(
            "cannot tell the version of {}: {}",
            q.display(),
            text.trim()
        ),
    }
}

/// Quotes `args` into one `sh -c` string (a single argument is taken as shell code).
fn shell_command(args: &[std::ffi::OsString]) -> String {
    if args.len() == 1 {
        return args[0].to_string_lossy().into_owned();
    }
    args.iter()
        .map(|a| {
            let a = a.to_string_lossy();
            if !a.is_empty()
                && a.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
            {
                a.into_owned()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `xlat trace --system`. Returns the command's exit status in the guest.
pub fn trace(a: &TraceArgs) -> Result<i32> {
    let out = a.output.as_ref().expect("clap requires --output");
    let qemu = qemu()?;
    let plugin = xlat_capture::locate_plugin(
        None,
        "XLAT_QEMU_SYSTEM_PLUGIN",
        xlat_system::PLUGIN_FILE,
        "xlat-qemu-system",
    )?;
    let cache = cache_dir()?;
    let pb = crate::progress::bar(String::new());
    let guest = Guest::ensure(
        &cache,
        &qemu,
        a.image,
        a.kernel.as_deref(),
        &mut |step| pb.set_message(format!("building the guest in {}: {step}", cache.display())),
        &mut |note| pb.suspend(|| eprintln!("xlat: note: {note}")),
    );
    pb.finish_and_clear();
    let guest = guest?;
    let command = shell_command(&a.program);
    let header = Header::new("x86_64", PageSize::K4)
        .with_meta("source", "qemu-system")
        .with_meta("command", label(&a.program))
        .with_meta("kernel", guest.package.clone())
        .with_meta(
            "image",
            match guest.image {
                xlat_system::Image::Busybox => "busybox".to_string(),
                xlat_system::Image::Debian => format!(
                    "debian {} ({})",
                    xlat_system::DEBIAN_SUITE,
                    xlat_system::DEBIAN_PACKAGES.join(", ")
                ),
            },
        )
        .with_meta("kallsyms", guest.kallsyms.display().to_string())
        .with_meta("fetch", "per basic block")
        // Idle records' lengths are nanoseconds of the guest's time (the vCPU halted).
        .with_meta("idle", "ns")
        .with_meta("cpus", a.smp.to_string());
    let dest = Shared(Rc::new(RefCell::new(
        Dest::create(out).with_context(|| format!("cannot create {}", out.display()))?,
    )));
    let mut w = TraceWriter::with_level(dest.clone(), header, a.level)
        .with_context(|| format!("writing {}", out.display()))?;
    let mut sink = dest.clone();
    let t = Instant::now();
    let mut cap = SystemCapture::start(
        &guest,
        qemu,
        plugin,
        &command,
        &xlat_system::Options {
            timeout: Duration::from_secs(a.timeout),
            mem_mib: a.mem,
            copy_in: a.copy_in.clone(),
            smp: a.smp,
        },
    )?;
    let pb = crate::progress::bar("events captured (kernel and user)".to_string());
    let mut buf: Vec<Event> = Vec::with_capacity(BATCH);
    let mut blocks = 0;
    let mut failed = None;
    loop {
        buf.clear();
        match cap.fill(&mut buf, BATCH) {
            Ok(more) => {
                w.write_all(&buf)
                    .with_context(|| format!("writing {}", out.display()))?;
                if w.summary().blocks != blocks {
                    blocks = w.summary().blocks;
                    sink.flush()
                        .with_context(|| format!("writing {}", out.display()))?;
                }
                pb.inc(buf.len() as u64);
                if !more {
                    break;
                }
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    pb.finish_and_clear();
    let o = cap.finish();
    let end = &o.ended;
    if o.stats.refused.count() > 0 {
        eprintln!(
            "xlat: warning: {} connection(s) to the capture's socket refused (not the system \
             plugin's in the QEMU xlat started): {}",
            o.stats.refused.count(),
            o.stats.refused
        );
    }
    if !o.stats.connected {
        // Nothing of the guest was recorded: an existing -o file stays as it was (the
        // output is never committed).
        drop((w, sink, dest));
        print_console(end);
        let mut why = failed.map_or_else(
            || format!("QEMU ended ({}) before the xlat plugin connected", end.qemu),
            |e| e.to_string(),
        );
        if end.timed_out {
            why.push_str(&format!(" (stopped at --timeout {} s)", a.timeout));
        }
        bail!(
            "the guest did not boot under the plugin: {why}; nothing was written to {}",
            out.display()
        );
    }
    let mut meta = vec![
        (
            "duration_s".to_string(),
            format!("{:.3}", t.elapsed().as_secs_f64()),
        ),
        ("address_spaces".to_string(), o.stats.spaces.to_string()),
        (
            "address_spaces_ended".to_string(),
            o.stats.spaces_freed.to_string(),
        ),
        (
            "privilege_changes".to_string(),
            o.stats.mode_changes.to_string(),
        ),
        (
            "exit".to_string(),
            end.console
                .status
                .map_or("unknown".to_string(), |s| format!("exit status: {s}")),
        ),
    ];
    for (pid, name) in &o.stats.programs {
        meta.push(("program".to_string(), format!("pid {pid} exec 0: {name}")));
    }
    // Why the trace is cut short, if it is.
    let problem = if let Some(e) = &failed {
        Some(format!("the capture failed: {e}"))
    } else if end.timed_out {
        Some(format!(
            "the guest did not finish within {} s (--timeout) and was stopped",
            a.timeout
        ))
    } else if end.console.panicked {
        Some("the guest kernel crashed (a kernel panic)".to_string())
    } else if !o.stats.complete {
        Some(format!(
            "the guest ended ({}) before the command finished",
            end.qemu
        ))
    } else {
        None
    };
    if let Some(p) = &problem {
        meta.push(("truncated".to_string(), p.clone()));
    }
    drop(sink);
    let s = finish_trace(w, meta, dest, out)?;
    let bytes = std::fs::metadata(out)?.len();
    eprintln!(
        "xlat: {} events ({} refs, a basic block once; {} instructions, {} loads, {} stores) \
         from {} address space(s) in {:.2} s to {}: {} bytes",
        s.events(),
        s.refs(),
        s.instructions,
        s.count(xlat_trace::EventKind::Load),
        s.count(xlat_trace::EventKind::Store),
        o.stats.spaces,
        t.elapsed().as_secs_f64(),
        out.display(),
        bytes,
    );
    if let Some(p) = problem {
        print_console(end);
        bail!(
            "{p}; {} holds what was recorded until then (marked truncated)",
            out.display()
        );
    }
    Ok(end.console.status.unwrap_or(0))
}

/// The guest kernel's panic line (if it scrolled out of the tail) and the console's last
/// lines, on stderr.
fn print_console(end: &xlat_system::Ended) {
    if let Some(l) = end
        .console
        .panic_line
        .as_ref()
        .filter(|l| !end.console.tail.contains(l))
    {
        eprintln!("xlat: the guest kernel said: {l}");
    }
    if end.console.tail.is_empty() {
        return;
    }
    eprintln!("xlat: the guest's console ended with:");
    for l in &end.console.tail {
        eprintln!("  {l}");
    }
}

#[cfg(test)]
mod tests {
    use super::shell_command;

    #[test]
    fn arguments_are_quoted_for_the_guest_shell() {
        let v = |a: &[&str]| a.iter().map(|s| s.into()).collect::<Vec<_>>();
        assert_eq!(shell_command(&v(&["ls | wc -l"])), "ls | wc -l");
        assert_eq!(
            shell_command(&v(&["dd", "if=/dev/zero", "bs=4k"])),
            "dd if=/dev/zero bs=4k"
        );
        assert_eq!(
            shell_command(&v(&["echo", "a b", "it's"])),
            r"echo 'a b' 'it'\''s'"
        );
    }
}
