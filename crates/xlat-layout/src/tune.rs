//! Orders for a machine: a local search whose objective is the first-level ITLB misses of
//! target machines, each counted by a replay of a trace's [`Fetches`] with the code where
//! the order puts it (so associativity, replacement and everything else the machine models
//! count, not pages).
//!
//! It starts from the best of the orders it is given (C3, Pettis–Hansen, lld's...) and
//! tries moves: a run of up to four functions of the order (most often hot ones; a cold
//! one moved among the hot ones shifts the code behind it, as padding would) moved before
//! or after a hot function, or two hot functions swapped; every order is taken as a linker
//! makes it from its names ([`as_linked`]). A move is kept when no target has more misses
//! and their weighted sum is lower, so the result is never worse than its start on any
//! target. Moves come from a fixed-seed generator: the same inputs and evaluation budget
//! give the same order; a time limit that stops the search first makes it depend on speed.

use crate::fetches::Fetches;
use crate::linked::as_linked;
use crate::pieces::Pieces;
use std::sync::atomic::AtomicBool;
use std::time::Instant;
use xlat_runner::RunError;
use xlat_sim::Machine;
use xlat_symbols::Symbol;

/// One term of the objective: a machine replaying one trace's fetches.
pub struct Target<'a> {
    /// The trace's kept fetches.
    pub fetches: &'a Fetches,
    /// A fresh simulator of the machine.
    pub machine: &'a (dyn Fn() -> Result<Machine, RunError> + Sync),
    /// The term's weight in the sum.
    pub weight: f64,
}

/// When the search stops.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Orders evaluated at most (the starts included).
    pub evaluations: u64,
    /// Seconds at most, if limited.
    pub seconds: Option<f64>,
    /// The bytes after which the targets' first-level ITLB sets repeat (sets × page of
    /// the largest); 0: no scan of the hot code's offset.
    pub period: u64,
}

/// The search's result.
#[derive(Clone, Debug)]
pub struct Tuned {
    /// The order, as linked.
    pub order: Vec<usize>,
    /// The start it began from (an index into the starts).
    pub start: usize,
    /// Per start, per target: first-level ITLB misses.
    pub start_misses: Vec<Vec<u64>>,
    /// Per target: the order's misses.
    pub misses: Vec<u64>,
    /// Orders evaluated, the starts included.
    pub evaluations: u64,
    /// Moves kept.
    pub kept: u64,
    /// Whether the time limit stopped the search before the evaluation budget.
    pub timed_out: bool,
}

/// The binary being ordered: its functions (by address) and what the linker moves.
#[derive(Clone, Copy)]
pub struct Binary<'a> {
    pub funcs: &'a [&'a Symbol],
    pub pieces: &'a Pieces,
}

/// First-level ITLB misses of each target with the binary's functions in each of `orders`
/// (each with how many of its first functions the ordering file names): every (order,
/// target) replay, shared out over two threads (the machine's two cores; more would only
/// compete).
pub fn evaluate(
    b: Binary,
    orders: &[(&[usize], usize)],
    targets: &[Target],
    stop: &AtomicBool,
) -> Result<Vec<Vec<u64>>, RunError> {
    let shifts: Vec<Vec<i64>> = orders
        .iter()
        .map(|&(o, listed)| b.pieces.shifts(b.funcs, o, listed))
        .collect();
    let jobs: Vec<(usize, usize)> = (0..orders.len())
        .flat_map(|i| (0..targets.len()).map(move |t| (i, t)))
        .collect();
    let one = |&(i, t): &(usize, usize)| -> Result<u64, RunError> {
        let mut sim = (targets[t].machine)()?;
        targets[t].fetches.replay(&mut sim, &shifts[i], stop)?;
        Ok(sim.l1_misses()[0])
    };
    let (x, y) = jobs.split_at(jobs.len().div_ceil(2));
    let all: Vec<u64> = if y.is_empty() {
        x.iter().map(one).collect::<Result<_, _>>()?
    } else {
        let (rx, ry) = std::thread::scope(|s| {
            let h = s.spawn(|| y.iter().map(one).collect::<Result<Vec<u64>, RunError>>());
            let rx = x.iter().map(one).collect::<Result<Vec<u64>, RunError>>();
            (
                rx,
                h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)),
            )
        });
        let mut all = rx?;
        all.extend(ry?);
        all
    };
    Ok(all
        .chunks(targets.len().max(1))
        .map(<[u64]>::to_vec)
        .collect())
}

