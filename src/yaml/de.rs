//! serde models read from the positioned tree, so a file is parsed once
//! and every error (an unknown key, a wrong type, a missing field) carries
//! the line and column of its node.
//!
//! It reads as serde_yaml 0.9 read matrix files before, so messages stay as
//! users know them: a plain scalar is a boolean, a number or null where the
//! model asks for one (YAML 1.2's core schema), any scalar is a string where
//! a string is asked for (`6.10` stays `6.10`), and a message names the path
//! to its value (`steps[0].gtest: unknown field ...`; an unknown key is
//! placed at the key, in its mapping's path).

use std::fmt;
use std::num::ParseIntError;

use serde::de::{self, DeserializeSeed, Unexpected, Visitor};

use super::{Node, NodeKind, Pos, Style};

/// A value the model refuses, where it is, and the path to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeError {
    pub message: String,
    /// The node the error was found at (set by the innermost node).
    pub pos: Option<Pos>,
    /// `steps[0].gtest`; `.` for the document itself.
    pub path: String,
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if !self.path.is_empty() && self.path != "." {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for DeError {}

impl DeError {
    /// The error and where it is: `steps[0]: … at line 3 column 5`.
    pub fn located(&self) -> String {
        match self.pos {
            Some(p) => format!("{self} at line {} column {}", p.line, p.col),
            None => self.to_string(),
        }
    }
}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DeError {
            message: msg.to_string(),
            pos: None,
            path: String::new(),
        }
    }
}

/// Reads `T` from `node` (usually a document's root).
pub fn from_node<'de, T: de::Deserialize<'de>>(node: &'de Node) -> Result<T, DeError> {
    T::deserialize(NodeDe {
        node,
        path: Path::Root,
        at: place(node),
    })
}

/// The path to a value, as serde_yaml printed it: `a.b[2].c`.
#[derive(Clone, Copy)]
enum Path<'p> {
    Root,
    Seq { parent: &'p Path<'p>, index: usize },
    Map { parent: &'p Path<'p>, key: &'p str },
    Unknown { parent: &'p Path<'p> },
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        struct Parent<'a>(&'a Path<'a>);
        impl fmt::Display for Parent<'_> {
            fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
                match self.0 {
                    Path::Root => Ok(()),
                    path => write!(f, "{path}."),
                }
            }
        }
        match self {
            Path::Root => f.write_str("."),
            Path::Seq { parent, index } => write!(f, "{parent}[{index}]"),
            Path::Map { parent, key } => write!(f, "{}{key}", Parent(parent)),
            Path::Unknown { parent } => write!(f, "{}?", Parent(parent)),
        }
    }
}

struct NodeDe<'de, 'p> {
    node: &'de Node,
    path: Path<'p>,
    /// Where an error about the node points ([`place`]).
    at: Pos,
}

impl NodeDe<'_, '_> {
    /// Gives an error without a place this node's position and path.
    fn fix(&self, mut e: DeError) -> DeError {
        if e.pos.is_none() {
            e.pos = Some(self.at);
            e.path = self.path.to_string();
        }
        e
    }

    /// The node's plain scalar text, if it is one.
    fn plain(&self) -> Option<&str> {
        match (&self.node.kind, self.node.style) {
            (NodeKind::Scalar(s), Style::Plain) => Some(s),
            _ => None,
        }
    }
}

/// Where an error about `node` points: a block mapping at its first key
/// (the tree places it at that key's `:`, where the parser knew it was a
/// mapping), anything else at its node.
fn place(node: &Node) -> Pos {
    match &node.kind {
        NodeKind::Map(pairs) => match pairs.first() {
            Some((k, _)) if (k.pos.line, k.pos.col) < (node.pos.line, node.pos.col) => k.pos,
            _ => node.pos,
        },
        _ => node.pos,
    }
}

