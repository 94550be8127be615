//! "Did you mean": the known name nearest a misspelt one ([`strsim`]'s edit distance).

/// The candidate nearest `word`, if it is near enough to be a likely misspelling: at
/// most a third of its letters (at least one) changed, inserted, removed or swapped.
pub fn nearest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let most = (word.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .filter(|c| *c != word)
        .map(|c| (strsim::damerau_levenshtein(word, c), c))
        .filter(|(d, _)| *d <= most)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// `" (did you mean `NAME`?)"` for the candidate [`nearest`] `word`, or nothing.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    nearest(word, candidates).map_or(String::new(), |c| format!(" (did you mean `{c}`?)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_names_are_suggested_and_far_ones_are_not() {
        let presets = ["skylake", "zen4", "zen4-kvm", "i386"];
        assert_eq!(nearest("skylak", presets), Some("skylake"));
        assert_eq!(nearest("zne4", presets), Some("zen4"));
        assert_eq!(
            nearest("entrys", ["entries", "ways", "sizes"]),
            Some("entries")
        );
        assert_eq!(nearest("pentium", presets), None);
        assert_eq!(nearest("skylake", presets), None);
        assert_eq!(
            did_you_mean("strde", ["stride", "chase"]),
            " (did you mean `stride`?)"
        );
        assert_eq!(did_you_mean("xyz", ["stride"]), "");
    }
}
