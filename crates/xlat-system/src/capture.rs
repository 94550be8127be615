//! A system capture: the guest runs one command under the system plugin; the plugin's
//! records become one [`Event`] stream.
//!
//! Address spaces: the first page-table root (CR3) recorded is the stream's first
//! process ([`Pid::INIT`]); each new root is a new process ([`Event::Spawn`], then
//! [`Event::Switch`]), a root seen again is a switch back, and a root the kernel frees
//! (`pgd_free`) ends its process ([`Event::Exit`]). A root freed and later reused is a new
//! process. The kernel half is one global area ([`KERNEL_HALF`]), mapped before anything
//! else: kernel translations are shared by every address space.
//!
//! Several vCPUs (`--smp`): the plugin sends a `cpu` record when the running vCPU changes,
//! then that vCPU's address space and privilege, so the stream stays one sequence of
//! switches ([`Event::Cpu`] marks where each CPU's stretch starts).

use crate::boot::{Boot, Ended};
use crate::channel::{Channel, Guarded, Limits, Refusals};
use crate::guest::{Guest, FREE_SYMBOL, HOOKS, START_SYMBOL};
use crate::SystemError;
use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;
use xlat_capture::wire;
use xlat_capture::{decode, Control};
use xlat_types::{Event, EventSource, MapFlags, Pid, Privilege, Prot, Tid, VirtAddr};

/// The x86-64 kernel half `[2^64 − 2^47, 2^64 − 4096)` (the top page, never mapped by
/// Linux, is left out so the range's end fits 64 bits).
pub const KERNEL_HALF: (u64, u64) = (0xffff_8000_0000_0000, (1 << 47) - 4096);
/// Where the guest kernel (no KASLR, 4-level paging) maps physical memory: page-table
/// roots are freed by their address here.
const DIRECT_MAP: u64 = 0xffff_8880_0000_0000;
/// The kernel image mapping (`__START_KERNEL_map`): the boot page tables live there.
const KERNEL_MAP: u64 = 0xffff_ffff_8000_0000;

/// Counts of what the capture saw.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Address spaces (processes of the stream).
    pub spaces: u64,
    /// Address spaces that ended.
    pub spaces_freed: u64,
    /// Privilege changes.
    pub mode_changes: u64,
    /// vCPUs that ran while recording (the highest one seen + 1; 0 when no `cpu` record
    /// came: one vCPU).
    pub cpus: u32,
    /// `cpu` records (one per chunk of a vCPU's records; consecutive ones may name the
    /// same vCPU).
    pub cpu_records: u64,
    /// The plugin saw the stop marker (the trace holds the whole command).
    pub complete: bool,
    /// The program names of the processes that exec'd while recording (`__set_task_comm`;
    /// the others, forks and processes older than the recording, are not named).
    pub programs: Vec<(u32, String)>,
    /// The plugin connected and was heard: the stream is the guest's (else nothing was
    /// recorded).
    pub connected: bool,
    /// Connections to the capture's socket that were not the plugin's, refused.
    pub refused: Refusals,
}

/// How the capture ended.
#[derive(Debug)]
pub struct Outcome {
    pub ended: Ended,
    pub stats: Stats,
}

/// How to run the guest.
#[derive(Clone, Debug)]
pub struct Options {
    /// Stop the guest after this long.
    pub timeout: Duration,
    /// Guest memory in MiB (`None`: the image's default).
    pub mem_mib: Option<u32>,
    /// A host directory the guest sees as `/work` (where the command starts).
    pub copy_in: Option<PathBuf>,
    /// vCPUs: with more than one, the stream carries `Cpu` events and the kernel's
    /// shootdowns (`native_flush_tlb_multi`) as `Shootdown` events.
    pub smp: u32,
}

/// A running system capture (an [`EventSource`]).
pub struct SystemCapture {
    rx: Receiver<Result<Vec<Event>, SystemError>>,
    pending: Vec<Event>,
    pos: usize,
    waiter: Option<JoinHandle<Ended>>,
    reader: Option<JoinHandle<Stats>>,
    /// The initramfs with a directory copied in, kept until QEMU is done with it.
    _staged: Option<crate::copyin::Staged>,
}

