//! Axis ranges and tick labels: labels precise enough that no two ticks of an axis read
//! the same (a flat series at 0.0001 once had ten ticks labelled `0`).

/// The linear axis range of `v` with a margin (a single value gets a range around it).
pub(crate) fn range(v: impl Iterator<Item = f64> + Clone) -> (f64, f64) {
    let lo = v.clone().fold(f64::INFINITY, f64::min);
    let hi = v.fold(f64::NEG_INFINITY, f64::max);
    let lo = lo.min(0.0);
    if hi <= lo {
        // A flat series: a range around it (relative, so that it is not lost to rounding).
        return (lo, lo + lo.abs().max(1.0));
    }
    (lo, hi + (hi - lo) * 0.05)
}

/// The ticks of a log axis over `lo..hi` (`0 < lo < hi`): the powers of ten in it, and
/// their 2 and 5 multiples when it spans fewer than three; each computed exactly once, so
/// no two alike (plotters' own log ticks put two at 1000).
pub(crate) fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    // Finite doubles lie within 10^-324..10^309.
    let dec = |v: f64| v.log10().clamp(-324.0, 309.0) as i32;
    let (a, b) = (dec(lo) - 1, dec(hi) + 1);
    let decades: Vec<f64> = (a..=b).map(|k| 10f64.powi(k)).collect();
    let inside = |v: &f64| *v >= lo && *v <= hi;
    let few = decades.iter().filter(|v| inside(v)).count() < 3;
    let mut out: Vec<f64> = decades
        .iter()
        .flat_map(|&d| {
            if few {
                vec![d, 2.0 * d, 5.0 * d]
            } else {
                vec![d]
            }
        })
        .filter(inside)
        .collect();
    out.dedup();
    out
}

/// How to label the ticks of an axis over `lo..hi`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Labels {
    /// Ticks apart (linear axes), or `None` on a log axis (labels of 3 significant digits).
    step: Option<f64>,
    /// Scientific notation (magnitudes from 1e7 or below 1e-3).
    sci: bool,
}

/// Ticks plotters draws on an axis at most (its default for a mesh).
const TICKS: f64 = 10.0;

impl Labels {
    pub(crate) fn new(lo: f64, hi: f64, log: bool) -> Labels {
        let big = lo.abs().max(hi.abs());
        let step = (!log).then(|| ((hi - lo) / TICKS).abs().max(big * 1e-15).max(1e-300));
        let small = if log { lo.abs() } else { big };
        Labels {
            step,
            sci: big >= 1e7 || (small < 1e-3 && small > 0.0),
        }
    }

    pub(crate) fn label(&self, v: f64) -> String {
        if v == 0.0 {
            return "0".into();
        }
        let mag = |x: f64| x.abs().log10().floor();
        let trim = |s: String| {
            if s.contains('.') {
                s.trim_end_matches('0').trim_end_matches('.').to_string()
            } else {
                s
            }
        };
        if self.sci {
            // Mantissa digits down to the step's (3 significant digits on a log axis).
            let d = match self.step {
                Some(st) => (mag(v) - mag(st)).clamp(0.0, 15.0) as usize,
                None => 2,
            };
            let s = format!("{v:.d$e}");
            let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
            return format!("{}e{e}", trim(m.to_string()));
        }
        let d = match self.step {
            Some(st) => (-mag(st)).clamp(0.0, 15.0) as usize,
            None => (2.0 - mag(v)).clamp(0.0, 15.0) as usize,
        };
        trim(format!("{v:.d$}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ticks 1, 2 or 5 × 10^k apart (plotters' choice) over `lo..hi`: distinct labels.
    #[test]
    fn no_two_ticks_read_the_same() {
        for (lo, hi) in [
            (0.0, 0.000105),
            (0.0, 0.672),
            (0.0, 1.05e9),
            (1000.001, 1000.002),
            (-3.0, 3.0),
            (0.0, 1e-300 * 1.05),
            (5e6, 5.0001e6),
        ] {
            let l = Labels::new(lo, hi, false);
            let raw = (hi - lo) / TICKS;
            for f in [1.0, 2.0, 5.0] {
                let step = f * 10f64.powf(raw.log10().floor());
                let ticks: Vec<String> = (0..=(((hi - lo) / step) as usize).min(40))
                    .map(|i| l.label((lo / step).ceil() * step + i as f64 * step))
                    .collect();
                let mut u = ticks.clone();
                u.sort();
                u.dedup();
                assert_eq!(u.len(), ticks.len(), "{lo}..{hi} by {step}: {ticks:?}");
            }
        }
        for (lo, hi) in [
            (33.0, 1500.0),
            (0.001, 1000.0),
            (2.5e-7, 1.5e300),
            (0.5, 0.9),
        ] {
            let t = log_ticks(lo, hi);
            let l = Labels::new(lo, hi, true);
            let mut s: Vec<String> = t.iter().map(|&v| l.label(v)).collect();
            let n = s.len();
            s.sort();
            s.dedup();
            assert_eq!(s.len(), n, "{lo}..{hi}: {t:?}");
            assert!(t.iter().all(|&v| v >= lo && v <= hi));
        }
        assert_eq!(log_ticks(33.0, 1500.0), [50.0, 100.0, 200.0, 500.0, 1000.0]);
        let log = Labels::new(0.001, 1000.0, true);
        let t: Vec<String> = [0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0]
            .iter()
            .map(|&v| log.label(v))
            .collect();
        assert_eq!(t, ["0.001", "0.01", "0.1", "1", "10", "100", "1000"]);
        assert_eq!(Labels::new(1e-5, 1.0, true).label(1e-5), "1e-5");
        let log = Labels::new(0.05, 40.0, true);
        assert_eq!(log.label(0.05), "0.05");
        assert_eq!(log.label(20.0), "20");
        assert_eq!(Labels::new(0.0, 4096.0, false).label(1024.0), "1024");
    }
}
