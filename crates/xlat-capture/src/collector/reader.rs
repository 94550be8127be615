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
    loop {
        let n = match recv(fd, &mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => return End::Bad(e.to_string()),
        };
        if n % 8 != 0 || n < 16 {
            return End::Bad(format!("message of {n} bytes is not a chunk"));
        }
        let words = &buf[..n / 8];
        let (tid, count) = (words[0] as u32, (words[0] >> 32) as usize);
        if count != words.len() - 1 || count > wire::MAX_CHUNK_WORDS as usize {
            return End::Bad(format!(
                "chunk header says {count} words, message has {}",
                words.len() - 1
            ));
        }
        let mut rest = &words[1..];
        while !rest.is_empty() {
            let mut events = free.lock().unwrap().try_recv().unwrap_or_default();
            events.reserve(rest.len());
            let file_id = |p: &[u8]| Ok(files.lock().unwrap_or_else(|e| e.into_inner()).id(p));
            let d = match decode(rest, Tid(tid), |c| name_for(c, root), file_id, &mut events) {
                Ok(d) => d,
                Err((at, e)) => return End::Bad(format!("word {at} of a chunk: {e}")),
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
                return End::Bad("a system-mode record from a user-mode plugin".to_string());
            }
            let handover = matches!(d.control, Some(Control::Handover));
            if tx
                .send(Msg::Events {
                    pid,
                    events,
                    control: d.control,
                })
                .is_err()
            {
                return End::Cut;
            }
            if handover {
                // The last record of this connection (the program may keep the socket
                // open by mistake: do not wait for its end).
                return End::Handover;
            }
        }
    }
    if exited {
        End::Exit
    } else {
        End::Cut
    }
}
