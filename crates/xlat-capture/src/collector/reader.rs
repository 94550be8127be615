//! One traced process's connection: its chunks decoded into the stream until it ends.

use super::*;

/// Reads one process's chunks until its connection ends.
#[allow(clippy::too_many_arguments)]
pub(super) fn read_process(
    fd: c_int,
    pid: u32,
    ppid: u32,
    after: Option<u32>,
    root: u32,
    tx: &SyncSender<Msg>,
    registry: &Registry,
    free: &Mutex<Receiver<Vec<Event>>>,
    files: &Mutex<crate::files::Files>,
) -> End {
    let mut buf = vec![0u64; MAX_MSG / 8];
    if let Some(n) = after {
        // Records continue from this process's previous connections: wait for them.
        if !registry.wait_handover(pid, n) {
            return End::Bad(format!(
                "connection {n} continues connections that did not hand over"
            ));
        }
    } else if !registry.wait(pid, ppid) {
        // Its records are dropped; closing the connection tells the plugin so.
        return End::Orphan;
    }
    let mut exited = false;
    // Events of consecutive chunks gathered into one batch while more chunks are
    // already waiting (see `BATCH_EVENTS`).
    let mut events = take_free(free);
    // A bad connection: the events gathered so far are delivered, then it ends.
    let bad = |events: &mut Vec<Event>, why: String| {
        let _ = send(tx, pid, events, None, free);
        End::Bad(why)
    };
    loop {
        let n = match recv(fd, &mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => return bad(&mut events, e.to_string()),
        };
        if n % 8 != 0 || n < 16 {
            return bad(&mut events, format!("message of {n} bytes is not a chunk"));
        }
        let words = &buf[..n / 8];
        let (tid, count) = (words[0] as u32, (words[0] >> 32) as usize);
        if count != words.len() - 1 || count > wire::MAX_CHUNK_WORDS as usize {
            let why = format!(
                "chunk header says {count} words, message has {}",
                words.len() - 1
            );
            return bad(&mut events, why);
        }
        let mut rest = &words[1..];
        while !rest.is_empty() {
            events.reserve(rest.len());
            // A malformed run is dropped whole (what came before it is delivered).
            let mark = events.len();
            let file_id = |p: &[u8]| Ok(files.lock().unwrap_or_else(|e| e.into_inner()).id(p));
            let d = match decode(rest, Tid(tid), |c| name_for(c, root), file_id, &mut events) {
                Ok(d) => d,
                Err((at, e)) => {
                    events.truncate(mark);
                    return bad(&mut events, format!("word {at} of a chunk: {e}"));
                }
            };
            rest = &rest[d.used..];
            exited |= matches!(d.control, Some(Control::Exit(_)));
            if let Some(
                Control::Space(_)
                | Control::SpaceFree(_)
                | Control::Mode(_)
                | Control::Comm(_)
                | Control::KernelPages { .. }
                | Control::Cpu(_),
            ) = d.control
            {
                events.truncate(mark);
                let why = "a system-mode record from a user-mode plugin".to_string();
                return bad(&mut events, why);
            }
            let handover = matches!(d.control, Some(Control::Handover));
            // A control record goes at once, after the events before it; plain events
            // wait for the next chunk while one is already queued and the batch has room.
            let gather = d.control.is_none()
                && rest.is_empty()
                && events.len() < BATCH_EVENTS
                && readable_now(fd);
            if !gather && send(tx, pid, &mut events, d.control, free).is_err() {
                return End::Cut;
            }
            if handover {
                // The last record of this connection (the program may keep the socket
                // open by mistake: do not wait for its end).
                return End::Handover;
            }
        }
    }
    if send(tx, pid, &mut events, None, free).is_err() {
        return End::Cut;
    }
    if exited {
        End::Exit
    } else {
        End::Cut
    }
}

/// A batch the reader stops gathering chunks into once it holds this many events: half
/// the simulator's batch (`wire::MAX_CHUNK_WORDS` events), so that with the chunk that
/// crossed it a batch is still handed over whole, without a copy. Gathering makes batches
/// some four times larger than one chunk's: fewer hand-overs between the threads, whose
/// wake-ups and cross-core cache transfers cost the simulating thread more than its own
/// work (issue 43: under `xlat run -- gzip -9` it took 1.9 times the CPU of a replay of
/// the same stream; after, 1.1 times).
const BATCH_EVENTS: usize = (wire::MAX_CHUNK_WORDS / 2) as usize;

/// An event buffer from the free list (the simulator's recycled ones), or a new one.
fn take_free(free: &Mutex<Receiver<Vec<Event>>>) -> Vec<Event> {
    free.lock()
        .unwrap_or_else(|e| e.into_inner())
        .try_recv()
        .unwrap_or_default()
}

