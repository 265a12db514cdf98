//! A small glob matcher for `expect:` rules: `*` matches any run of
//! characters (dots, slashes and colons included), `?` any one character,
//! everything else itself. Test names are not paths, so there is no `**` and
//! no character class; that is all `expect:` needs, and it keeps the crate
//! free of a glob dependency.

/// Whether `text` matches `pattern`.
pub fn matches(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Iterative matching with one backtrack point (the last `*`): linear in
    // practice, never exponential.
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn globs() {
        assert!(matches("Suite.*", "Suite.Test"));
        assert!(matches("*", ""));
        assert!(matches("a*b*c", "aXXbYYc"));
        assert!(!matches("a*b*c", "aXXbYY"));
        assert!(matches("tests/test_x.py::*", "tests/test_x.py::test_a[1]"));
        assert!(matches("T?st", "Test"));
        assert!(!matches("Test", "Tests"));
        assert!(matches("*Conv*Fwd*", "MIOpen.ConvFwd/gfx1030"));
        assert!(!matches("", "x"));
    }
}
