//! `matrix:`: the axes, `include` and `exclude` entries, and the keys of
//! the cells they give.

use super::*;

/// The keys a cell can have: the axes in order, then keys only includes add.
pub(in crate::matrix_file) fn spec_keys(axes: &[Axis], include: &[Entry]) -> Vec<String> {
    let mut keys: Vec<String> = axes.iter().map(|a| a.name.clone()).collect();
    let mut seen: HashSet<&str> = axes.iter().map(|a| a.name.as_str()).collect();
    for e in include {
        for (k, _) in &e.pairs {
            if seen.insert(k) {
                keys.push(k.clone());
            }
        }
    }
    keys
}

pub(super) type MatrixParts = (Vec<Axis>, Vec<Entry>, Vec<Entry>);

pub(super) fn read_matrix(cx: &Ctx, m: &Node) -> Result<MatrixParts, SpecError> {
    let pairs = match &m.kind {
        NodeKind::Map(p) => p,
        _ => {
            return Err(cx.node_err(
                m,
                format!(
                    "`matrix` must be a mapping of axes, found {}",
                    m.kind_name()
                ),
            ))
        }
    };
    let mut axes: Vec<Axis> = Vec::new();
    let mut axis_names: HashSet<&str> = HashSet::new();
    let mut include = Vec::new();
    let mut exclude = Vec::new();
    for (k, v) in pairs {
        let key = k
            .as_scalar()
            .ok_or_else(|| cx.node_err(k, "a matrix key must be a plain name"))?;
        match key {
            "include" => include = read_entries(cx, v, "include")?,
            "exclude" => exclude = read_entries(cx, v, "exclude")?,
            _ => {
                let items = match &v.kind {
                    NodeKind::Seq(items) => items,
                    _ => {
                        return Err(cx.node_err(
                            v,
                            format!(
                                "axis `{key}` must be a list of values, found {}",
                                v.kind_name()
                            ),
                        ))
                    }
                };
                if items.is_empty() {
                    return Err(cx.node_err(
                        v,
                        format!("axis `{key}` is empty; give it at least one value"),
                    ));
                }
                let mut values: Vec<String> = Vec::with_capacity(items.len());
                let mut seen: HashSet<&str> = HashSet::with_capacity(items.len());
                for item in items {
                    let value = item.as_scalar().ok_or_else(|| {
                        let hint = match suggest::closest(key, ["include", "exclude"]) {
                            Some(word) => format!("; did you mean `{word}`?"),
                            None => String::new(),
                        };
                        cx.node_err(
                            item,
                            format!(
                                "values of axis `{key}` must be scalars, found {}{hint}",
                                item.kind_name()
                            ),
                        )
                    })?;
                    if !seen.insert(value) {
                        return Err(
                            cx.node_err(item, format!("axis `{key}` lists `{value}` twice"))
                        );
                    }
                    values.push(value.to_string());
                }
                if !axis_names.insert(key) {
                    return Err(cx.node_err(k, format!("axis `{key}` is declared twice")));
                }
                axes.push(Axis {
                    name: key.to_string(),
                    values,
                    pos: k.pos,
                });
            }
        }
    }
    for e in &exclude {
        for (k, _) in &e.pairs {
            if !axis_names.contains(k.as_str()) {
                let names: Vec<&str> = axes.iter().map(|a| a.name.as_str()).collect();
                return Err(SpecError::new(
                    cx.path,
                    Some(e.pos),
                    format!(
                        "exclude entry names `{k}`, which is no axis (axes: {})",
                        names.join(", ")
                    ),
                ));
            }
        }
    }
    Ok((axes, include, exclude))
}

pub(super) fn read_entries(cx: &Ctx, v: &Node, what: &str) -> Result<Vec<Entry>, SpecError> {
    let items = match &v.kind {
        NodeKind::Seq(items) => items,
        NodeKind::Null => return Ok(Vec::new()),
        _ => {
            return Err(cx.node_err(
                v,
                format!(
                    "`{what}` must be a list of mappings, found {}",
                    v.kind_name()
                ),
            ))
        }
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let pairs = match &item.kind {
            NodeKind::Map(p) => p,
            _ => {
                return Err(cx.node_err(
                    item,
                    format!(
                        "each `{what}` entry must be a mapping, found {}",
                        item.kind_name()
                    ),
                ))
            }
        };
        if pairs.is_empty() {
            return Err(cx.node_err(item, format!("an empty `{what}` entry matches nothing")));
        }
        let mut entry = Vec::with_capacity(pairs.len());
        for (k, val) in pairs {
            let key = k
                .as_scalar()
                .ok_or_else(|| cx.node_err(k, format!("`{what}` keys must be plain names")))?;
            let value = val.as_scalar().ok_or_else(|| {
                cx.node_err(
                    val,
                    format!(
                        "`{what}` value of `{key}` must be a scalar, found {}",
                        val.kind_name()
                    ),
                )
            })?;
            entry.push((key.to_string(), value.to_string()));
        }
        out.push(Entry {
            pairs: entry,
            pos: item.pos,
        });
    }
    Ok(out)
}
