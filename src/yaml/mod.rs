//! A positioned YAML tree: every node knows its line and column.
//!
//! A room of its own on the lowest floor: it depends on nothing of the
//! crate. `matrix_file` reads matrix files through it (and re-exports it as
//! `matrix_file::tree`), `expect` edits them through it.
//!
//! The one parse of a matrix file (yaml-rust2's marked events): the tree
//! keeps every scalar exactly as written and where it was written, so the
//! `matrix:` section can be read faithfully and every validation error can
//! point at a line; serde models are read from it by [`from_node`]
//! (`src/yaml/de.rs`, [`from_str`] for other YAML the crate reads: family
//! profiles, CDI specs), whose errors carry the node's position too.
//! YAML the crate writes (CI pipelines, Kubernetes manifests, CDI specs)
//! goes through yaml-rust2's emitter ([`to_string`], `src/yaml/emit.rs`).

use std::collections::HashMap;

mod de;
mod emit;
pub use de::{from_node, DeError};
pub use emit::to_string;

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// A 1-based line and column in the matrix file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Pos {
    pub line: usize,
    pub col: usize,
}

#[derive(Debug, Clone)]
pub enum NodeKind {
    Scalar(String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
    Null,
}

#[derive(Debug, Clone)]
pub struct Node {
    pub kind: NodeKind,
    pub pos: Pos,
    /// How a scalar was written, which decides what serde may read it as.
    pub style: Style,
}

/// How a scalar was written. A plain scalar may be read as a number, a
/// boolean or null where a model asks for one; a quoted or block scalar
/// is always a string. Collections are `Plain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Style {
    #[default]
    Plain,
    /// Quoted, a block scalar (`|`, `>`), or tagged `!!str`.
    Quoted,
    /// A plain null (a `Null` node): `~`, `null`, `Null`, `NULL` or nothing,
    /// as written (a string field reads it as that text).
    Null(&'static str),
}

impl Node {
    /// The value under `key` when this node is a mapping.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.kind {
            NodeKind::Map(pairs) => pairs
                .iter()
                .find(|(k, _)| k.as_scalar() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_scalar(&self) -> Option<&str> {
        match &self.kind {
            NodeKind::Scalar(s) => Some(s),
            _ => None,
        }
    }

    /// Follows a dotted path with `[i]` indices, e.g. `steps[2].run`.
    pub fn at(&self, path: &str) -> Option<&Node> {
        let mut node = self;
        for part in path.split('.') {
            let (key, indices) = match part.find('[') {
                Some(i) => (&part[..i], &part[i..]),
                None => (part, ""),
            };
            if !key.is_empty() {
                node = node.get(key)?;
            }
            for idx in indices.split('[').filter(|s| !s.is_empty()) {
                let i: usize = idx.trim_end_matches(']').parse().ok()?;
                node = match &node.kind {
                    NodeKind::Seq(items) => items.get(i)?,
                    _ => return None,
                };
            }
        }
        Some(node)
    }

    /// Position of the node at `path`, or of its nearest existing ancestor.
    pub fn pos_of(&self, path: &str) -> Pos {
        let mut p = path;
        loop {
            if let Some(n) = self.at(p) {
                return n.pos;
            }
            match p.rfind(['.', '[']) {
                Some(i) => p = &p[..i],
                None => return self.pos,
            }
        }
    }

    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            NodeKind::Scalar(_) => "a scalar",
            NodeKind::Seq(_) => "a list",
            NodeKind::Map(_) => "a mapping",
            NodeKind::Null => "nothing",
        }
    }
}

/// Reads `T` from YAML text through the positioned tree: a syntax error
/// and a value the model refuses both carry their line and column.
pub fn from_str<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, DeError> {
    let root = parse(text).map_err(|e| DeError {
        message: e.message,
        pos: Some(e.pos),
        path: String::new(),
    })?;
    from_node(&root)
}

/// A YAML syntax error with its position.
#[derive(Debug, Clone)]
pub struct TreeError {
    pub message: String,
    pub pos: Pos,
}