/// The weighted sum of `misses` over `targets`.
fn cost(misses: &[u64], targets: &[Target]) -> f64 {
    misses
        .iter()
        .zip(targets)
        .map(|(&m, t)| m as f64 * t.weight)
        .sum()
}

/// xorshift64*: moves from a fixed seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n.max(1)
    }
}

/// `order` with one random move applied (see the module); `None` if it has no hot
/// function to move against.
fn moved(order: &[usize], hot: &[bool], rng: &mut Rng) -> Option<Vec<usize>> {
    let hot_at: Vec<usize> = (0..order.len()).filter(|&p| hot[order[p]]).collect();
    let (&first, &last) = (hot_at.first()?, hot_at.last()?);
    if order.len() < 2 {
        return None;
    }
    let mut o = order.to_vec();
    let pick = |rng: &mut Rng| hot_at[rng.below(hot_at.len())];
    match rng.below(10) {
        // Two hot functions swapped.
        0 | 1 => {
            let (x, y) = (pick(rng), pick(rng));
            if x == y {
                return None;
            }
            o.swap(x, y);
        }
        // A cold function before a hot one, or before them all: the code behind it moves
        // by its size, as padding would.
        2..=4 => {
            let cold: Vec<usize> = (0..order.len()).filter(|&p| !hot[order[p]]).collect();
            let from = *cold.get(rng.below(cold.len()))?;
            let to = if rng.below(2) == 0 { first } else { pick(rng) };
            let f = o.remove(from);
            o.insert(if to > from { to - 1 } else { to }, f);
        }
        // A cold function among the hot ones back to the end.
        5 => {
            let among: Vec<usize> = (first..last).filter(|&p| !hot[order[p]]).collect();
            let from = *among.get(rng.below(among.len()))?;
            let f = o.remove(from);
            o.push(f);
        }
        // A run of one to four functions from a hot one, before or after another hot one.
        _ => {
            let from = pick(rng);
            let len = [1, 1, 1, 2, 3, 4][rng.below(6)].min(order.len() - from);
            let to = pick(rng);
            if (from..from + len).contains(&to) {
                return None;
            }
            let seg: Vec<usize> = o.drain(from..from + len).collect();
            let to = if to > from { to - len } else { to } + rng.below(2);
            o.splice(to..to, seg);
        }
    }
    Some(o)
}

