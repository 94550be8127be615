//! Decoding on its own thread: [`Pipelined`] runs a source (a trace reader) one batch
//! ahead of the simulator, so decompression and simulation use two cores.

use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;
use xlat_types::{Event, EventSource};

/// Batches in flight (memory stays bounded: at most twice this many batches plus two).
const DEPTH: usize = 4;

/// An [`EventSource`] whose inner source fills batches on another thread. Batches are
/// swapped, not copied, and their buffers are recycled.
pub struct Pipelined<S: EventSource> {
    rx: Receiver<Result<Vec<Event>, S::Error>>,
    back: SyncSender<Vec<Event>>,
    handle: Option<JoinHandle<S>>,
    done: bool,
}

impl<S: EventSource + Send + 'static> Pipelined<S> {
    /// Starts reading `src` in batches of `batch` events.
    pub fn new(mut src: S, batch: usize) -> Pipelined<S> {
        let (tx, rx) = sync_channel(DEPTH);
        let (back, spare) = sync_channel::<Vec<Event>>(DEPTH + 2);
        let handle = std::thread::spawn(move || {
            loop {
                let mut buf = spare
                    .try_recv()
                    .unwrap_or_else(|_| Vec::with_capacity(batch));
                match src.fill(&mut buf, batch) {
                    Ok(true) => {
                        if tx.send(Ok(buf)).is_err() {
                            break;
                        }
                    }
                    Ok(false) => break,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        break;
                    }
                }
            }
            src
        });
        Pipelined {
            rx,
            back,
            handle: Some(handle),
            done: false,
        }
    }

    /// Waits for the reader thread and returns the source (e.g. for its truncation
    /// warning). Call after `fill` returned `Ok(false)` or an error.
    pub fn into_inner(mut self) -> S {
        drop(std::mem::replace(&mut self.rx, sync_channel(0).1));
        let h = self.handle.take().expect("joined once");
        h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))
    }
}

impl<S: EventSource> EventSource for Pipelined<S> {
    type Error = S::Error;

    /// Hands over the next batch (of the size given to [`Pipelined::new`], which must not
    /// exceed `max`).
    fn fill(&mut self, buf: &mut Vec<Event>, max: usize) -> Result<bool, S::Error> {
        buf.clear();
        if self.done {
            return Ok(false);
        }
        match self.rx.recv() {
            Ok(Ok(mut b)) => {
                debug_assert!(b.len() <= max);
                std::mem::swap(buf, &mut b);
                let _ = self.back.try_send(b);
                Ok(true)
            }
            Ok(Err(e)) => {
                self.done = true;
                Err(e)
            }
            Err(_) => {
                self.done = true;
                Ok(false)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlat_types::{Access, AccessKind, VecSource};

    #[test]
    fn delivers_every_event_in_order() {
        let events: Vec<Event> = (0..10_007u64)
            .map(|i| Event::Access(Access::new(AccessKind::Load, i * 64, 8)))
            .collect();
        let mut p = Pipelined::new(VecSource::new(events.clone()), 100);
        let (mut got, mut buf) = (Vec::new(), Vec::new());
        while p.fill(&mut buf, 100).unwrap() {
            assert!(buf.len() <= 100);
            got.extend_from_slice(&buf);
        }
        assert!(!p.fill(&mut buf, 100).unwrap());
        assert_eq!(got, events);
        let mut inner = p.into_inner();
        assert!(!inner.fill(&mut buf, 1).unwrap());
    }
}