/// The most nodes a matrix file's tree may have, counting every node an
/// alias (`*a`) repeats as often as it is repeated. A file of 80,000 axis
/// values has 80,000; nine levels of nine aliases (a "billion laughs"
/// file of 700 bytes) would have 387 million. Aliases are not expanded past
/// this, so neither time nor memory can grow beyond it.
pub const MAX_NODES: usize = 500_000;

/// The deepest nesting of lists and mappings a document may have (as
/// serde_yaml allowed, which read matrix files before this tree did).
pub const MAX_DEPTH: usize = 128;

/// Parses `text`, which holds one YAML document. An empty document is a
/// `Null` node.
///
/// Refuses a mapping that has a key twice (YAML says keys are unique; a
/// parser that lets the later one win hides a mistake), a tree of more
/// than [`MAX_NODES`] nodes once aliases are expanded, lists and mappings
/// nested more than [`MAX_DEPTH`] deep, and a second document. The events
/// are pulled one at a time and the first problem ends the parse.
pub fn parse(text: &str) -> Result<Node, TreeError> {
    let mut builder = Builder::default();
    let mut parser = Parser::new_from_str(text);
    let mut documents = 0;
    loop {
        let (ev, mark) = parser.next_token().map_err(|e| TreeError {
            message: e.info().to_string(),
            pos: Pos {
                line: e.marker().line(),
                col: e.marker().col() + 1,
            },
        })?;
        match ev {
            Event::StreamEnd => break,
            Event::DocumentStart => {
                documents += 1;
                if documents > 1 {
                    return Err(TreeError {
                        message: "a second document (`---`): a matrix file holds one YAML \
                                  document"
                            .to_string(),
                        pos: Pos {
                            line: mark.line(),
                            col: mark.col() + 1,
                        },
                    });
                }
            }
            ev => builder.on_event(ev, mark),
        }
        if let Some(e) = builder.error.take() {
            return Err(e);
        }
    }
    Ok(builder.root.unwrap_or(Node {
        kind: NodeKind::Null,
        pos: Pos { line: 1, col: 1 },
        style: Style::Null(""),
    }))
}

/// An open sequence or mapping: its items, where it started, its anchor,
/// and how many nodes had been made when it started.
enum Frame {
    Seq(Vec<Node>, Pos, usize, usize),
    Map(Vec<(Node, Node)>, Option<Node>, Pos, usize, usize),
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    /// Anchored nodes with the number of nodes each one holds.
    anchors: HashMap<usize, (Node, usize)>,
    root: Option<Node>,
    /// Nodes made so far, aliases counted as the nodes they repeat.
    nodes: usize,
    /// The first problem; events after it are ignored.
    error: Option<TreeError>,
}

impl Builder {
    fn push_value(&mut self, node: Node, anchor: usize, size: usize) {
        if anchor > 0 {
            self.anchors.insert(anchor, (node.clone(), size));
        }
        match self.stack.last_mut() {
            Some(Frame::Seq(items, _, _, _)) => items.push(node),
            Some(Frame::Map(pairs, key, _, _, _)) => match key.take() {
                Some(k) => pairs.push((k, node)),
                None => *key = Some(node),
            },
            None => {
                if self.root.is_none() {
                    self.root = Some(node);
                }
            }
        }
    }

    /// Counts `n` more nodes; false (and an error) past [`MAX_NODES`].
    fn count(&mut self, n: usize, pos: Pos) -> bool {
        self.nodes = self.nodes.saturating_add(n);
        if self.nodes > MAX_NODES {
            self.error = Some(TreeError {
                message: format!(
                    "the document has more than {MAX_NODES} nodes once its aliases are \
                     expanded (this alias or value is where the limit was hit); \
                     write the values out, or use fewer aliases of large nodes"
                ),
                pos,
            });
            return false;
        }
        true
    }
}

