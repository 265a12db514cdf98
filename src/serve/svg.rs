//! The plots, drawn on the server as SVG (no script in the pages): a
//! matrix's trend of failing cells as a sparkline, and its runs' test
//! counts as bars. Only numbers and escaped run ids go into them.

use serde_json::Value;

/// `s` escaped for SVG text and attributes.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn num(v: &Value, key: &str) -> f64 {
    v[key].as_u64().unwrap_or(0) as f64
}

/// A small bar per run: its failing cells' share, red when it failed.
pub fn sparkline(trend: &[Value]) -> String {
    let (w, h) = (6.0, 24.0);
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="trend" width="{}" height="{h}" role="img">"#,
        (trend.len() as f64 * w).max(w)
    );
    for (i, t) in trend.iter().enumerate() {
        let cells = num(t, "cells").max(1.0);
        let share = num(t, "failing") / cells;
        let bar = 2.0 + share * (h - 2.0);
        let fill = if t["verdict"] == "failed" {
            "#c62828"
        } else {
            "#2e7d32"
        };
        s.push_str(&format!(
            r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{bar:.1}" fill="{fill}"><title>{}: {} of {} cells failing</title></rect>"#,
            i as f64 * w,
            h - bar,
            w - 1.0,
            esc(t["run"].as_str().unwrap_or("")),
            num(t, "failing"),
            num(t, "cells"),
        ));
    }
    s.push_str("</svg>");
    s
}

/// The runs' failed and flaky tests as stacked bars, with an axis of
/// counts and a legend.
pub fn counts_plot(runs: &[Value]) -> String {
    let (w, h, left, bottom) = (640.0, 180.0, 40.0, 20.0);
    let top = runs
        .iter()
        .map(|r| num(r, "failed") + num(r, "flaky"))
        .fold(1.0_f64, f64::max);
    let step = (w - left) / runs.len().max(1) as f64;
    let y = |v: f64| (h - bottom) * (1.0 - v / top);
    let mut s = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img"><text x="0" y="12" font-size="11">{top}</text><text x="0" y="{}" font-size="11">0</text><line x1="{left}" y1="{}" x2="{w}" y2="{}" stroke="#999"/>"##,
        h - bottom,
        h - bottom,
        h - bottom
    );
    for (i, r) in runs.iter().enumerate() {
        let x = left + i as f64 * step;
        let (failed, flaky) = (num(r, "failed"), num(r, "flaky"));
        let title = format!(
            "{}: {failed} failed, {flaky} flaky, {} of {} cells failing",
            esc(r["run"].as_str().unwrap_or("")),
            num(r, "failing_cells"),
            num(r, "cells")
        );
        s.push_str(&format!(
            r##"<g><title>{title}</title><rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#c62828"/><rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#ef6c00"/></g>"##,
            y(failed),
            (step - 2.0).max(1.0),
            h - bottom - y(failed),
            y(failed + flaky),
            (step - 2.0).max(1.0),
            y(failed) - y(failed + flaky),
        ));
    }
    s.push_str(&format!(
        r##"<text x="{left}" y="{}" font-size="11"><tspan fill="#c62828">■ failed</tspan> <tspan fill="#ef6c00">■ flaky (passed on a rerun)</tspan>, oldest run first</text></svg>"##,
        h - 4.0
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serve_plots_escape_run_ids() {
        let runs = [
            serde_json::json!({"run": "<x>", "failed": 3, "flaky": 1, "cells": 2, "failing_cells": 1}),
        ];
        let svg = counts_plot(&runs);
        assert!(svg.contains("&lt;x&gt;: 3 failed, 1 flaky"), "{svg}");
        assert!(!svg.contains("<x>"));
        assert!(sparkline(&[]).starts_with("<svg"));
    }
}
