//! A TLB shootdown's cost to the CPU that starts it: one page of a private mapping written
//! and dropped (`madvise(MADV_DONTNEED)`: a fault, a zap, a flush) while another thread of
//! the process spins on another CPU, against the same with no other thread, in alternated
//! batches. Linux sends the flush to every CPU running the mm and waits for it
//! (`flush_tlb_mm_range`, arch/x86/mm/tlb.c); with no other thread, or one whose CPU is idle
//! in lazy-TLB mode, nothing is sent (no page table is freed here: the mapping stays). The
//! difference per operation is the initiator's wait for one flush IPI; the target's handler
//! runs on the other CPU and is not in it.

use crate::backend::{OsResult, OsSpec};
use crate::error::ProbeError;
use crate::osbench::{pin_to, restore_affinity};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the peer thread may take to start spinning on its CPU.
const START_TIMEOUT: Duration = Duration::from_secs(2);

/// The CPUs this thread may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data, filled by the kernel.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// A page of private anonymous memory that `n` times is written and dropped.
fn write_and_drop(page: *mut u8, n: usize) -> Result<(), ProbeError> {
    for i in 0..n {
        // SAFETY: `page` is a live, writable 4 KiB mapping owned by the caller.
        unsafe { std::ptr::write_volatile(page, i as u8) };
        // SAFETY: the same mapping; MADV_DONTNEED on private anonymous memory only drops it.
        if unsafe { libc::madvise(page.cast(), 4096, libc::MADV_DONTNEED) } != 0 {
            return Err(ProbeError::last_os("madvise(MADV_DONTNEED)"));
        }
    }
    Ok(())
}

/// A thread of this process spinning on `cpu` until dropped.
struct Peer {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Peer {
    fn start(cpu: usize) -> Result<Peer, ProbeError> {
        let stop = Arc::new(AtomicBool::new(false));
        let ready = Arc::new(AtomicBool::new(false));
        let (s, r) = (stop.clone(), ready.clone());
        let handle = std::thread::spawn(move || {
            let pinned = pin_to(cpu).is_some();
            r.store(pinned, Ordering::Release);
            if !pinned {
                return;
            }
            while !s.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        });
        let mut peer = Peer {
            stop,
            handle: Some(handle),
        };
        let t = Instant::now();
        while !ready.load(Ordering::Acquire) {
            if t.elapsed() > START_TIMEOUT || peer.handle.as_ref().is_some_and(|h| h.is_finished())
            {
                peer.finish();
                return Err(ProbeError::Os {
                    what: format!("pinning a spinning thread to CPU {cpu}"),
                    source: std::io::Error::other("the thread did not start spinning there"),
                });
            }
            std::thread::yield_now();
        }
        Ok(peer)
    }

    fn finish(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The shootdown probe: `spec.runs` pairs of batches (with a spinning peer, then alone),
/// each of `spec.iterations` operations; one difference (ns per operation) per pair. No
/// samples, with a note, on a machine with one usable CPU.
pub fn run(spec: &OsSpec) -> Result<OsResult, ProbeError> {
    let cpus = allowed_cpus();
    // SAFETY: sched_getcpu has no preconditions.
    let here = unsafe { libc::sched_getcpu() }.max(0) as usize;
    let Some(&there) = cpus.iter().find(|&&c| c != here) else {
        return Ok(OsResult {
            ns_per_op: Vec::new(),
            note: Some("not measured: one usable CPU (a shootdown needs another)".into()),
        });
    };
    let old = pin_to(here);
    let result = measure(spec, there);
    if let Some(old) = old {
        restore_affinity(&old);
    }
    let diffs = result?;
    Ok(OsResult {
        ns_per_op: diffs,
        note: Some(format!(
            "a page written and dropped (madvise DONTNEED) on CPU {here} with another thread \
             of the process spinning on CPU {there}, minus the same alone (batches \
             alternated): the initiator's wait for one flush IPI"
        )),
    })
}

fn measure(spec: &OsSpec, there: usize) -> Result<Vec<f64>, ProbeError> {
    let map = crate::osbench::Mapping::new(
        2 << 20,
        libc::PROT_READ | libc::PROT_WRITE,
        libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        -1,
    )?;
    let base = map.ptr();
    // SAFETY: within the mapping; the first page keeps the page table alive, the second is
    // the one dropped (no page table is ever freed, so lazy CPUs are never interrupted).
    unsafe {
        libc::madvise(base.cast(), 2 << 20, libc::MADV_NOHUGEPAGE);
        std::ptr::write_volatile(base, 1);
    }
    // SAFETY: one page into a 2 MiB mapping.
    let page = unsafe { base.add(4096) };
    let timed = |n: usize| -> Result<f64, ProbeError> {
        let t = Instant::now();
        write_and_drop(page, n)?;
        Ok(t.elapsed().as_nanos() as f64 / n as f64)
    };
    write_and_drop(page, spec.iterations)?;
    let mut out = Vec::with_capacity(spec.runs);
    for _ in 0..spec.runs {
        let with = {
            let _peer = Peer::start(there)?;
            write_and_drop(page, spec.iterations / 10 + 1)?;
            timed(spec.iterations)?
        };
        let alone = timed(spec.iterations)?;
        out.push(with - alone);
    }
    Ok(out)
}
