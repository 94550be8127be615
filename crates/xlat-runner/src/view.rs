//! How one machine sees a trace's addresses ([`View`]: as recorded, a system trace's kernel
//! half narrowed, or folded onto a narrower space), and [`Feed`], one machine's view of a
//! fan-out's shared stream, a batch per step; [`source_address`] goes back.

use crate::canonical::Canonical;
use crate::fanout::Tap;
use crate::fold::{kernel_segments, Fold, USER_BITS};
use crate::RunError;
use xlat_sim::{Machine, MachineConfig};
use xlat_types::{Event, EventSource};

/// Events per batch handed from the decoding thread to the simulator: a batch (2.5 MiB)
/// larger than a core's L2 cache, so the two threads do not pass the same cache lines back
/// and forth (measured here: 4 K-event batches were slower than no second thread at all;
/// 64 K-event batches replay gzip's trace at 150 M events/s instead of 110).
pub const PIPELINE_BATCH: usize = 1 << 16;

/// How one machine sees a trace's addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// As recorded.
    Plain,
    /// A system trace's kernel half narrowed to `bits` (48..63).
    Canonical(u32),
    /// Folded onto a `bits`-bit space (the kernel half in the top quarter if `system`),
    /// user windows below `limit` (the machine's kernel segments).
    Fold {
        bits: u32,
        system: bool,
        limit: Option<u64>,
    },
}

/// The view of a trace (a system trace if `system`; named `what` in the error) that
/// machine `cfg` replays.
pub fn view(cfg: &MachineConfig, system: bool, what: &str) -> Result<View, RunError> {
    let bits = cfg.va_bits();
    if system {
        if !((48..=64).contains(&bits) || (26..USER_BITS).contains(&bits)) {
            return Err(RunError::SystemTraceBits {
                what: what.to_string(),
                machine: cfg.name.clone(),
                bits,
            });
        }
        if (48..64).contains(&bits) {
            return Ok(View::Canonical(bits));
        }
    }
    Ok(if bits >= USER_BITS {
        View::Plain
    } else {
        View::Fold {
            bits,
            system,
            limit: kernel_segments(cfg),
        }
    })
}