/// The first key that a mapping has twice, as an error at its second place.
fn duplicate_key(pairs: &[(Node, Node)]) -> Option<TreeError> {
    let mut seen: HashMap<&str, Pos> = HashMap::with_capacity(pairs.len());
    for (k, _) in pairs {
        let Some(name) = k.as_scalar() else { continue };
        if let Some(first) = seen.insert(name, k.pos) {
            return Some(TreeError {
                message: format!(
                    "duplicate key `{name}` (first at line {}); a key may appear once in a mapping",
                    first.line
                ),
                pos: k.pos,
            });
        }
    }
    None
}

impl MarkedEventReceiver for Builder {
    /// One piece: one match over the parser's events, each arm the tree
    /// node it builds (the bounds checked first in each).
    fn on_event(&mut self, ev: Event, mark: Marker) {
        if self.error.is_some() {
            return;
        }
        let pos = Pos {
            line: mark.line(),
            col: mark.col() + 1,
        };
        match ev {
            Event::Scalar(value, style, anchor, tag) => {
                if !self.count(1, pos) {
                    return;
                }
                let plain = matches!(style, yaml_rust2::scanner::TScalarStyle::Plain);
                let null = ["", "~", "null", "Null", "NULL"]
                    .into_iter()
                    .find(|w| plain && tag.is_none() && value == *w);
                let is_str = tag
                    .as_ref()
                    .is_some_and(|t| t.handle == "tag:yaml.org,2002:" && t.suffix == "str");
                let (kind, style) = match null {
                    Some(word) => (NodeKind::Null, Style::Null(word)),
                    None if plain && !is_str => (NodeKind::Scalar(value), Style::Plain),
                    None => (NodeKind::Scalar(value), Style::Quoted),
                };
                self.push_value(Node { kind, pos, style }, anchor, 1);
            }
            Event::SequenceStart(..) | Event::MappingStart(..) if self.stack.len() >= MAX_DEPTH => {
                self.error = Some(TreeError {
                    message: format!(
                        "recursion limit exceeded: lists and mappings nested more than \
                         {MAX_DEPTH} deep"
                    ),
                    pos,
                });
            }
            Event::SequenceStart(anchor, _) if self.count(1, pos) => {
                let at = self.nodes;
                self.stack.push(Frame::Seq(Vec::new(), pos, anchor, at));
            }
            Event::MappingStart(anchor, _) if self.count(1, pos) => {
                let at = self.nodes;
                self.stack
                    .push(Frame::Map(Vec::new(), None, pos, anchor, at));
            }
            Event::SequenceEnd => {
                if let Some(Frame::Seq(items, start, anchor, at)) = self.stack.pop() {
                    let size = self.nodes - at + 1;
                    self.push_value(
                        Node {
                            kind: NodeKind::Seq(items),
                            pos: start,
                            style: Style::Plain,
                        },
                        anchor,
                        size,
                    );
                }
            }
            Event::MappingEnd => {
                if let Some(Frame::Map(pairs, _, start, anchor, at)) = self.stack.pop() {
                    if let Some(e) = duplicate_key(&pairs) {
                        self.error = Some(e);
                        return;
                    }
                    let size = self.nodes - at + 1;
                    self.push_value(
                        Node {
                            kind: NodeKind::Map(pairs),
                            pos: start,
                            style: Style::Plain,
                        },
                        anchor,
                        size,
                    );
                }
            }
            Event::Alias(id) => {
                // Count before copying: the copy is what must stay bounded.
                let size = self.anchors.get(&id).map_or(1, |(_, n)| *n);
                if !self.count(size, pos) {
                    return;
                }
                let node = self
                    .anchors
                    .get(&id)
                    .map(|(n, _)| n.clone())
                    .unwrap_or(Node {
                        kind: NodeKind::Null,
                        pos,
                        style: Style::Null(""),
                    });
                self.push_value(node, 0, size);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_scalars_as_written_with_positions() {
        let t = parse("matrix:\n  rocm: [5.7, 6.0, 6.10]\n  gfx:\n    - gfx90a\n").unwrap();
        let rocm = t.at("matrix.rocm").unwrap();
        match &rocm.kind {
            NodeKind::Seq(items) => {
                let v: Vec<_> = items.iter().map(|n| n.as_scalar().unwrap()).collect();
                assert_eq!(v, ["5.7", "6.0", "6.10"]);
            }
            _ => panic!("not a seq"),
        }
        assert_eq!(t.at("matrix.gfx[0]").unwrap().pos, Pos { line: 4, col: 7 });
        assert_eq!(t.pos_of("matrix.rocm[2]").line, 2);
        assert_eq!(t.pos_of("matrix.nothere").line, 2); // falls back to `matrix`
    }

    #[test]
    fn block_scalars_start_at_their_first_content_line() {
        let t = parse("a:\n  run: |\n    one\n    two\n  c: >\n    z\n").unwrap();
        assert_eq!(t.at("a.run").unwrap().pos, Pos { line: 3, col: 5 });
        assert_eq!(t.at("a.c").unwrap().pos.line, 6);
    }

    #[test]
    fn alias_bombs_are_not_expanded() {
        let mut doc = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
        let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
        for w in names.windows(2) {
            let refs = vec![format!("*{}", w[0]); 9].join(", ");
            doc.push_str(&format!("{}: &{} [{refs}]\n", w[1], w[1]));
        }
        let e = parse(&doc).unwrap_err();
        assert!(e.message.contains("more than 500000 nodes"), "{e:?}");
        // A few aliases are fine.
        let t = parse("a: &a {k: v}\nb: *a\nc: [*a, *a]\n").unwrap();
        assert_eq!(t.at("c[1].k").unwrap().as_scalar(), Some("v"));
    }

    #[test]
    fn duplicate_keys_are_errors() {
        let e = parse("vars:\n  a: 1\n  b: 2\n  a: 3\n").unwrap_err();
        assert_eq!(e.pos.line, 4);
        assert!(
            e.message.contains("duplicate key `a` (first at line 2)"),
            "{e:?}"
        );
        let e = parse("x:\n  - {k: 1, k: 2}\n").unwrap_err();
        assert_eq!(e.pos.line, 2);
    }

    #[test]
    fn nesting_is_bounded_and_a_second_document_refused() {
        let deep = |n: usize| format!("a: {}{}\n", "[".repeat(n), "]".repeat(n));
        assert!(parse(&deep(MAX_DEPTH - 1)).is_ok());
        let e = parse(&deep(MAX_DEPTH)).unwrap_err();
        assert!(e.message.contains("recursion limit exceeded"), "{e:?}");
        assert_eq!(e.pos, Pos { line: 1, col: 131 });
        let block: String = (0..200)
            .map(|i| format!("{}- \n", "  ".repeat(i)))
            .collect();
        let e = parse(&format!("a:\n{block}")).unwrap_err();
        assert!(e.message.contains("recursion limit exceeded"), "{e:?}");
        let e = parse("a: 1\n---\nb: 2\n").unwrap_err();
        assert!(e.message.contains("a second document"), "{e:?}");
        assert_eq!(e.pos.line, 2);
        assert!(parse("---\na: 1\n...\n").is_ok());
    }

    #[test]
    fn scalars_know_how_they_were_written() {
        let t = parse("a: 1\nb: '1'\nc: |\n  x\nd: ~\ne:\nf: !!str 2\n").unwrap();
        let styles: Vec<Style> = ["a", "b", "c", "d", "e", "f"]
            .iter()
            .map(|k| t.get(k).unwrap().style)
            .collect();
        assert_eq!(
            styles,
            [
                Style::Plain,
                Style::Quoted,
                Style::Quoted,
                Style::Null("~"),
                Style::Null(""),
                Style::Quoted
            ]
        );
    }

    #[test]
    fn syntax_errors_have_positions() {
        let e = parse("a: [1, 2\nb: c\n").unwrap_err();
        assert!(e.pos.line >= 1, "{e:?}");
    }
}
