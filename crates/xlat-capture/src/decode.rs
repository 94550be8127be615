//! Plugin words to [`Event`]s (one chunk at a time).

use crate::wire::{self, os};
use xlat_types::{
    Access, AccessKind, Advice, Block, Event, FlushScope, MapFlags, Pid, Prot, Tid, VirtAddr,
};

/// A process-level record that the collector, not the simulator, acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// The process forked the child with this (host) pid; emitted after the `Fork` event.
    Fork(u32),
    /// The process is about to exec.
    Exec,
    /// Its exec failed: tracing goes on.
    ExecFailed,
    /// The process exits normally with this status.
    Exit(u64),
    /// The connection ends here; the process continues on a new one.
    Handover,
    /// The process exec'd and is traced on: emitted after the `ExecTraced` event.
    Execd,
    /// System mode: the guest switched to the address space rooted at this `cr3`.
    Space(u64),
    /// System mode: the guest kernel freed the page-table root at this virtual address.
    SpaceFree(u64),
    /// System mode: the following records run in kernel (`true`) or user mode.
    Mode(bool),
    /// System mode: the current address space's program name (NUL-padded).
    Comm([u8; 16]),
    /// System mode: the guest kernel maps `[addr, addr + len)` with `2^shift`-byte leaves.
    KernelPages { addr: u64, len: u64, shift: u8 },
    /// System mode: the following records ran on this vCPU.
    Cpu(u32),
}

/// What a chunk decodes to: events, and at most one control record, which ends the chunk's
/// decoding (the plugin sends them last in a chunk).
#[derive(Debug, Default)]
pub struct Decoded {
    pub control: Option<Control>,
    /// Words consumed (the whole chunk unless a control record ended it early).
    pub used: usize,
}

/// Why a chunk is malformed: the word index and the reason.
pub type WireError = (usize, String);

const KINDS: [AccessKind; 3] = [AccessKind::Fetch, AccessKind::Load, AccessKind::Store];