/// Searches from the best of `starts` (orders of `b`'s functions as linked, each with how
/// many of its functions an ordering file names; `hot[i]`: function `i` ran) for an
/// order with fewer first-level ITLB misses on `targets`, within `budget`. The result
/// names every function.
pub fn tune(
    b: Binary,
    hot: &[bool],
    starts: &[(Vec<usize>, usize)],
    targets: &[Target],
    budget: Budget,
    stop: &AtomicBool,
) -> Result<Tuned, RunError> {
    let t0 = Instant::now();
    let funcs = b.funcs;
    let listed: Vec<(&[usize], usize)> = starts.iter().map(|(o, n)| (&o[..], *n)).collect();
    let start_misses = evaluate(b, &listed, targets, stop)?;
    let start = (0..starts.len())
        .min_by(|&a, &b| {
            cost(&start_misses[a], targets).total_cmp(&cost(&start_misses[b], targets))
        })
        .unwrap_or(0);
    let mut best = as_linked(funcs, starts.get(start).map_or(&[][..], |s| &s.0));
    let mut misses = start_misses
        .get(start)
        .cloned()
        .unwrap_or_else(|| vec![0; targets.len()]);
    let mut evaluations = starts.len() as u64;
    // A start whose ordering file leaves functions out, written in full (as the result
    // is): a link map's sections without a listed function then go last.
    if b.pieces.are_sections() && starts.get(start).is_some_and(|s| s.1 < best.len()) {
        misses = evaluate(b, &[(&best, best.len())], targets, stop)?.remove(0);
        evaluations += 1;
    }
    let (mut kept, mut timed_out) = (0, false);
    // Candidates are tried two at a time (one per core); of those no target finds worse
    // than the best so far, the cheaper is kept (the first on a tie).
    let mut try_pair = |cands: Vec<Vec<usize>>,
                        best: &mut Vec<usize>,
                        misses: &mut Vec<u64>,
                        evaluations: &mut u64,
                        sideways: bool|
     -> Result<(), RunError> {
        let orders: Vec<(&[usize], usize)> = cands.iter().map(|o| (&o[..], o.len())).collect();
        let ms = evaluate(b, &orders, targets, stop)?;
        *evaluations += cands.len() as u64;
        let mut pick: Option<usize> = None;
        for (i, m) in ms.iter().enumerate() {
            let no_worse = m.iter().zip(misses.iter()).all(|(a, b)| a <= b);
            let better = cost(m, targets) < cost(misses, targets);
            if no_worse
                && (better || sideways)
                && pick.is_none_or(|p| cost(m, targets) < cost(&ms[p], targets))
            {
                pick = Some(i);
            }
        }
        if let Some(i) = pick {
            kept += u64::from(ms[i] != *misses);
            *best = cands[i].clone();
            *misses = ms[i].clone();
        }
        Ok(())
    };
    // The hot code's offset: cold functions, largest first, put before it, until they
    // shift it by a whole `period` (which sets its pages fall in).
    let mut cold: Vec<usize> = (0..funcs.len()).filter(|&i| !hot[i]).collect();
    cold.sort_by_key(|&i| (std::cmp::Reverse(funcs[i].size), i));
    let base = best.clone();
    let (mut pad, mut k) = (0u64, 0);
    while k < cold.len() && pad < budget.period && evaluations + 2 <= budget.evaluations / 2 {
        let mut pair = Vec::new();
        while pair.len() < 2 && k < cold.len() && pad < budget.period {
            pad += funcs[cold[k]].size;
            k += 1;
            let front = &cold[..k];
            let mut o = front.to_vec();
            o.extend(base.iter().filter(|i| !front.contains(i)));
            pair.push(as_linked(funcs, &o));
        }
        try_pair(pair, &mut best, &mut misses, &mut evaluations, false)?;
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut tries = 0u64;
    while evaluations < budget.evaluations && misses.iter().any(|&m| m > 0) {
        if budget
            .seconds
            .is_some_and(|s| t0.elapsed().as_secs_f64() >= s)
        {
            timed_out = true;
            break;
        }
        let mut pair: Vec<Vec<usize>> = Vec::new();
        while pair.len() < 2 && evaluations + (pair.len() as u64) < budget.evaluations {
            tries += 1;
            if tries > 64 * budget.evaluations.max(1) {
                break;
            }
            if let Some(o) = moved(&best, hot, &mut rng).map(|o| as_linked(funcs, &o)) {
                if o != best && !pair.contains(&o) {
                    pair.push(o);
                }
            }
        }
        if pair.is_empty() {
            break;
        }
        // A move that changes nothing is kept too (it may lead somewhere: padding often
        // helps only once two cold functions are in).
        try_pair(pair, &mut best, &mut misses, &mut evaluations, true)?;
    }
    Ok(Tuned {
        order: best,
        start,
        start_misses,
        misses,
        evaluations,
        kept,
        timed_out,
    })
}