impl SystemCapture {
    /// Boots `guest` and runs `command` (a `sh -c` string) in it under `plugin`.
    pub fn start(
        guest: &Guest,
        qemu: PathBuf,
        plugin: PathBuf,
        command: &str,
        opts: &Options,
    ) -> Result<SystemCapture, SystemError> {
        let timeout = opts.timeout;
        use base64::Engine;
        let syms = guest.symbols()?;
        let sym = |s: &str| {
            syms.addr(s)
                .ok_or_else(|| SystemError::Guest(format!("the guest kernel has no symbol {s}")))
        };
        let (start, free) = (sym(START_SYMBOL)?, sym(FREE_SYMBOL)?);
        let channel = Channel::open()?;
        let cmd = base64::engine::general_purpose::STANDARD.encode(command);
        // A directory copied in: the image's archive and the directory's, one file.
        let staged = match &opts.copy_in {
            Some(d) => Some(crate::copyin::stage(&guest.initrd, d)?),
            None => None,
        };
        let boot = Boot {
            qemu,
            kernel: guest.kernel.clone(),
            initrd: staged
                .as_ref()
                .map_or_else(|| guest.initrd.clone(), |s| s.initrd()),
            mem_mib: opts.mem_mib.unwrap_or(guest.image.default_mem_mib()),
            smp: opts.smp,
            append: format!("xlat.cmd={cmd}"),
            plugin: Some(format!(
                "{},sock={},start={start:x},free={free:x}{}",
                plugin.display(),
                channel.path().display(),
                HOOKS
                    .iter()
                    .filter_map(|(arg, s)| syms.addr(s).map(|a| format!(",{arg}={a:x}")))
                    .collect::<String>()
            )),
            second_serial: None,
        };
        if boot.append.len() > 1900 {
            return Err(SystemError::Guest(format!(
                "the command is too long for the kernel command line ({} bytes base64, at most 1900)",
                boot.append.len()
            )));
        }
        let running = boot.spawn()?;
        let qemu_pid = running.pid();
        // `exited`: QEMU ended (set by the waiter); `stop`: the reader failed, stop QEMU.
        let exited = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (ex, st) = (exited.clone(), stop.clone());
        let waiter = std::thread::spawn(move || {
            let e = running.wait_or_stop(timeout, &st);
            ex.store(true, Release);
            e
        });
        let (tx, rx) = sync_channel(4);
        let reader = std::thread::spawn(move || {
            let mut st = Stats::default();
            let mut spaces = Spaces::default();
            let lim = Limits::default();
            let r = channel
                .accept(qemu_pid, &exited, &lim, &mut st.refused)
                .and_then(|s| {
                    st.connected = true;
                    Guarded::new(s, exited.clone(), lim)
                        .map_err(|e| SystemError::Guest(format!("the system plugin's stream: {e}")))
                })
                .and_then(|s| read(s, &tx, &mut st, &mut spaces));
            if let Err(e) = r {
                stop.store(true, Release);
                let _ = tx.send(Err(e));
            }
            drop(channel);
            st.programs = spaces.names.into_iter().collect();
            st.programs.sort();
            st
        });
        Ok(SystemCapture {
            rx,
            pending: Vec::new(),
            pos: 0,
            waiter: Some(waiter),
            reader: Some(reader),
            _staged: staged,
        })
    }

    /// Waits for the guest to end (call after the stream ended).
    pub fn finish(mut self) -> Outcome {
        let stats = self
            .reader
            .take()
            .and_then(|r| r.join().ok())
            .unwrap_or_default();
        let ended = self
            .waiter
            .take()
            .expect("waiter")
            .join()
            .expect("waiter thread");
        Outcome { ended, stats }
    }
}

impl EventSource for SystemCapture {
    type Error = SystemError;