/// Decodes `words` (one chunk of thread `tid`) into `out`. `pid_of` maps a forked child's
/// host pid to its trace pid; `file_id` numbers a `MAPFILE` record's path (the stream's
/// file table), or refuses it.
pub fn decode(
    words: &[u64],
    tid: Tid,
    pid_of: impl Fn(u32) -> Pid,
    mut file_id: impl FnMut(&[u8]) -> Result<u32, String>,
    out: &mut Vec<Event>,
) -> Result<Decoded, WireError> {
    let mut i = 0;
    let arg = |i: usize, k: usize| -> Result<u64, WireError> {
        words
            .get(i + k)
            .copied()
            .ok_or_else(|| (i, "record cut off at the end of its chunk".to_string()))
    };
    while i < words.len() {
        let w = words[i];
        if w >> wire::TAG_SHIFT == wire::BLOCK1 {
            // Before the match: an arm of its own turned it into a jump table (one
            // indirect branch per record, mispredicted more often than these two).
            let (addr, len, insns) = wire::block1_fields(w);
            out.push(Event::Block(Block {
                addr: VirtAddr(addr),
                len,
                insns,
                tid,
            }));
            i += 1;
            continue;
        }
        let addr = w & wire::ADDR_MASK;
        let size = ((w >> wire::ADDR_BITS) & 0xff) as u32;
        match w >> wire::TAG_SHIFT {
            t @ (wire::LOAD | wire::STORE | wire::FETCH) => {
                let kind = match t {
                    wire::LOAD => AccessKind::Load,
                    wire::STORE => AccessKind::Store,
                    _ => AccessKind::Fetch,
                };
                if size == 0 {
                    return Err((i, "access of size 0".into()));
                }
                out.push(Event::Access(Access {
                    addr: VirtAddr(addr),
                    size,
                    tid,
                    kind,
                }));
                i += 1;
            }
            wire::BLOCK => {
                let tail = arg(i, 1)?;
                out.push(block(addr, tail, tid, i)?);
                i += 2;
            }
            wire::WIDE => {
                let full = arg(i, 1)?;
                let kind = w & 3;
                if kind == 3 {
                    out.push(block(full, arg(i, 2)?, tid, i)?);
                    i += 3;
                } else {
                    let size = ((w >> 8) & 0xff) as u32;
                    if size == 0 {
                        return Err((i, "access of size 0".into()));
                    }
                    out.push(Event::Access(Access {
                        addr: VirtAddr(full),
                        size,
                        tid,
                        kind: KINDS[kind as usize],
                    }));
                    i += 2;
                }
            }
            wire::OS => {
                let code = w & 0xff;
                let n =
                    wire::os_words(code).ok_or_else(|| (i, format!("unknown OS event {code}")))?;
                let a = |k: usize| arg(i, k + 1);
                let mut control = None;
                let mut n = n;
                let ev = match code {
                    os::MMAP => {
                        let pf = a(2)?;
                        Some(Event::Mmap {
                            addr: VirtAddr(a(0)?),
                            len: a(1)?,
                            prot: Prot((pf & 7) as u8),
                            flags: MapFlags((pf >> 8 & 7) as u8),
                        })
                    }
                    os::MUNMAP => Some(Event::Munmap {
                        addr: VirtAddr(a(0)?),
                        len: a(1)?,
                    }),
                    os::MPROTECT => Some(Event::Mprotect {
                        addr: VirtAddr(a(0)?),
                        len: a(1)?,
                        prot: Prot((a(2)? & 7) as u8),
                    }),
                    os::MADVISE => Some(Event::Madvise {
                        addr: VirtAddr(a(0)?),
                        len: a(1)?,
                        advice: match a(2)? {
                            0 => Advice::DontNeed,
                            1 => Advice::HugePage,
                            2 => Advice::NoHugePage,
                            _ => Advice::Other,
                        },
                    }),
                    os::MREMAP => Some(Event::Mremap {
                        old: VirtAddr(a(0)?),
                        old_len: a(1)?,
                        new: VirtAddr(a(2)?),
                        new_len: a(3)?,
                    }),
                    os::BRK => Some(Event::Brk {
                        addr: VirtAddr(a(0)?),
                    }),
                    os::THREAD_START => Some(Event::ThreadStart {
                        tid: Tid(a(0)? as u32),
                    }),
                    os::THREAD_EXIT => Some(Event::ThreadExit {
                        tid: Tid(a(0)? as u32),
                    }),
                    os::FORK => {
                        let child = u32::try_from(a(0)?)
                            .map_err(|_| (i, "fork child pid exceeds 32 bits".to_string()))?;
                        control = Some(Control::Fork(child));
                        Some(Event::Fork {
                            child: pid_of(child),
                        })
                    }
                    os::EXEC => {
                        control = Some(Control::Exec);
                        None
                    }
                    os::EXEC_FAILED => {
                        control = Some(Control::ExecFailed);
                        None
                    }
                    os::EXIT => {
                        control = Some(Control::Exit(a(0)?));
                        None
                    }
                    os::HANDOVER => {
                        control = Some(Control::Handover);
                        None
                    }
                    os::EXECD => {
                        control = Some(Control::Execd);
                        Some(Event::ExecTraced)
                    }
                    os::SPACE => {
                        control = Some(Control::Space(a(0)?));
                        None
                    }
                    os::SPACE_FREE => {
                        control = Some(Control::SpaceFree(a(0)?));
                        None
                    }
                    os::FLUSH_PAGE => Some(Event::Flush(FlushScope::Page(VirtAddr(a(0)?)))),
                    os::FLUSH_LOCAL => Some(Event::Flush(FlushScope::Asid)),
                    os::FLUSH_GLOBAL => Some(Event::Flush(FlushScope::All)),
                    // Nanoseconds: a system trace's header says so (`idle = ns`), and the
                    // replay turns them into the machine's cycles.
                    os::IDLE => Some(Event::Idle { cycles: a(0)? }),
                    os::CPU => {
                        let cpu = u32::try_from(a(0)?)
                            .map_err(|_| (i, "cpu number exceeds 32 bits".to_string()))?;
                        control = Some(Control::Cpu(cpu));
                        None
                    }
                    os::SHOOTDOWN => Some(Event::Shootdown {
                        cpus: a(0)?,
                        start: VirtAddr(a(1)?),
                        end: VirtAddr(a(2)?),
                    }),
                    os::KPAGES => {
                        let shift = a(2)?;
                        if !(12..64).contains(&shift) {
                            return Err((i, format!("kernel leaves of 2^{shift} bytes")));
                        }
                        control = Some(Control::KernelPages {
                            addr: a(0)?,
                            len: a(1)?,
                            shift: shift as u8,
                        });
                        None
                    }
                    os::COMM => {
                        let mut name = [0u8; 16];
                        name[..8].copy_from_slice(&a(0)?.to_le_bytes());
                        name[8..].copy_from_slice(&a(1)?.to_le_bytes());
                        control = Some(Control::Comm(name));
                        None
                    }
                    os::MAPFILE => {
                        let bytes = a(3)?;
                        if bytes == 0 || bytes > wire::MAX_PATH_BYTES {
                            return Err((i, format!("file path of {bytes} bytes")));
                        }
                        n += wire::path_words(bytes);
                        let mut path = Vec::with_capacity(bytes as usize);
                        for k in 4..n {
                            path.extend_from_slice(&a(k)?.to_le_bytes());
                        }
                        path.truncate(bytes as usize);
                        Some(Event::MapFile {
                            addr: VirtAddr(a(0)?),
                            len: a(1)?,
                            offset: a(2)?,
                            file: file_id(&path).map_err(|e| (i, e))?,
                        })
                    }
                    os::MODE => {
                        control = Some(Control::Mode(match a(0)? {
                            0 => false,
                            1 => true,
                            m => return Err((i, format!("privilege mode {m} is neither 0 nor 1"))),
                        }));
                        None
                    }
                    _ => unreachable!("os_words knows every code"),
                };
                out.extend(ev);
                i += 1 + n;
                if control.is_some() {
                    return Ok(Decoded { control, used: i });
                }
            }
            t => return Err((i, format!("unknown record tag {t}"))),
        }
    }
    Ok(Decoded {
        control: None,
        used: i,
    })
}

