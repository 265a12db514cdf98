//! "Did you mean …?": the known name closest to a misspelt one.

/// The candidate closest to `word` by edit distance, if it is close enough
/// to be a typo: one edit in a word of 4 or 5 letters, two in a longer one.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    // Long words are not typos of short keys; comparing them would only cost.
    if word.len() > 64 {
        return None;
    }
    let limit = match word.chars().count() {
        0..=3 => return None,
        4..=5 => 1,
        _ => 2,
    };
    candidates
        .into_iter()
        .filter(|c| c.len() <= 64 && *c != word)
        .map(|c| (distance(word, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance, counting a swap of two neighbours as one edit
/// (`exlcude` → `exclude`): strsim's optimal string alignment.
pub fn distance(a: &str, b: &str) -> usize {
    strsim::osa_distance(a, b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_their_word() {
        assert_eq!(distance("exlcude", "exclude"), 1);
        assert_eq!(closest("exlcude", ["include", "exclude"]), Some("exclude"));
        assert_eq!(closest("incldue", ["include", "exclude"]), Some("include"));
        assert_eq!(closest("stpes", ["steps", "sources"]), Some("steps"));
        assert_eq!(closest("gfx", ["include", "exclude"]), None);
        assert_eq!(closest("ab", ["ac"]), None);
    }
}