/// Sends `events` (with `control` after them) unless there is nothing to send, leaving a
/// fresh buffer in their place; `Err` once the capture is gone.
fn send(
    tx: &SyncSender<Msg>,
    pid: u32,
    events: &mut Vec<Event>,
    control: Option<Control>,
    free: &Mutex<Receiver<Vec<Event>>>,
) -> Result<(), ()> {
    if events.is_empty() && control.is_none() {
        return Ok(());
    }
    let events = std::mem::replace(events, take_free(free));
    tx.send(Msg::Events {
        pid,
        events,
        control,
    })
    .map_err(|_| ())
}

/// Whether a message (or the end of the stream) can be received without waiting.
fn readable_now(fd: c_int) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, zero timeout.
    unsafe { libc::poll(&mut p, 1, 0) == 1 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::{access_word, os, LOAD, OS, STORE, TAG_SHIFT};
    use xlat_types::AccessKind;

    /// A connected `SOCK_SEQPACKET` pair: (plugin's end, collector's end).
    fn pair() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors.
        let r =
            unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0, fds.as_mut_ptr()) };
        assert_eq!(r, 0, "socketpair: {}", std::io::Error::last_os_error());
        // SAFETY: both are new descriptors owned by nobody else.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    /// Sends one chunk of thread 7.
    fn chunk(fd: &OwnedFd, words: &[u64]) {
        let mut m = vec![7 | (words.len() as u64) << 32];
        m.extend_from_slice(words);
        // SAFETY: `m` is valid for reads of its bytes.
        let n = unsafe { libc::send(fd.as_raw_fd(), m.as_ptr().cast(), m.len() * 8, 0) };
        assert_eq!(n as usize, m.len() * 8);
    }

    fn loads(n: u64, tag: u64) -> Vec<u64> {
        (0..n)
            .map(|i| access_word(tag, 0x1000 + 8 * i, 8))
            .collect()
    }

    /// A delivered batch: its events and the control record that ended it.
    type Batch = (Vec<Event>, Option<Control>);

    /// Runs the reader over what was sent (the sending end closed): its end and the
    /// batches it delivered.
    fn read(plugin: OwnedFd, collector: OwnedFd) -> (End, Vec<Batch>) {
        drop(plugin);
        let registry = Registry::default();
        registry.register(100);
        let (tx, rx) = mpsc::sync_channel(64);
        let (_free_tx, free_rx) = mpsc::sync_channel(4);
        let end = read_process(
            collector.as_raw_fd(),
            100,
            1,
            None,
            100,
            &tx,
            &registry,
            &Mutex::new(free_rx),
            &Mutex::default(),
        );
        drop(tx);
        let batches = rx
            .iter()
            .map(|m| match m {
                Msg::Events {
                    pid: 100,
                    events,
                    control,
                } => (events, control),
                _ => panic!("not a batch of process 100"),
            })
            .collect();
        (end, batches)
    }

    /// Chunks already waiting go over as one batch; a control record ends a batch at
    /// once, with the events before it; the order of events is kept.
    #[test]
    fn waiting_chunks_are_gathered_and_controls_end_a_batch() {
        let (p, c) = pair();
        chunk(&p, &loads(100, LOAD));
        chunk(&p, &loads(100, STORE));
        let mut third = loads(50, LOAD);
        third.extend([OS << TAG_SHIFT | os::FORK, 4242]);
        third.extend(loads(10, STORE));
        chunk(&p, &third);
        let (end, batches) = read(p, c);
        assert!(matches!(end, End::Cut), "no exit record: cut");
        assert_eq!(
            batches.len(),
            2,
            "one gathered batch up to the fork, then the rest"
        );
        let (first, control) = &batches[0];
        assert_eq!(*control, Some(Control::Fork(4242)));
        assert_eq!(
            first.len(),
            251,
            "three chunks' accesses and the fork event"
        );
        assert!(matches!(first[250], Event::Fork { .. }));
        let kinds = |e: &[Event]| {
            e.iter()
                .filter(|e| matches!(e, Event::Access(a) if a.kind == AccessKind::Store))
                .count()
        };
        assert_eq!(kinds(&first[..100]), 0);
        assert_eq!(kinds(&first[100..200]), 100);
        assert_eq!(batches[1].0.len(), 10);
        assert_eq!(batches[1].1, None);
    }

    /// A malformed chunk after gathered ones: what came before it is delivered, its own
    /// run is not.
    #[test]
    fn a_malformed_chunk_drops_only_its_own_run() {
        let (p, c) = pair();
        chunk(&p, &loads(30, LOAD));
        let mut bad = loads(5, LOAD);
        bad.push(access_word(LOAD, 0x2000, 0)); // size 0: malformed
        chunk(&p, &bad);
        let (end, batches) = read(p, c);
        assert!(matches!(end, End::Bad(ref why) if why.contains("size 0")));
        let delivered: usize = batches.iter().map(|b| b.0.len()).sum();
        assert_eq!(delivered, 30);
    }
}
