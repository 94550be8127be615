//! What the running kernel's release says about OS behaviour the model has a switch for.

use xlat_sim::config::ThpCow;

/// How a write to a shared huge page is handled by kernel `release` (`uname -r`, e.g.
/// `6.18.44-fc`): Linux ≥ 5.8 splits the mapping and copies one base page (commit
/// 3917c80280c9, "thp: change CoW semantics for anon-THP"); earlier kernels copied the huge
/// page. `None` for a release it cannot read.
pub fn thp_cow(release: &str) -> Option<ThpCow> {
    let mut parts = release.split(['.', '-']);
    let major: u32 = parts.next()?.parse().ok()?;
    let minor: u32 = parts.next()?.parse().ok()?;
    Some(if (major, minor) >= (5, 8) {
        ThpCow::Split
    } else {
        ThpCow::Copy
    })
}

/// The source line for [`thp_cow`]'s answer.
pub fn thp_cow_source(release: &str, cow: ThpCow) -> String {
    match cow {
        ThpCow::Split => format!(
            "the running kernel ({release}) is Linux >= 5.8: a write to a shared huge page \
             splits the mapping and copies one base page (commit 3917c80280c9)"
        ),
        ThpCow::Copy => format!(
            "the running kernel ({release}) is Linux < 5.8: a write to a shared huge page \
             copies all of it"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases() {
        assert_eq!(thp_cow("6.18.44-fc-v595"), Some(ThpCow::Split));
        assert_eq!(thp_cow("5.8.0"), Some(ThpCow::Split));
        assert_eq!(thp_cow("5.7.19-arch1"), Some(ThpCow::Copy));
        assert_eq!(thp_cow("4.19"), Some(ThpCow::Copy));
        assert_eq!(thp_cow("weird"), None);
    }
}