    fn fill(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<bool, SystemError> {
        buf.clear();
        loop {
            if self.pos < self.pending.len() {
                let n = (self.pending.len() - self.pos).min(max);
                buf.extend_from_slice(&self.pending[self.pos..self.pos + n]);
                self.pos += n;
                return Ok(true);
            }
            match self.rx.recv() {
                Ok(Ok(v)) => {
                    self.pending = v;
                    self.pos = 0;
                }
                Ok(Err(e)) => return Err(e),
                Err(_) => return Ok(false),
            }
        }
    }
}

/// Reads the plugin's stream (after its hello, [`Channel::accept`]) into event batches,
/// one per chunk. (Gathering the chunks already waiting into larger batches, as the
/// user-mode collector does, was measured in session 50 and left out: the consumer here
/// writes a trace, QEMU's vCPU thread bounds the capture, and the reader's CPU grew.)
fn read(
    s: Guarded,
    tx: &SyncSender<Result<Vec<Event>, SystemError>>,
    st: &mut Stats,
    spaces: &mut Spaces,
) -> Result<(), SystemError> {
    let bad = |m: String| SystemError::Guest(format!("the system plugin's stream: {m}"));
    let mut s = std::io::BufReader::with_capacity(1 << 20, s);
    let mut words: Vec<u64> = Vec::new();
    // The kernel half, mapped after the kernel's large-page areas (which the plugin sends
    // first): its base pages fill the gaps around them.
    let mut half = Some(Event::Mmap {
        addr: VirtAddr(KERNEL_HALF.0),
        len: KERNEL_HALF.1,
        prot: Prot::RWX,
        flags: MapFlags(MapFlags::GLOBAL),
    });
    loop {
        let mut head = [0u8; 8];
        match s.read_exact(&mut head) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                if let Some(h) = half.take() {
                    let _ = tx.send(Ok(vec![h]));
                }
                return Ok(());
            }
            Err(e) => return Err(bad(e.to_string())),
        }
        let n = (u64::from_ne_bytes(head) >> 32) as usize;
        if n == 0 || n > wire::MAX_CHUNK_WORDS as usize {
            return Err(bad(format!("chunk of {n} words")));
        }
        words.resize(n, 0);
        // SAFETY: u64s viewed as their bytes.
        let bytes = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr() as *mut u8, n * 8) };
        s.read_exact(bytes)
            .map_err(|e| bad(format!("chunk cut short: {e}")))?;
        let mut out = Vec::with_capacity(n + 8);
        let mut rest = &words[..];
        while !rest.is_empty() {
            let before = out.len();
            let d = decode(rest, Tid(0), Pid, no_files, &mut out)
                .map_err(|(at, e)| bad(format!("word {at} of a chunk: {e}")))?;
            rest = &rest[d.used..];
            if let Some(Control::KernelPages { addr, len, shift }) = d.control {
                let flags = match shift {
                    21 => MapFlags::PAGE_2M,
                    30 => MapFlags::PAGE_1G,
                    _ => return Err(bad(format!("kernel leaves of 2^{shift} bytes"))),
                };
                if half.is_none() || out.len() != before || !in_kernel_half(addr, len) {
                    return Err(bad(format!(
                        "kernel pages [{addr:#x}, +{len:#x}) after the stream started, or \
                         outside the kernel half"
                    )));
                }
                out.push(Event::Mmap {
                    addr: VirtAddr(addr),
                    len,
                    prot: Prot::RWX,
                    flags: MapFlags(MapFlags::GLOBAL | flags),
                });
                continue;
            }
            if let Some(h) = half.take() {
                out.insert(before, h);
            }
            match d.control {
                Some(Control::Space(cr3)) => spaces.space(cr3, &mut out, st),
                Some(Control::SpaceFree(pgd)) => spaces.free(pgd, &mut out, st),
                Some(Control::Mode(k)) => {
                    st.mode_changes += 1;
                    out.push(Event::Privilege(if k {
                        Privilege::Kernel
                    } else {
                        Privilege::User
                    }));
                }
                Some(Control::Exit(status)) => st.complete = status == 0,
                Some(Control::Cpu(cpu)) => {
                    // The plugin follows it with that vCPU's address space and mode.
                    st.cpus = st.cpus.max(cpu.saturating_add(1));
                    st.cpu_records += 1;
                    out.push(Event::Cpu { cpu });
                }
                Some(Control::Comm(name)) => spaces.name(&name),
                Some(Control::KernelPages { .. }) => unreachable!("handled above"),
                Some(c) => return Err(bad(format!("unexpected record {c:?}"))),
                None => {}
            }
        }
        if tx.send(Ok(out)).is_err() {
            return Ok(()); // the consumer stopped
        }
    }
}