/// "invalid type: X, expected Y", X as the node would be read untyped.
fn invalid_type(node: &Node, exp: &dyn de::Expected) -> DeError {
    enum Void {}
    struct InvalidType<'a>(&'a dyn de::Expected);
    impl<'de> Visitor<'de> for InvalidType<'_> {
        type Value = Void;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            self.0.fmt(f)
        }
    }
    let unexpected = match &node.kind {
        NodeKind::Seq(_) => Unexpected::Seq,
        NodeKind::Map(_) => Unexpected::Map,
        NodeKind::Null => Unexpected::Unit,
        NodeKind::Scalar(s) if node.style == Style::Plain => {
            return match visit_plain(InvalidType(exp), s) {
                Ok(void) => match void {},
                Err(e) => e,
            }
        }
        NodeKind::Scalar(s) => Unexpected::Str(s),
    };
    de::Error::invalid_type(unexpected, exp)
}

/// A plain scalar read untyped: null, boolean, integer, float, else string.
fn visit_plain<'de, V: Visitor<'de>>(visitor: V, v: &'de str) -> Result<V::Value, DeError> {
    if v.is_empty() || matches!(v, "~" | "null" | "Null" | "NULL") {
        return visitor.visit_unit();
    }
    if let Some(b) = parse_bool(v) {
        return visitor.visit_bool(b);
    }
    if let Some(n) = parse_unsigned_int(v, u64::from_str_radix) {
        return visitor.visit_u64(n);
    }
    if let Some(n) = parse_negative_int(v, i64::from_str_radix) {
        return visitor.visit_i64(n);
    }
    if let Some(n) = parse_unsigned_int(v, u128::from_str_radix) {
        return visitor.visit_u128(n);
    }
    if let Some(n) = parse_negative_int(v, i128::from_str_radix) {
        return visitor.visit_i128(n);
    }
    if !digits_but_not_number(v) {
        if let Some(f) = parse_f64(v) {
            return visitor.visit_f64(f);
        }
    }
    visitor.visit_borrowed_str(v)
}

fn parse_bool(v: &str) -> Option<bool> {
    match v {
        "true" | "True" | "TRUE" => Some(true),
        "false" | "False" | "FALSE" => Some(false),
        _ => None,
    }
}

/// Leading zeros followed by digits is a string in YAML 1.2 (`0755`).
fn digits_but_not_number(v: &str) -> bool {
    let v = v.strip_prefix(['-', '+']).unwrap_or(v);
    v.len() > 1 && v.starts_with('0') && v[1..].bytes().all(|b| b.is_ascii_digit())
}

type Radix<T> = fn(&str, u32) -> Result<T, ParseIntError>;

/// `0x`, `0o`, `0b` prefixes and a sign, as YAML 1.2's core schema.
fn radix_of(v: &str) -> (&str, u32) {
    for (prefix, radix) in [("0x", 16), ("0o", 8), ("0b", 2)] {
        if let Some(rest) = v.strip_prefix(prefix) {
            return (rest, radix);
        }
    }
    (v, 10)
}

fn parse_unsigned_int<T>(v: &str, from: Radix<T>) -> Option<T> {
    let unsigned = v.strip_prefix('+').unwrap_or(v);
    let (digits, radix) = radix_of(unsigned);
    if digits.starts_with(['+', '-']) {
        return None;
    }
    if radix != 10 {
        if let Ok(n) = from(digits, radix) {
            return Some(n);
        }
    }
    if digits_but_not_number(v) {
        return None;
    }
    from(unsigned, 10).ok()
}

fn parse_negative_int<T>(v: &str, from: Radix<T>) -> Option<T> {
    if let Some(rest) = v.strip_prefix('-') {
        let (digits, radix) = radix_of(rest);
        if radix != 10 {
            if let Ok(n) = from(&format!("-{digits}"), radix) {
                return Some(n);
            }
        }
    }
    if digits_but_not_number(v) {
        return None;
    }
    from(v, 10).ok()
}

