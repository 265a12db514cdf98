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
/// (`exlcude` → `exclude`).
pub fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let (n, m) = (a.len(), b.len());
    let mut d = vec![vec![0usize; m + 1]; n + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=n {
        for j in 1..=m {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[n][m]
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