/// Whether `[addr, addr + len)` lies in [`KERNEL_HALF`].
fn in_kernel_half(addr: u64, len: u64) -> bool {
    len > 0
        && addr >= KERNEL_HALF.0
        && len <= KERNEL_HALF.1
        && addr - KERNEL_HALF.0 <= KERNEL_HALF.1 - len
}

/// Page-table roots to stream processes.
#[derive(Default)]
struct Spaces {
    pids: HashMap<u64, u32>,
    cur: Option<u32>,
    last: u32,
    names: HashMap<u32, String>,
}

impl Spaces {
    /// The current process's program is called `name` (NUL-padded).
    fn name(&mut self, name: &[u8; 16]) {
        let end = name.iter().position(|&b| b == 0).unwrap_or(16);
        if let Some(c) = self.cur {
            self.names
                .insert(c, String::from_utf8_lossy(&name[..end]).into_owned());
        }
    }

    fn space(&mut self, cr3: u64, out: &mut Vec<Event>, st: &mut Stats) {
        let pid = match self.pids.get(&cr3) {
            Some(&p) => p,
            None if self.cur.is_none() => {
                // The stream starts in its first process.
                self.last = Pid::INIT.0;
                st.spaces += 1;
                self.pids.insert(cr3, self.last);
                self.cur = Some(self.last);
                return;
            }
            None => {
                self.last += 1;
                st.spaces += 1;
                self.pids.insert(cr3, self.last);
                out.push(Event::Spawn {
                    child: Pid(self.last),
                });
                self.last
            }
        };
        if self.cur != Some(pid) {
            out.push(Event::Switch { pid: Pid(pid) });
            self.cur = Some(pid);
        }
    }

    fn free(&mut self, pgd: u64, out: &mut Vec<Event>, st: &mut Stats) {
        let cr3 = if pgd >= KERNEL_MAP {
            pgd - KERNEL_MAP
        } else {
            pgd.wrapping_sub(DIRECT_MAP)
        };
        // The current root cannot be freed (the kernel switches away first); a root never
        // loaded (an mm that never ran) is not a process of the stream.
        let Some(&pid) = self.pids.get(&cr3).filter(|&&p| Some(p) != self.cur) else {
            return;
        };
        self.pids.remove(&cr3);
        st.spaces_freed += 1;
        out.push(Event::Switch { pid: Pid(pid) });
        out.push(Event::Exit);
        if let Some(c) = self.cur {
            out.push(Event::Switch { pid: Pid(c) });
        }
    }
}