fn parse_f64(v: &str) -> Option<f64> {
    let unsigned = match v.strip_prefix('+') {
        Some(u) if u.starts_with(['+', '-']) => return None,
        Some(u) => u,
        None => v,
    };
    if let ".inf" | ".Inf" | ".INF" = unsigned {
        return Some(f64::INFINITY);
    }
    if let "-.inf" | "-.Inf" | "-.INF" = v {
        return Some(f64::NEG_INFINITY);
    }
    if let ".nan" | ".NaN" | ".NAN" = v {
        return Some(f64::NAN);
    }
    unsigned.parse::<f64>().ok().filter(|f| f.is_finite())
}

struct SeqA<'de, 'p> {
    items: std::slice::Iter<'de, Node>,
    index: usize,
    path: Path<'p>,
}

impl<'de> de::SeqAccess<'de> for SeqA<'de, '_> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        let Some(node) = self.items.next() else {
            return Ok(None);
        };
        let index = self.index;
        self.index += 1;
        seed.deserialize(NodeDe {
            node,
            path: Path::Seq {
                parent: &self.path,
                index,
            },
            at: place(node),
        })
        .map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct MapA<'de, 'p> {
    pairs: std::slice::Iter<'de, (Node, Node)>,
    value: Option<(&'de Node, Option<&'de str>, Pos)>,
    path: Path<'p>,
}

impl<'de> de::MapAccess<'de> for MapA<'de, '_> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        let Some((k, v)) = self.pairs.next() else {
            return Ok(None);
        };
        let name = match (&k.kind, k.style) {
            (NodeKind::Scalar(s), _) => Some(s.as_str()),
            (NodeKind::Null, Style::Null(word)) => Some(word),
            _ => None,
        };
        // Nothing after `key:` is placed right after the colon, not at
        // the next token where the tree has it.
        let at = match (v.style, k.style, name) {
            (Style::Null(""), Style::Plain, Some(name)) => Pos {
                line: k.pos.line,
                col: k.pos.col + name.chars().count() + 1,
            },
            _ => place(v),
        };
        self.value = Some((v, name, at));
        seed.deserialize(NodeDe {
            node: k,
            path: self.path,
            at: place(k),
        })
        .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let Some((node, key, at)) = self.value.take() else {
            return Err(de::Error::custom("a value without its key"));
        };
        let path = match key {
            Some(key) => Path::Map {
                parent: &self.path,
                key,
            },
            None => Path::Unknown { parent: &self.path },
        };
        seed.deserialize(NodeDe { node, path, at })
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.pairs.len())
    }
}

/// A scalar as an enum: the scalar names a unit variant.
struct UnitVariant<'de, 'p>(NodeDe<'de, 'p>);

impl<'de, 'p> de::EnumAccess<'de> for UnitVariant<'de, 'p> {
    type Error = DeError;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self), DeError> {
        let de = NodeDe {
            node: self.0.node,
            path: self.0.path,
            at: self.0.at,
        };
        Ok((seed.deserialize(de)?, self))
    }
}

impl<'de> de::VariantAccess<'de> for UnitVariant<'de, '_> {
    type Error = DeError;

    fn unit_variant(self) -> Result<(), DeError> {
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, _: T) -> Result<T::Value, DeError> {
        Err(de::Error::invalid_type(
            Unexpected::UnitVariant,
            &"newtype variant",
        ))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _: usize, _: V) -> Result<V::Value, DeError> {
        Err(de::Error::invalid_type(
            Unexpected::UnitVariant,
            &"tuple variant",
        ))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, DeError> {
        Err(de::Error::invalid_type(
            Unexpected::UnitVariant,
            &"struct variant",
        ))
    }
}

impl<'de, 'p> NodeDe<'de, 'p> {
    fn seq<V: Visitor<'de>>(&self, items: &'de [Node], visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_seq(SeqA {
            items: items.iter(),
            index: 0,
            path: self.path,
        })
    }