/// Replays `src`, a trace's events (a system trace's if `system`; named `what`), into
/// `sim` as that machine sees them ([`view`]), as [`crate::drive::drive`] does.
pub fn drive_seen<S: EventSource>(
    src: S,
    system: bool,
    what: &str,
    sim: &mut Machine,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<(), RunError>
where
    S::Error: std::error::Error + Send + Sync + 'static,
{
    use crate::drive::drive;
    match view(sim.config(), system, what)? {
        View::Plain => drive(&mut { src }, sim, stop),
        View::Canonical(bits) => drive(&mut Canonical::new(src, bits), sim, stop),
        View::Fold {
            bits,
            system,
            limit,
        } => {
            let f = match system {
                true => Fold::system(src, bits),
                false => Fold::new(src, bits),
            };
            drive(&mut f.below(limit), sim, stop)
        }
    }
}

/// One machine's view of the shared stream, a batch per step.
pub enum Feed {
    /// The shared batches, read in place.
    Plain(Tap),
    Canonical(Canonical<Tap>, Vec<Event>),
    Fold(Box<Fold<Tap>>, Vec<Event>),
}

impl Feed {
    /// `tap` as view `v` shows it.
    pub fn new(tap: Tap, v: View) -> Feed {
        match v {
            View::Plain => Feed::Plain(tap),
            View::Canonical(bits) => Feed::Canonical(Canonical::new(tap, bits), Vec::new()),
            View::Fold {
                bits,
                system: true,
                limit,
            } => Feed::Fold(Box::new(Fold::system(tap, bits).below(limit)), Vec::new()),
            View::Fold { bits, limit, .. } => {
                Feed::Fold(Box::new(Fold::new(tap, bits).below(limit)), Vec::new())
            }
        }
    }

    /// Replays the next shared batch into `sim`; `false` at the end of the stream.
    // Inlined into the caller: the simulator's loop is instantiated there (see
    // `xlat_sim::Machine`).
    #[inline]
    pub fn step(&mut self, sim: &mut Machine) -> Result<bool, RunError> {
        // A tap hands out a whole batch when asked for this many events.
        const ALL: usize = PIPELINE_BATCH;
        if sim.finished() {
            return Ok(false);
        }
        match self {
            Feed::Plain(tap) => match tap.next_batch() {
                Some(b) => sim.run(&b.map_err(RunError::from_source)?)?,
                None => return Ok(false),
            },
            Feed::Canonical(src, buf) => {
                if !src.fill(buf, ALL).map_err(RunError::from_source)? {
                    return Ok(false);
                }
                sim.run(buf)?;
            }
            Feed::Fold(src, buf) => {
                if !src.fill(buf, ALL).map_err(RunError::from_source)? {
                    return Ok(false);
                }
                sim.run(buf)?;
            }
        }
        Ok(true)
    }

    /// A user-mode stream on machine `cfg` (folded when narrower than x86-64 user
    /// space, as a trace file is).
    pub fn for_user(tap: Tap, cfg: &MachineConfig) -> Feed {
        let bits = cfg.va_bits();
        if bits >= USER_BITS {
            Feed::Plain(tap)
        } else {
            let f = Fold::new(tap, bits).below(kernel_segments(cfg));
            Feed::Fold(Box::new(f), Vec::new())
        }
    }

    /// What folding had to say about the input `what`, if anything.
    pub fn warning(&self, what: &str) -> Option<String> {
        match self {
            Feed::Fold(f, _) => f.warning(what),
            _ => None,
        }
    }
}

/// Where address `a` of a `bits`-bit machine replaying a system trace was in the trace
/// (the inverse of `Canonical` and of the kernel's fold), if it can be told.
pub fn source_address(a: u64, bits: u32) -> Option<u64> {
    match bits {
        64.. => Some(a),
        48..=63 if a >> (bits - 1) & 1 == 1 => Some(a | !((1u64 << bits) - 1)),
        48..=63 => Some(a),
        _ => crate::fold::image_address(a, bits),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xlat_sim::presets;

    #[test]
    fn each_width_gets_its_view() {
        let skylake = presets::load("skylake").unwrap();
        let la57 = presets::load("icelake-la57").unwrap();
        let ppc = presets::load("ppc604").unwrap();
        assert_eq!(view(&skylake, false, "t").unwrap(), View::Plain);
        assert_eq!(view(&skylake, true, "t").unwrap(), View::Canonical(48));
        assert_eq!(view(&la57, true, "t").unwrap(), View::Canonical(57));
        let View::Fold {
            bits: 32,
            system,
            limit,
        } = view(&ppc, true, "t").unwrap()
        else {
            panic!("ppc604 folds")
        };
        assert!(system);
        assert_eq!(limit, Some(0xc000_0000));
    }

    /// The message is the one the CLI printed before the view moved here, word for word.
    #[test]
    fn a_system_trace_names_the_widths_it_replays_on() {
        let (what, name, bits) = ("t.xlt", "tiny", 20);
        let e = RunError::SystemTraceBits {
            what: what.into(),
            machine: name.into(),
            bits,
        };
        assert_eq!(
            e.to_string(),
            format!(
                "trace {what} is a system trace (x86-64 kernel and user addresses): it \
             replays on machines with 48 to 64 virtual-address bits, or 26 to 46 (folded, \
             the kernel in the top quarter); {} has {bits}",
                name
            )
        );
    }

    /// `source_address` undoes the canonical narrowing.
    #[test]
    fn source_addresses_undo_the_narrowing() {
        let k = 0xffff_8880_0012_3000u64;
        assert_eq!(source_address(k & ((1 << 48) - 1), 48), Some(k));
        assert_eq!(source_address(0x40_0000, 48), Some(0x40_0000));
        assert_eq!(source_address(k, 64), Some(k));
    }
}
