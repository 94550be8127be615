//! Plan and shard-report JSON of any shape (issue 35, class 6): a real plan's files
//! mutated at random places (a field deleted; a wrong type; a negative, huge, zero or
//! maximal number) merge to a clear error naming the file, or merge; never a panic or
//! a hang.

use proptest::prelude::*;
use serde_json::{json, Value};

mod common;
mod plan_fixture;
use plan_fixture::*;

/// A random mutation at a random place of a JSON value: the path of keys/indices and
/// what is done there.
#[derive(Debug, Clone)]
enum Change {
    Delete,
    WrongType,
    Negative,
    HugeFloat,
    Zero,
    MaxU64,
}

/// Every (path, value) of `v`, depth first.
fn places(v: &Value, at: Vec<Value>, out: &mut Vec<Vec<Value>>) {
    out.push(at.clone());
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let mut p = at.clone();
                p.push(json!(k));
                places(x, p, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                let mut p = at.clone();
                p.push(json!(i));
                places(x, p, out);
            }
        }
        _ => {}
    }
}

/// Applies `c` at `path` (not the root); whether the change must be refused.
fn apply(v: &mut Value, path: &[Value], c: &Change) -> bool {
    let (last, parent) = path.split_last().unwrap();
    let mut cur = &mut *v;
    for k in parent {
        cur = match k {
            Value::String(s) => &mut cur[s.as_str()],
            _ => &mut cur[k.as_u64().unwrap() as usize],
        };
    }
    let slot = match last {
        Value::String(s) => {
            if let Change::Delete = c {
                cur.as_object_mut().unwrap().remove(s.as_str());
                return false;
            }
            &mut cur[s.as_str()]
        }
        _ => {
            let i = last.as_u64().unwrap() as usize;
            if let Change::Delete = c {
                cur.as_array_mut().unwrap().remove(i);
                return false;
            }
            &mut cur[i]
        }
    };
    let was_number = slot.is_number();
    match c {
        Change::Delete => unreachable!(),
        Change::WrongType => {
            *slot = if slot.is_string() {
                json!(7)
            } else {
                json!("x")
            };
            // Every field of these files is typed: a string for a number, a number for a
            // string, either for an array or object, is refused (`null` would be an
            // absent option, so it is not used).
            true
        }
        Change::Negative => {
            *slot = json!(-1);
            was_number
        }
        Change::HugeFloat => {
            *slot = json!(1e300);
            was_number
        }
        Change::Zero => {
            *slot = json!(0);
            false
        }
        Change::MaxU64 => {
            *slot = json!(u64::MAX);
            false
        }
    }
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        Just(Change::Delete),
        Just(Change::WrongType),
        Just(Change::Negative),
        Just(Change::HugeFloat),
        Just(Change::Zero),
        Just(Change::MaxU64),
    ]
}

/// Mutates `file` of a copy of the fixture at the `pick`-th place with `c` and merges:
/// never a panic or a hang; a clear error naming `file` where the change must be
/// refused, else an error naming a file of the plan, or a merge that writes its CSV.
fn mutated_merge(file: &str, pick: prop::sample::Index, c: &Change) -> Result<(), TestCaseError> {
    let (d, p) = plan_copy();
    let mut v = read_json(&p.join(file));
    let mut all = Vec::new();
    places(&v, Vec::new(), &mut all);
    all.remove(0);
    let path = pick.get(&all).clone();
    let refuse = apply(&mut v, &path, c);
    write_json(&p.join(file), &v);
    let csv = d.path().join("out.csv");
    let (ok, _, err) = merge(&p, &["--csv", csv.to_str().unwrap()]);
    if refuse {
        prop_assert!(!ok && err.contains(file), "{:?} at {:?}: {}", c, path, err);
    }
    if ok {
        let rows = std::fs::read_to_string(&csv).unwrap().lines().count();
        prop_assert_eq!(rows, 9);
    } else {
        prop_assert!(
            err.contains("plan.json") || err.contains("shard-"),
            "{:?} at {:?}: {}",
            c,
            path,
            err
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_mutation_of_a_shard_report_is_an_error_or_merges(pick in any::<prop::sample::Index>(), c in change()) {
        mutated_merge("shard-0.json", pick, &c)?;
    }

    #[test]
    fn any_mutation_of_a_plan_is_an_error_or_merges(pick in any::<prop::sample::Index>(), c in change()) {
        mutated_merge("plan.json", pick, &c)?;
    }
}