    fn map<V: Visitor<'de>>(
        &self,
        pairs: &'de [(Node, Node)],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_map(MapA {
            pairs: pairs.iter(),
            value: None,
            path: self.path,
        })
    }

    /// A plain scalar parsed by `parse`, handed to `visit`; else invalid.
    fn typed<V: Visitor<'de>, T>(
        &self,
        visitor: V,
        parse: impl Fn(&str) -> Option<T>,
        visit: impl FnOnce(V, T) -> Result<V::Value, DeError>,
    ) -> Result<V::Value, DeError> {
        match self.plain().and_then(parse) {
            Some(v) => visit(visitor, v),
            None => Err(invalid_type(self.node, &visitor)),
        }
        .map_err(|e| self.fix(e))
    }
}

macro_rules! via {
    ($($name:ident => $to:ident),* $(,)?) => {$(
        fn $name<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
            self.$to(visitor)
        }
    )*};
}

impl<'de> de::Deserializer<'de> for NodeDe<'de, '_> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match (&self.node.kind, self.node.style) {
            (NodeKind::Scalar(s), Style::Plain) => visit_plain(visitor, s),
            (NodeKind::Scalar(s), _) => visitor.visit_borrowed_str(s),
            (NodeKind::Null, _) => visitor.visit_unit(),
            (NodeKind::Seq(items), _) => self.seq(items, visitor),
            (NodeKind::Map(pairs), _) => self.map(pairs, visitor),
        }
        .map_err(|e| self.fix(e))
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.typed(visitor, parse_bool, |v, b| v.visit_bool(b))
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        let signed = |s: &str| match s.strip_prefix('+') {
            Some(rest) if rest.starts_with(['+', '-']) => None,
            _ => parse_unsigned_int(s, i64::from_str_radix)
                .or_else(|| parse_negative_int(s, i64::from_str_radix)),
        };
        self.typed(visitor, signed, |v, n| v.visit_i64(n))
    }

    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.typed(
            visitor,
            |s| parse_unsigned_int(s, u64::from_str_radix),
            |v, n| v.visit_u64(n),
        )
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.typed(visitor, parse_f64, |v, f| v.visit_f64(f))
    }

    via! {
        deserialize_i8 => deserialize_i64, deserialize_i16 => deserialize_i64,
        deserialize_i32 => deserialize_i64, deserialize_u8 => deserialize_u64,
        deserialize_u16 => deserialize_u64, deserialize_u32 => deserialize_u64,
        deserialize_f32 => deserialize_f64, deserialize_char => deserialize_str,
        deserialize_string => deserialize_str, deserialize_identifier => deserialize_str,
        deserialize_bytes => deserialize_byte_buf,
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match (&self.node.kind, self.node.style) {
            (NodeKind::Scalar(s), _) => visitor.visit_borrowed_str(s),
            (NodeKind::Null, Style::Null(word)) => visitor.visit_borrowed_str(word),
            _ => Err(invalid_type(self.node, &visitor)),
        }
        .map_err(|e| self.fix(e))
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, _: V) -> Result<V::Value, DeError> {
        Err(self.fix(de::Error::custom(
            "serialization and deserialization of bytes in YAML is not implemented",
        )))
    }

    /// `null` (or nothing) is `None`, anything else `Some`.
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match self.node.kind {
            NodeKind::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match &self.node.kind {
            NodeKind::Null => visitor.visit_unit(),
            NodeKind::Scalar(s) => Err(de::Error::invalid_value(Unexpected::Str(s), &"null")),
            _ => Err(invalid_type(self.node, &visitor)),
        }
        .map_err(|e| self.fix(e))
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_newtype_struct(self)
    }

    /// A list; nothing at all (`key:`) is an empty one.
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match (&self.node.kind, self.node.style) {
            (NodeKind::Seq(items), _) => self.seq(items, visitor),
            (NodeKind::Null, Style::Null("")) => self.seq(&[], visitor),
            _ => Err(invalid_type(self.node, &visitor)),
        }
        .map_err(|e| self.fix(e))
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, visitor: V) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_seq(visitor)
    }

    /// A mapping; nothing at all (`key:`) is an empty one.
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        match (&self.node.kind, self.node.style) {
            (NodeKind::Map(pairs), _) => self.map(pairs, visitor),
            (NodeKind::Null, Style::Null("")) => self.map(&[], visitor),
            _ => Err(invalid_type(self.node, &visitor)),
        }
        .map_err(|e| self.fix(e))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_map(visitor)
    }

    /// A scalar names a unit variant; anything else is refused.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        let what = match self.node.kind {
            NodeKind::Scalar(_) | NodeKind::Null => {
                let de = NodeDe {
                    node: self.node,
                    path: self.path,
                    at: self.at,
                };
                return visitor.visit_enum(UnitVariant(de)).map_err(|e| self.fix(e));
            }
            NodeKind::Map(_) => Unexpected::Map,
            NodeKind::Seq(_) => Unexpected::Seq,
        };
        Err(self.fix(de::Error::invalid_type(
            what,
            &"a YAML tag starting with '!'",
        )))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::super::parse;
    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Step {
        name: String,
        run: Option<String>,
        retries: Option<u32>,
        #[serde(default)]
        junit: Vec<String>,
        #[serde(default)]
        on: bool,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Doc {
        #[serde(default)]
        steps: Vec<Step>,
        #[serde(default)]
        vars: BTreeMap<String, String>,
        count: Option<Count>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(untagged)]
    enum Count {
        Number(u32),
        Word(String),
    }

    fn read(text: &str) -> Result<Doc, DeError> {
        from_node(&parse(text).unwrap())
    }

    fn shown(text: &str) -> (String, Pos) {
        let e = read(text).unwrap_err();
        (e.to_string(), e.pos.unwrap())
    }

    #[test]
    fn scalars_are_strings_as_written_and_typed_where_asked() {
        let d = read(
            "vars: {a: 6.10, b: 007, c: true, d: ~, e: ''}\nsteps:\n  - name: 1.0\n    \
             retries: 0x10\n    junit:\n    on: True\ncount: all\n",
        )
        .unwrap();
        let v: Vec<&str> = d.vars.values().map(String::as_str).collect();
        assert_eq!(v, ["6.10", "007", "true", "~", ""]);
        assert_eq!(d.steps[0].name, "1.0");
        assert_eq!(d.steps[0].retries, Some(16));
        assert!(d.steps[0].junit.is_empty() && d.steps[0].on);
        assert_eq!(d.count, Some(Count::Word("all".into())));
        assert_eq!(read("count: 3\n").unwrap().count, Some(Count::Number(3)));
        assert_eq!(
            read("count: '3'\n").unwrap().count,
            Some(Count::Word("3".into()))
        );
    }

    #[test]
    fn errors_name_the_path_and_the_node() {
        assert_eq!(
            shown("steps:\n  - name: a\n    rn: echo\n"),
            (
                "steps[0]: unknown field `rn`, expected one of `name`, `run`, `retries`, \
                 `junit`, `on`"
                    .to_string(),
                Pos { line: 3, col: 5 }
            )
        );
        let (m, p) = shown("stepz: []\n");
        assert!(m.starts_with("unknown field `stepz`, expected"), "{m}");
        assert_eq!(p, Pos { line: 1, col: 1 });
        assert_eq!(
            shown("steps:\n  - name: a\n    retries: many\n"),
            (
                "steps[0].retries: invalid type: string \"many\", expected u32".to_string(),
                Pos { line: 3, col: 14 }
            )
        );
        assert_eq!(
            shown("steps:\n  - name: a\n    retries: -1\n").0,
            "steps[0].retries: invalid type: integer `-1`, expected u32"
        );
        assert_eq!(
            shown("steps:\n  - name: a\n    on: yes\n").0,
            "steps[0].on: invalid type: string \"yes\", expected a boolean"
        );
        assert_eq!(
            shown("steps:\n  - run: x\n"),
            (
                "steps[0]: missing field `name`".to_string(),
                Pos { line: 2, col: 5 }
            )
        );
        assert_eq!(
            shown("steps:\n  - name: [a]\n").0,
            "steps[0].name: invalid type: sequence, expected a string"
        );
        assert_eq!(
            shown("count: [1]\n").0,
            "data did not match any variant of untagged enum Count"
        );
    }
}