/// The system plugin sends no file records.
fn no_files(_: &[u8]) -> Result<u32, String> {
    Err("a file record from the system-mode plugin".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    use wire::{access_word, LOAD, STORE};
    use xlat_types::AccessKind;

    fn loads(n: u64, tag: u64) -> Vec<u64> {
        (0..n)
            .map(|i| access_word(tag, 0x1000 + 8 * i, 8))
            .collect()
    }

    /// The batches `read` delivers of `chunks` (written whole first: they fit the
    /// socket's buffer), and its result.
    fn read_all(chunks: &[Vec<u64>]) -> (Vec<Vec<Event>>, Result<(), SystemError>) {
        let (mut w, r) = UnixStream::pair().unwrap();
        for c in chunks {
            let mut m = vec![(c.len() as u64) << 32];
            m.extend_from_slice(c);
            let bytes: Vec<u8> = m.iter().flat_map(|x| x.to_ne_bytes()).collect();
            w.write_all(&bytes).unwrap();
        }
        drop(w);
        let g = Guarded::new(r, Arc::new(AtomicBool::new(false)), Limits::default()).unwrap();
        let (tx, rx) = sync_channel(64);
        let (mut st, mut spaces) = (Stats::default(), Spaces::default());
        let res = read(g, &tx, &mut st, &mut spaces);
        drop(tx);
        (rx.into_iter().map(|b| b.unwrap()).collect(), res)
    }

    fn stores(b: &[Event]) -> usize {
        b.iter()
            .filter(|e| matches!(e, Event::Access(a) if a.kind == AccessKind::Store))
            .count()
    }

    /// Each chunk is a batch, in order, the kernel half before the first chunk's events.
    #[test]
    fn chunks_become_batches_in_order() {
        let (batches, res) = read_all(&[loads(100, LOAD), loads(100, STORE), loads(50, LOAD)]);
        assert!(res.is_ok());
        let lens: Vec<usize> = batches.iter().map(Vec::len).collect();
        assert_eq!(lens, [101, 100, 50]);
        assert!(matches!(batches[0][0], Event::Mmap { addr, .. } if addr.0 == KERNEL_HALF.0));
        let s: Vec<usize> = batches.iter().map(|b| stores(b)).collect();
        assert_eq!(s, [0, 100, 0]);
    }

    /// A malformed chunk: the chunks before it are delivered, none of its own events,
    /// then the error.
    #[test]
    fn a_malformed_chunk_delivers_the_chunks_before_it() {
        let mut bad = loads(5, LOAD);
        bad.push(access_word(LOAD, 0x2000, 0)); // size 0: malformed
        let (batches, res) = read_all(&[loads(30, LOAD), loads(20, STORE), bad]);
        let e = res.unwrap_err().to_string();
        assert!(e.contains("word 5 of a chunk"), "{e}");
        assert_eq!(batches.iter().map(Vec::len).sum::<usize>(), 51);
    }

    /// An empty stream still maps the kernel half; a chunk cut short is an error.
    #[test]
    fn an_empty_stream_maps_the_kernel_half_and_a_cut_chunk_fails() {
        let (batches, res) = read_all(&[]);
        assert!(res.is_ok());
        assert_eq!(batches.len(), 1);
        assert!(matches!(batches[0][..], [Event::Mmap { .. }]));
        let (mut w, r) = UnixStream::pair().unwrap();
        w.write_all(&(4u64 << 32).to_ne_bytes()).unwrap();
        w.write_all(&access_word(LOAD, 0x1000, 8).to_ne_bytes())
            .unwrap();
        drop(w);
        let g = Guarded::new(r, Arc::new(AtomicBool::new(false)), Limits::default()).unwrap();
        let (tx, _rx) = sync_channel(64);
        let e = read(g, &tx, &mut Stats::default(), &mut Spaces::default()).unwrap_err();
        assert!(e.to_string().contains("cut short"), "{e}");
    }

    #[test]
    fn roots_become_processes() {
        let (mut s, mut st, mut out) = (Spaces::default(), Stats::default(), Vec::new());
        s.space(0x1000, &mut out, &mut st); // the first: pid 1, nothing emitted
        s.space(0x2000, &mut out, &mut st); // new: spawn 2, switch
        s.space(0x1000, &mut out, &mut st); // back to 1
        s.free(DIRECT_MAP + 0x2000, &mut out, &mut st); // 2 ends
        s.free(DIRECT_MAP + 0x1000, &mut out, &mut st); // current: ignored
        s.free(DIRECT_MAP + 0x9000, &mut out, &mut st); // never loaded: ignored
        s.space(0x2000, &mut out, &mut st); // reused root: a new process 3
        let sw = |p| Event::Switch { pid: Pid(p) };
        assert_eq!(
            out,
            vec![
                Event::Spawn { child: Pid(2) },
                sw(2),
                sw(1),
                sw(2),
                Event::Exit,
                sw(1),
                Event::Spawn { child: Pid(3) },
                sw(3),
            ]
        );
        assert_eq!((st.spaces, st.spaces_freed), (3, 1));
    }
}
