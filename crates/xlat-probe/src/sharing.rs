//! What shares the TLBs and the CPU with the probe: the core's SMT siblings (sysfs), the
//! hypervisor (CPUID, in [`crate::cpuid`]), and the CPU time the host stole and the other
//! work that ran while the probe measured (`/proc/stat` before and after).
//!
//! On a cloud VM the capacity a process gets from a TLB moves from run to run (the
//! sibling thread and other tenants hold entries); these say why an interval is wide.

use serde::{Deserialize, Serialize};

/// Cumulative CPU time of all CPUs (`/proc/stat`'s `cpu` line, in clock ticks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTimes {
    /// user + nice + system + irq + softirq (guest time is inside user).
    pub busy: u64,
    /// idle + iowait.
    pub idle: u64,
    /// Time the hypervisor ran something else while a vCPU wanted to run.
    pub steal: u64,
}

impl CpuTimes {
    /// Parse `/proc/stat`'s first line (`cpu  user nice system idle iowait irq softirq
    /// steal ...`); `None` when it is not one.
    pub fn parse(stat: &str) -> Option<Self> {
        let line = stat.lines().next()?;
        let mut f = line.split_whitespace();
        if f.next()? != "cpu" {
            return None;
        }
        let v: Vec<u64> = f.take(8).map(|x| x.parse().ok()).collect::<Option<_>>()?;
        if v.len() < 4 {
            return None;
        }
        let at = |i: usize| v.get(i).copied().unwrap_or(0);
        Some(CpuTimes {
            busy: at(0) + at(1) + at(2) + at(5) + at(6),
            idle: at(3) + at(4),
            steal: at(7),
        })
    }

    /// This machine's, now.
    pub fn read() -> Option<Self> {
        Self::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }
}

/// What shared the machine during a measurement.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sharing {
    /// Hardware threads of the probe's core online (2: an SMT sibling shares its TLBs).
    pub smt_threads: Option<usize>,
    /// Share of all CPUs' time the hypervisor stole during the measurement.
    pub steal: Option<f64>,
    /// Share of all CPUs' time busy during the measurement, the probe's one CPU included.
    pub busy: Option<f64>,
    /// Online CPUs (to read `busy`: the probe alone keeps one of them busy).
    pub cpus: usize,
}

impl Sharing {
    /// From the CPU times before and after a measurement.
    pub fn between(
        before: CpuTimes,
        after: CpuTimes,
        smt_threads: Option<usize>,
        cpus: usize,
    ) -> Self {
        let d = |a: u64, b: u64| a.saturating_sub(b) as f64;
        let (busy, idle, steal) = (
            d(after.busy, before.busy),
            d(after.idle, before.idle),
            d(after.steal, before.steal),
        );
        let total = busy + idle + steal;
        let share = |x: f64| (total > 0.0).then(|| x / total);
        Sharing {
            smt_threads,
            steal: share(steal),
            busy: share(busy),
            cpus,
        }
    }

    /// One line for the report: what shared the TLBs and the CPUs.
    pub fn describe(&self, hypervisor: Option<&str>) -> String {
        let mut parts = Vec::new();
        match self.smt_threads {
            Some(n) if n > 1 => parts.push(format!(
                "an SMT sibling ({n} threads on the probe's core share its TLBs)"
            )),
            Some(_) => parts.push("no SMT sibling online".into()),
            None => parts.push("SMT siblings unknown".into()),
        }
        if let Some(hv) = hypervisor {
            parts.push(format!(
                "a hypervisor ({hv}: other tenants may run on the same physical core)"
            ));
        }
        if let Some(s) = self.steal {
            parts.push(format!("{:.1}% of CPU time stolen by the host", s * 100.0));
        }
        if let Some(b) = self.busy {
            let own = 1.0 / self.cpus.max(1) as f64;
            parts.push(format!(
                "CPUs {:.0}% busy (the probe alone: {:.0}%)",
                b * 100.0,
                own * 100.0
            ));
        }
        parts.join("; ")
    }
}

/// Hardware threads per core: the most siblings any of CPUs `0..cpus` has online (sysfs
/// `thread_siblings_list`, e.g. `0-1` or `0,8`; the probe is not pinned to one CPU).
pub fn smt_threads(cpus: usize) -> Option<usize> {
    (0..cpus)
        .filter_map(|cpu| {
            let p = format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list");
            parse_cpu_list(std::fs::read_to_string(p).ok()?.trim())
        })
        .max()
}

/// Number of CPUs in a sysfs CPU list (`0-3,8,10-11`).
pub fn parse_cpu_list(s: &str) -> Option<usize> {
    let mut n = 0;
    for part in s.split(',').filter(|p| !p.is_empty()) {
        n += match part.split_once('-') {
            Some((a, b)) => {
                b.parse::<usize>()
                    .ok()?
                    .checked_sub(a.parse::<usize>().ok()?)?
                    + 1
            }
            None => {
                part.parse::<usize>().ok()?;
                1
            }
        };
    }
    (n > 0).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_and_shares() {
        let a = CpuTimes::parse("cpu  100 0 50 1000 10 5 5 20 0 0\ncpu0 1 2 3").unwrap();
        assert_eq!(
            a,
            CpuTimes {
                busy: 160,
                idle: 1010,
                steal: 20
            }
        );
        let b = CpuTimes::parse("cpu  200 0 100 1100 10 5 5 70 0 0").unwrap();
        let s = Sharing::between(a, b, Some(2), 2);
        // 150 busy, 100 idle, 50 stolen of 300.
        assert_eq!(s.busy, Some(0.5));
        assert!((s.steal.unwrap() - 1.0 / 6.0).abs() < 1e-12);
        let d = s.describe(Some("KVM"));
        assert!(d.contains("SMT sibling (2 threads"), "{d}");
        assert!(d.contains("16.7% of CPU time stolen"), "{d}");
        assert!(d.contains("the probe alone: 50%"), "{d}");
        assert_eq!(CpuTimes::parse("intr 1 2"), None);
        assert_eq!(CpuTimes::parse("cpu 1 x 3 4"), None);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-1"), Some(2));
        assert_eq!(parse_cpu_list("0,8"), Some(2));
        assert_eq!(parse_cpu_list("3"), Some(1));
        assert_eq!(parse_cpu_list("0-3,8,10-11"), Some(7));
        assert_eq!(parse_cpu_list("5-2"), None);
        assert_eq!(parse_cpu_list(""), None);
    }
}
