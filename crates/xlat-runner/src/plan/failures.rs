//! Machines of a sweep that do not load, reported once per cause: an error every point
//! shares is one message (with the valid values nearest each point), not one per point.

use super::{Failure, Plan, PlanError};
use crate::fanout::chain;
use xlat_sim::config::{geometry_fix, nearest_multiples, ConfigError};
use xlat_sim::MachineConfig;

/// What makes two machines' errors the same: a geometry error of one field (its
/// values differ from point to point), or else the same message.
#[derive(PartialEq)]
enum Cause {
    Geometry(String),
    Same(String),
}

/// Machines that failed alike: (base machine, cause, the points' (entries, ways), messages).
type Group = (String, Cause, Vec<(u32, u32)>, Vec<String>);

/// The failures of the machines that did not load, one per cause and base machine, in
/// order of first appearance; each error is its message (a cause and its sources joined
/// by `: `; more than one machine's: one message for all).
pub fn machine_failures(
    plan: &Plan,
    machines: &[Result<MachineConfig, PlanError>],
) -> Vec<Failure<String>> {
    let mut groups: Vec<Group> = Vec::new();
    for (m, r) in plan.machines.iter().zip(machines) {
        let Err(e) = r else { continue };
        let geometry = match e.config() {
            Some(ConfigError::Geometry {
                field,
                entries,
                ways,
            }) => Some((field.clone(), *entries, *ways)),
            _ => None,
        };
        let text = chain(e);
        let (cause, point) = match geometry {
            Some((field, entries, ways)) => (Cause::Geometry(field), Some((entries, ways))),
            None => (Cause::Same(text.clone()), None),
        };
        match groups.iter_mut().find(|g| g.0 == m.name && g.1 == cause) {
            Some(g) => {
                g.2.extend(point);
                g.3.push(text);
            }
            None => groups.push((
                m.name.clone(),
                cause,
                point.into_iter().collect(),
                vec![text],
            )),
        }
    }
    groups
        .into_iter()
        .map(|(name, cause, points, messages)| {
            let k = messages.len();
            let machine = if k == 1 {
                name.clone()
            } else {
                format!("{name} ({k} machines of the sweep)")
            };
            let error = match cause {
                _ if k == 1 => messages[0].clone(),
                Cause::Geometry(field) => {
                    let lines: Vec<String> = points
                        .iter()
                        .map(|&(e, w)| format!("  entries {e}, {w} ways: {}", geometry_fix(e, w)))
                        .collect();
                    format!(
                        "{field}: the entries must be a multiple of the ways, in each of \
                         these {k} machines:\n{}{}",
                        lines.join("\n"),
                        nearest_sweep(&field, &points)
                    )
                }
                Cause::Same(msg) => format!("{msg} (the same in each of {k} machines)"),
            };
            Failure {
                machine,
                input: "(every input)".into(),
                error,
            }
        })
        .collect()
}

/// `--sweep` of the entries nearest the points', when they all have the same ways.
fn nearest_sweep(field: &str, points: &[(u32, u32)]) -> String {
    let (Some(path), Some(&(_, w))) = (field.strip_suffix(".ways"), points.first()) else {
        return String::new();
    };
    if points.iter().any(|p| p.1 != w) {
        return String::new();
    }
    let mut near: Vec<String> = Vec::new();
    for &(e, _) in points {
        let (lo, hi) = nearest_multiples(e, w);
        let v = match lo {
            Some(lo) if e - lo <= hi - e => lo,
            _ => hi,
        };
        if !near.contains(&v.to_string()) {
            near.push(v.to_string());
        }
    }
    format!("\ne.g. --sweep '{path}.entries={}'", near.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_geometry_error_of_every_point_is_one_failure_with_the_nearest_values() {
        let p = Plan::new(
            &["skylake".into()],
            &["stride".into()],
            &[],
            &[],
            &["tlb.levels[1].unified[0].entries=512,1024,1536,2048".into()],
            false,
            &crate::run::Host::default(),
            &mut |_| {},
        )
        .unwrap();
        let f = machine_failures(&p, &p.load_machines());
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].machine, "skylake (3 machines of the sweep)");
        let e = &f[0].error;
        assert!(e.contains("multiple of the ways"), "{e}");
        for near in ["504 or 516", "1020 or 1032", "2040 or 2052"] {
            assert_eq!(e.matches(near).count(), 1, "{e}");
        }
        assert!(!e.contains("1536"), "{e}");
        assert!(
            e.ends_with("e.g. --sweep 'tlb.levels[1].unified[0].entries=516,1020,2052'"),
            "{e}"
        );
    }
}
