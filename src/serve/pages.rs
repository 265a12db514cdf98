//! The pages: each page's JSON value ([`super::data`]) rendered by
//! minijinja, every template with HTML escaping on, so that whatever a run
//! wrote (a test named `<img src=x onerror=alert(1)>`, a message, an axis
//! value) shows as text. Only the SVG drawn here ([`super::svg`]) is put in
//! unescaped. The templates are `reports/serve/*.html.j2`; no script.
//!
//! Also the report's grid of a matrix's last run: the `report:` rows and
//! columns of its run store's plan (the first axis down and the second
//! across when the store is gone), a chip per cell with its strip.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::OnceLock;

use minijinja::{AutoEscape, Environment};
use serde_json::{json, Value};

use crate::history::backend::{RunRow, StoredCell};

const TEMPLATES: &[(&str, &str)] = &[
    (
        "layout.html",
        include_str!("../../reports/serve/layout.html.j2"),
    ),
    (
        "matrices.html",
        include_str!("../../reports/serve/matrices.html.j2"),
    ),
    (
        "matrix.html",
        include_str!("../../reports/serve/matrix.html.j2"),
    ),
    (
        "test.html",
        include_str!("../../reports/serve/test.html.j2"),
    ),
    (
        "flaky.html",
        include_str!("../../reports/serve/flaky.html.j2"),
    ),
    (
        "runs.html",
        include_str!("../../reports/serve/runs.html.j2"),
    ),
    (
        "hosts.html",
        include_str!("../../reports/serve/hosts.html.j2"),
    ),
    (
        "problem.html",
        include_str!("../../reports/serve/problem.html.j2"),
    ),
];

/// The pages' style sheet.
pub const STYLE: &str = include_str!("../../reports/serve/serve.css");

fn env() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        // Every page is HTML, whatever its name: escape everything.
        env.set_auto_escape_callback(|_| AutoEscape::Html);
        env.set_undefined_behavior(minijinja::UndefinedBehavior::Lenient);
        for (name, text) in TEMPLATES {
            env.add_template(name, text)
                .unwrap_or_else(|e| panic!("the built-in template {name}: {e}"));
        }
        env
    })
}

/// The page `template` (`matrix.html`) of `value`; a template that fails
/// is the problem page.
pub fn render(template: &str, value: &Value) -> String {
    let rendered = env().get_template(template).and_then(|t| t.render(value));
    match rendered {
        Ok(html) => html,
        Err(e) => problem("the page could not be drawn", &e.to_string()),
    }
}

/// A page that says what went wrong (`title`) and why.
pub fn problem(title: &str, why: &str) -> String {
    env()
        .get_template("problem.html")
        .and_then(|t| t.render(json!({"title": title, "why": why})))
        .unwrap_or_else(|_| "problem".to_string())
}

/// The grid of the matrix's run `latest`, each cell with its strip over
/// `runs`.
pub fn grid_of(
    stores: &Path,
    latest: &RunRow,
    runs: &[RunRow],
    cells: &HashMap<String, Vec<StoredCell>>,
) -> Value {
    let strips = super::data::cell_strips(runs, cells);
    let now: Vec<&StoredCell> = cells.get(&latest.run).into_iter().flatten().collect();
    let (mut row_axes, mut col_axes, keys) = layout(stores, &latest.run, &now);
    if row_axes.is_empty() && col_axes.is_empty() {
        row_axes.extend(keys.first().cloned());
        col_axes.extend(keys.get(1).cloned());
    }
    let values = |c: &StoredCell, axes: &[String]| -> String {
        axes.iter()
            .map(|a| c.axes.get(a).cloned().unwrap_or_default())
            .collect::<Vec<_>>()
            .join(" · ")
    };
    let rest: Vec<String> = keys
        .iter()
        .filter(|k| !row_axes.contains(k) && !col_axes.contains(k))
        .cloned()
        .collect();
    let row_labels: BTreeSet<String> = now.iter().map(|c| values(c, &row_axes)).collect();
    let columns: Vec<String> = now
        .iter()
        .map(|c| values(c, &col_axes))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let rows: Vec<Value> = row_labels
        .iter()
        .map(|label| {
            let slots: Vec<Vec<Value>> = columns
                .iter()
                .map(|col| {
                    now.iter()
                        .filter(|c| &values(c, &row_axes) == label && &values(c, &col_axes) == col)
                        .map(|c| {
                            let (word, css) = super::data::cell_word(c);
                            json!({"id": c.cell, "label": values(c, &rest), "outcome": word,
                                   "css": css, "strip": strips.get(&c.cell)})
                        })
                        .collect()
                })
                .collect();
            json!({"label": label, "slots": slots})
        })
        .collect();
    json!({"row_axes": row_axes, "col_axes": col_axes, "columns": columns, "rows": rows})
}

/// The `report:` rows, columns and the axes in order: from the run's
/// store when it is there, else none and the cells' axes by name.
fn layout(
    stores: &Path,
    run: &str,
    now: &[&StoredCell],
) -> (Vec<String>, Vec<String>, Vec<String>) {
    let plan = super::files::store_of(stores, run)
        .map(|s| crate::store::layout::plan_of(&stores.join(s)))
        .and_then(|p| crate::store::record::RunManifest::load(&p).ok());
    match plan {
        Some(m) => (m.report.rows, m.report.columns, m.keys),
        None => {
            let keys: BTreeSet<String> = now.iter().flat_map(|c| c.axes.keys().cloned()).collect();
            (Vec::new(), Vec::new(), keys.into_iter().collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_templates_escape_what_runs_wrote() {
        let hostile = "<img src=x onerror=alert(1)>";
        let html = render(
            "flaky.html",
            &json!({"page": "flaky", "history": "h", "total": 1, "followed": 1,
                    "tests": [{"test": hostile, "matrix": "m", "cell": hostile, "link": "/x",
                               "rate": "50%", "failures": 1, "runs": 2, "why": "w",
                               "where_words": hostile, "strip": []}]}),
        );
        assert!(
            html.contains("&lt;img src=x onerror=alert(1)&gt;"),
            "{html}"
        );
        assert!(!html.contains(hostile), "{html}");
        let page = problem("<b>", "<script>");
        assert!(
            page.contains("&lt;b&gt;") && page.contains("&lt;script&gt;"),
            "{page}"
        );
    }
}
