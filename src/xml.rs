//! XML as the JUnit writers need it beyond what quick-junit does.
//!
//! quick-junit escapes `&`, `<`, `>` and quotes in attribute values but
//! leaves line breaks and tabs as they are, and every XML reader normalises
//! those to spaces inside attributes: a multi-line failure `message` would
//! come back as one line. [`keep_attribute_whitespace`] writes them as the
//! character references `&#10;`, `&#13;` and `&#9;`, which readers keep.

use std::borrow::Cow;

/// `xml` with line breaks and tabs inside attribute values written as
/// character references. `xml` is markup as quick-junit writes it: text
/// and attribute values escaped, no CDATA, no comments.
pub fn keep_attribute_whitespace(xml: &str) -> Cow<'_, str> {
    if !xml.contains(['\n', '\r', '\t']) {
        return Cow::Borrowed(xml);
    }
    let mut out = String::with_capacity(xml.len() + 64);
    let (mut in_tag, mut quote): (bool, Option<char>) = (false, None);
    for c in xml.chars() {
        match (in_tag, quote, c) {
            (false, _, '<') => in_tag = true,
            (true, None, '>') => in_tag = false,
            (true, None, '"' | '\'') => quote = Some(c),
            (true, Some(q), _) if c == q => quote = None,
            (true, Some(_), '\n') => {
                out.push_str("&#10;");
                continue;
            }
            (true, Some(_), '\r') => {
                out.push_str("&#13;");
                continue;
            }
            (true, Some(_), '\t') => {
                out.push_str("&#9;");
                continue;
            }
            _ => {}
        }
        out.push(c);
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_attribute_values_change() {
        let xml = "<a m=\"one\ntwo\tx\r\">text\nstays</a>\n<b k='y\nz'/>";
        assert_eq!(
            keep_attribute_whitespace(xml),
            "<a m=\"one&#10;two&#9;x&#13;\">text\nstays</a>\n<b k='y&#10;z'/>"
        );
        assert!(matches!(
            keep_attribute_whitespace("<a b=\"c\"/>"),
            Cow::Borrowed(_)
        ));
    }
}
