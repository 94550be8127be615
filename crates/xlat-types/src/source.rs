//! The producer side of the event stream.

/// Something that yields [`Event`](crate::Event)s in batches (a workload generator or a
/// trace reader). Batching keeps per-event virtual calls out of the simulator's loop.
pub trait EventSource {
    type Error: std::error::Error + Send + Sync + 'static;

    /// Clears `buf`, then appends up to `max` events. Returns `Ok(false)` (with `buf`
    /// empty) once the stream is exhausted. Memory use must not grow with stream length.
    fn fill(&mut self, buf: &mut Vec<crate::Event>, max: usize) -> Result<bool, Self::Error>;
}

/// A source over an in-memory list of events (tests, small examples).
#[derive(Debug, Clone)]
pub struct VecSource {
    events: Vec<crate::Event>,
    pos: usize,
}

impl VecSource {
    pub fn new(events: Vec<crate::Event>) -> Self {
        VecSource { events, pos: 0 }
    }
}

impl EventSource for VecSource {
    type Error = std::convert::Infallible;
    fn fill(&mut self, buf: &mut Vec<crate::Event>, max: usize) -> Result<bool, Self::Error> {
        buf.clear();
        let end = (self.pos + max).min(self.events.len());
        buf.extend_from_slice(&self.events[self.pos..end]);
        self.pos = end;
        Ok(!buf.is_empty())
    }
}

impl<S: EventSource + ?Sized> EventSource for &mut S {
    type Error = S::Error;
    fn fill(&mut self, buf: &mut Vec<crate::Event>, max: usize) -> Result<bool, Self::Error> {
        (**self).fill(buf, max)
    }
}
