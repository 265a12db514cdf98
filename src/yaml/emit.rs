//! Writing YAML (CI pipelines, Kubernetes manifests, CDI specs): a serde
//! value, its keys in the order it serializes them, written by yaml-rust2's
//! emitter. A string of several lines is a literal block (`|-`) where the
//! block reads back as the same string, else one quoted line.

use serde::Serialize;
use yaml_rust2::{Yaml, YamlEmitter};

/// `value` as one YAML document, without a `---` line, ending in a newline.
pub fn to_string<T: Serialize>(value: &T) -> Result<String, serde_json::Error> {
    let doc = yaml_of(serde_json::to_value(value)?);
    let mut out = String::new();
    let mut emitter = YamlEmitter::new(&mut out);
    emitter.multiline_strings(blocks_read_back(&doc));
    // Writing to a String cannot fail.
    let _ = emitter.dump(&doc);
    let mut out = out.strip_prefix("---\n").map(str::to_string).unwrap_or(out);
    out.push('\n');
    Ok(out)
}

/// The YAML of a JSON value, keys in their order.
fn yaml_of(v: serde_json::Value) -> Yaml {
    use serde_json::Value;
    match v {
        Value::Null => Yaml::Null,
        Value::Bool(b) => Yaml::Boolean(b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Yaml::Integer(i),
            None => Yaml::Real(n.to_string()),
        },
        Value::String(s) => Yaml::String(s),
        Value::Array(items) => Yaml::Array(items.into_iter().map(yaml_of).collect()),
        Value::Object(map) => Yaml::Hash(
            map.into_iter()
                .map(|(k, v)| (Yaml::String(k), yaml_of(v)))
                .collect(),
        ),
    }
}

/// Whether every string of several lines in `doc` reads back unchanged
/// from the literal block the emitter writes: no leading blank, no line
/// ending in a blank, no carriage return, at most one newline at its end.
fn blocks_read_back(doc: &Yaml) -> bool {
    match doc {
        Yaml::String(s) if s.contains('\n') => {
            !s.starts_with([' ', '\t', '\n'])
                && !s.ends_with("\n\n")
                && !s.contains('\r')
                && s.lines().all(|l| !l.ends_with([' ', '\t']))
        }
        Yaml::Array(items) => items.iter().all(blocks_read_back),
        Yaml::Hash(map) => map
            .iter()
            .all(|(k, v)| blocks_read_back(k) && blocks_read_back(v)),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_keep_their_order_and_every_value_reads_back() {
        let value = serde_json::json!({
            "zeta": 1,
            "alpha": ["1", "true", "plain", "a: b", "", null, 0.5, false],
            "script": "set -eu\ncase \"$I\" in\n  0) true ;;\nesac\n",
            "empty": {},
        });
        let text = to_string(&value).unwrap();
        assert!(text.starts_with("zeta: 1\nalpha:\n"), "{text}");
        assert!(text.contains("script: |\n  set -eu\n"), "{text}");
        assert!(text.ends_with("empty: {}\n"), "{text}");
        let back = &yaml_rust2::YamlLoader::load_from_str(&text).unwrap()[0];
        assert_eq!(back["alpha"][0].as_str(), Some("1"));
        assert_eq!(back["alpha"][1].as_str(), Some("true"));
        assert_eq!(back["alpha"][3].as_str(), Some("a: b"));
        assert_eq!(back["alpha"][4].as_str(), Some(""));
        assert!(back["alpha"][5].is_null());
        assert_eq!(back["script"].as_str(), value["script"].as_str());
    }

    #[test]
    fn a_string_no_block_can_hold_is_quoted() {
        let value = serde_json::json!({ "a": "  indented\nline\n\n", "b": "x\ny" });
        let text = to_string(&value).unwrap();
        assert!(!text.contains('|'), "{text}");
        let back = &yaml_rust2::YamlLoader::load_from_str(&text).unwrap()[0];
        assert_eq!(back["a"].as_str(), Some("  indented\nline\n\n"));
        assert_eq!(back["b"].as_str(), Some("x\ny"));
    }
}