#[inline]
fn block(addr: u64, tail: u64, tid: Tid, i: usize) -> Result<Event, WireError> {
    let len = tail as u32;
    if len == 0 {
        return Err((i, "block of length 0".into()));
    }
    Ok(Event::Block(Block {
        addr: VirtAddr(addr),
        len,
        insns: (tail >> 32) as u32,
        tid,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{access_word, OS, TAG_SHIFT};

    fn run(words: &[u64]) -> (Vec<Event>, Result<Decoded, WireError>) {
        let mut out = Vec::new();
        let r = decode(words, Tid(3), |p| Pid(p + 1000), |_| Ok(9), &mut out);
        (out, r)
    }

    /// A block in one word decodes to the block it encodes, at every field's limits; a
    /// block outside them has no one-word form.
    #[test]
    fn one_word_blocks_round_trip() {
        let max_addr = (1 << wire::BLOCK1_ADDR_BITS) - 1;
        for (addr, len, insns) in [(0x40_1000, 1, 1), (max_addr, 128, 63), (0, 17, 0)] {
            let w = wire::block1_word(addr, len, insns).unwrap();
            let (out, r) = run(&[w, access_word(wire::LOAD, 0x1000, 8)]);
            assert_eq!(r.unwrap().used, 2);
            assert_eq!(
                out[0],
                Event::Block(Block {
                    addr: VirtAddr(addr),
                    len: len as u32,
                    insns: insns as u32,
                    tid: Tid(3),
                })
            );
            assert!(matches!(out[1], Event::Access(_)));
        }
        for (addr, len, insns) in [(max_addr + 1, 1, 1), (0, 0, 1), (0, 129, 1), (0, 1, 64)] {
            assert_eq!(
                wire::block1_word(addr, len, insns),
                None,
                "{addr:#x} {len} {insns}"
            );
        }
    }

    #[test]
    fn accesses_blocks_and_os_events() {
        let words = [
            access_word(wire::LOAD, 0x1000, 8),
            access_word(wire::STORE, 0x2004, 4),
            access_word(wire::FETCH, 0x40_0000, 3),
            wire::BLOCK << TAG_SHIFT | 0x40_1000,
            24 | 6 << 32,
            OS << TAG_SHIFT | os::MMAP,
            0x7f00_0000_0000,
            8192,
            3 | 1 << 8,
            wire::WIDE << TAG_SHIFT | 3,
            0xffff_ffff_ff60_0000,
            9 | 2 << 32,
            wire::WIDE << TAG_SHIFT | 1 | 8 << 8,
            0xffff_ffff_ff60_0008,
        ];
        let (ev, r) = run(&words);
        let r = r.unwrap();
        assert_eq!(r.control, None);
        assert_eq!(r.used, words.len());
        assert_eq!(ev.len(), 7);
        assert_eq!(
            ev[0],
            Event::Access(Access {
                addr: VirtAddr(0x1000),
                size: 8,
                tid: Tid(3),
                kind: AccessKind::Load
            })
        );
        assert!(matches!(ev[1], Event::Access(a) if a.kind == AccessKind::Store && a.size == 4));
        assert!(matches!(ev[2], Event::Access(a) if a.kind == AccessKind::Fetch && a.size == 3));
        assert_eq!(
            ev[3],
            Event::Block(Block {
                addr: VirtAddr(0x40_1000),
                len: 24,
                insns: 6,
                tid: Tid(3)
            })
        );
        assert_eq!(
            ev[4],
            Event::Mmap {
                addr: VirtAddr(0x7f00_0000_0000),
                len: 8192,
                prot: Prot::RW,
                flags: MapFlags(MapFlags::ANON)
            }
        );
        assert!(
            matches!(ev[5], Event::Block(b) if b.addr.0 == 0xffff_ffff_ff60_0000 && b.insns == 2)
        );
        assert!(
            matches!(ev[6], Event::Access(a) if a.kind == AccessKind::Load && a.addr.0 == 0xffff_ffff_ff60_0008)
        );
    }

    #[test]
    fn fork_maps_the_child_and_ends_the_chunk() {
        let words = [
            OS << TAG_SHIFT | os::FORK,
            77,
            access_word(wire::LOAD, 0x1000, 8),
        ];
        let (ev, r) = run(&words);
        let r = r.unwrap();
        assert_eq!(r.control, Some(Control::Fork(77)));
        assert_eq!(r.used, 2);
        assert_eq!(ev, vec![Event::Fork { child: Pid(1077) }]);
    }

    /// System mode: a halt's nanoseconds are an idle event; the kernel's large-page runs a
    /// control that ends the chunk, their leaf size checked.
    #[test]
    fn idle_and_kernel_pages() {
        let words = [
            OS << TAG_SHIFT | os::IDLE,
            2_500_000,
            OS << TAG_SHIFT | os::KPAGES,
            0xffff_ffff_8100_0000,
            14 << 20,
            21,
            access_word(wire::LOAD, 0x1000, 8),
        ];
        let (ev, r) = run(&words);
        let r = r.unwrap();
        assert_eq!(ev, vec![Event::Idle { cycles: 2_500_000 }]);
        assert_eq!(
            r.control,
            Some(Control::KernelPages {
                addr: 0xffff_ffff_8100_0000,
                len: 14 << 20,
                shift: 21
            })
        );
        assert_eq!(r.used, 6);
        for bad in [11, 64] {
            let e = run(&[OS << TAG_SHIFT | os::KPAGES, 0, 4096, bad])
                .1
                .unwrap_err();
            assert!(e.1.contains(&format!("kernel leaves of 2^{bad}")), "{e:?}");
        }
    }

    /// System mode, several vCPUs: the running vCPU is a control that ends the chunk; a
    /// shootdown is an event carrying its CPU mask and range.
    #[test]
    fn cpu_and_shootdown() {
        let words = [
            OS << TAG_SHIFT | os::SHOOTDOWN,
            0b110,
            0x7000,
            0x9000,
            OS << TAG_SHIFT | os::CPU,
            2,
            access_word(wire::LOAD, 0x1000, 8),
        ];
        let (ev, r) = run(&words);
        let r = r.unwrap();
        assert_eq!(
            ev,
            vec![Event::Shootdown {
                cpus: 0b110,
                start: VirtAddr(0x7000),
                end: VirtAddr(0x9000)
            }]
        );
        assert_eq!((r.control, r.used), (Some(Control::Cpu(2)), 6));
        let e = run(&[OS << TAG_SHIFT | os::CPU, 1 << 32]).1.unwrap_err();
        assert!(e.1.contains("cpu number"), "{e:?}");
    }

    #[test]
    fn malformed_chunks_name_the_word() {
        assert_eq!(
            run(&[wire::BLOCK << TAG_SHIFT | 0x1000]).1.unwrap_err().0,
            0
        );
        let e = run(&[access_word(wire::LOAD, 0, 8), 6 << TAG_SHIFT])
            .1
            .unwrap_err();
        assert_eq!(e, (1, "unknown record tag 6".to_string()));
        let e = run(&[OS << TAG_SHIFT | 99]).1.unwrap_err();
        assert!(e.1.contains("unknown OS event 99"));
        let e = run(&[access_word(wire::LOAD, 0, 0)]).1.unwrap_err();
        assert!(e.1.contains("size 0"));
        let e = run(&[OS << TAG_SHIFT | os::MUNMAP, 1]).1.unwrap_err();
        assert!(e.1.contains("cut off"));
    }
}
