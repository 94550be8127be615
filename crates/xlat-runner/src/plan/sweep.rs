//! `--set` and `--sweep`: the changed fields of each machine of a sweep, counted before
//! they are made ([`machine_with_sets`]: a machine with its changes).
//!
//! A field both set and swept takes the sweep's values: the machine simulated, its
//! name, the CSV and JSON columns and the plot all show the swept value. A field set
//! twice takes the last value (as the edits are applied in order); a field swept twice
//! is an error (which combination would be meant is unclear).

use super::error::{bail, Context};
use super::{PlanError, MAX_RUNS};
use xlat_sim::{presets, MachineConfig};

type Result<T> = std::result::Result<T, PlanError>;

/// A field path as compared (`tlb.levels[0].d[0].entries`): without blanks.
pub fn field_key(path: &str) -> String {
    path.chars().filter(|c| !c.is_whitespace()).collect()
}

/// Machine `name` (a preset or TOML file) with each `PATH=VALUE` of `sets` applied
/// (`tlb.levels[1].unified[0].entries=2048`, `os.thp=never`: a VALUE that is not TOML is
/// a string); the name then lists them.
pub fn machine_with_sets(name: &str, sets: &[String]) -> Result<MachineConfig> {
    let cfg = presets::load(name)?;
    if sets.is_empty() {
        return Ok(cfg);
    }
    let mut parsed = Vec::new();
    for s in sets {
        let Some((path, value)) = s.split_once('=') else {
            bail!("--set {s}: write PATH=VALUE, e.g. tlb.levels[0].d[0].entries=128");
        };
        let (path, value) = (path.trim(), value.trim());
        let v = toml::from_str::<toml::Table>(&format!("v = {value}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.to_string()));
        parsed.push((path.to_string(), v));
    }
    let mut cfg = cfg
        .with_overrides(parsed.iter().map(|(p, v)| (p.as_str(), v)))
        .with_context(|| format!("machine {name}"))?;
    cfg.name = format!("{} {}", cfg.name, sets.join(" "));
    Ok(cfg)
}

/// The `--sweep PATH=V1,V2,...` specs parsed: (path, values), in order.
fn parse(sweeps: &[String]) -> Result<Vec<(String, Vec<String>)>> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for s in sweeps {
        let Some((path, values)) = s.split_once('=') else {
            bail!("--sweep {s}: write PATH=V1,V2,..., e.g. tlb.levels[0].d[0].entries=16,32,64");
        };
        let path = path.trim();
        if path.is_empty() {
            bail!("--sweep {s}: no field before `=`");
        }
        let values: Vec<String> = values
            .split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
            .collect();
        if values.is_empty() {
            bail!("--sweep {s}: no values");
        }
        if out.iter().any(|(p, _)| field_key(p) == field_key(path)) {
            bail!("--sweep {path} is given twice: give its values in one --sweep");
        }
        out.push((path.to_string(), values));
    }
    Ok(out)
}

/// How many combinations `sweeps` make (their value counts multiplied), without making
/// them; an error if more than `most` (or than `u64`).
pub fn count(sweeps: &[String], most: u64) -> Result<u64> {
    let parsed = parse(sweeps)?;
    let mut n: u64 = 1;
    for (_, v) in &parsed {
        n = n.saturating_mul(v.len() as u64);
    }
    if n > most {
        let sizes: Vec<String> = parsed.iter().map(|(_, v)| v.len().to_string()).collect();
        bail!(
            "--sweep: {} = {n} combinations, more than the {most} this sweep may have \
             (at most {MAX_RUNS} runs: machines × combinations × inputs)",
            sizes.join(" × "),
        );
    }
    Ok(n)
}

/// Every combination of the `--sweep PATH=V1,V2,...` values, as `PATH=V` lists (the
/// last sweep varies fastest); one empty combination without sweeps. Counted first:
/// more than [`MAX_RUNS`] combinations are refused before any is made.
pub fn combinations(sweeps: &[String]) -> Result<Vec<Vec<String>>> {
    count(sweeps, MAX_RUNS as u64)?;
    let mut out: Vec<Vec<String>> = vec![Vec::new()];
    for (path, values) in parse(sweeps)? {
        out = out
            .into_iter()
            .flat_map(|c| {
                let path = &path;
                values.iter().map(move |v| {
                    let mut c = c.clone();
                    c.push(format!("{path}={v}"));
                    c
                })
            })
            .collect();
    }
    Ok(out)
}

/// The `--set` edits that take effect beside a `--sweep` combination, then the
/// combination: a set field that is swept, or set again later, is left out.
pub fn effective(sets: &[String], combination: &[String]) -> Vec<String> {
    let key = |s: &String| field_key(s.split_once('=').map_or(s.as_str(), |(p, _)| p));
    let later: Vec<String> = combination.iter().map(key).collect();
    let mut out: Vec<String> = Vec::new();
    for (i, s) in sets.iter().enumerate() {
        let k = key(s);
        if sets[i + 1..].iter().any(|t| key(t) == k) || later.contains(&k) {
            continue;
        }
        out.push(s.clone());
    }
    out.extend(combination.iter().cloned());
    out
}

/// `PATH=VALUE` strings as (path, value) pairs; a path given twice keeps its last value
/// (the one the machine was built with), at its first place.
pub fn params_of(sets: &[String]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (p, v) in sets.iter().filter_map(|s| s.split_once('=')) {
        let (p, v) = (p.trim().to_string(), v.trim().to_string());
        match out.iter_mut().find(|(q, _)| field_key(q) == field_key(&p)) {
            Some(slot) => slot.1 = v,
            None => out.push((p, v)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_swept_field_wins_over_its_set_everywhere() {
        let sets = vec!["a.b=16".to_string(), "c=1".to_string()];
        let e = effective(&sets, &["a.b=64".to_string()]);
        assert_eq!(e, vec!["c=1".to_string(), "a.b=64".to_string()]);
        assert_eq!(
            params_of(&e),
            vec![("c".into(), "1".into()), ("a.b".into(), "64".into())]
        );
        // Set twice: the last one.
        let e = effective(&["x=1".into(), "x = 2".into()], &[]);
        assert_eq!(params_of(&e), vec![("x".into(), "2".into())]);
        assert_eq!(params_of(&["x=1".into(), "x=2".into()])[0].1, "2");
    }

    #[test]
    fn a_field_swept_twice_is_an_error() {
        let e = combinations(&["a=1,2".into(), " a =3".into()]).unwrap_err();
        assert!(e.to_string().contains("given twice"), "{e}");
    }

    #[test]
    fn a_huge_sweep_is_refused_before_it_is_made() {
        let v = (0..100)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(",");
        let four: Vec<String> = (0..4).map(|k| format!("f{k}={v}")).collect();
        let t = std::time::Instant::now();
        let e = combinations(&four).unwrap_err().to_string();
        assert!(t.elapsed().as_secs() < 2);
        assert!(
            e.contains("100 × 100 × 100 × 100 = 100000000") && e.contains("100000"),
            "{e}"
        );
        let many: Vec<String> = (0..70).map(|k| format!("g{k}=1,2")).collect();
        assert!(count(&many, u64::MAX - 1).is_err());
    }

    proptest! {
        /// Any spec list: the count is the product of the value counts, and the
        /// combinations are made (that many, each naming every path once) exactly when
        /// the count is within the limit.
        #[test]
        fn counted_before_made(
            specs in proptest::collection::vec(("[a-c]{1,2}", proptest::collection::vec("[0-9]{0,3}", 0..40)), 0..6)
        ) {
            let sweeps: Vec<String> = specs
                .iter()
                .map(|(p, vs)| format!("{p}={}", vs.join(",")))
                .collect();
            match combinations(&sweeps) {
                Ok(c) => {
                    let n = count(&sweeps, u64::MAX).unwrap();
                    prop_assert!(n <= MAX_RUNS as u64);
                    prop_assert_eq!(c.len() as u64, n);
                    for combo in &c {
                        prop_assert_eq!(combo.len(), sweeps.len());
                    }
                }
                Err(e) => {
                    let m = e.to_string();
                    prop_assert!(m.starts_with("--sweep"), "{}", m);
                }
            }
        }
    }
}
