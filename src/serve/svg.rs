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

/// Each run's tests as a bar of their shares: failed (red) at the bottom,
/// flaky (passed on a rerun, orange) above, passed (green) on top; the
/// counts in each bar's title, and the failed count above the bar.
pub fn counts_plot(runs: &[Value]) -> String {
    let (w, h, left, bottom) = (640.0, 180.0, 40.0, 20.0);
    let step = (w - left) / runs.len().max(1) as f64;
    let tall = h - bottom - 14.0;
    let mut s = format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img"><text x="0" y="24" font-size="11">100%</text><text x="0" y="{}" font-size="11">0</text>"##,
        h - bottom
    );
    for (i, r) in runs.iter().enumerate() {
        let x = left + i as f64 * step;
        let bar = (step - 2.0).max(1.0);
        let (passed, failed, flaky) = (num(r, "passed"), num(r, "failed"), num(r, "flaky"));
        let total = (passed + failed + flaky).max(1.0);
        let title = format!(
            "{}: {passed} passed, {failed} failed, {flaky} flaky, {} of {} cells failing",
            esc(r["run"].as_str().unwrap_or("")),
            num(r, "failing_cells"),
            num(r, "cells")
        );
        let mut y = h - bottom;
        s.push_str(&format!("<g><title>{title}</title>"));
        for (count, fill) in [(failed, "#c62828"), (flaky, "#ef6c00"), (passed, "#66bb6a")] {
            let part = tall * count / total;
            // A failure is never too thin to see.
            let part = if count > 0.0 { part.max(2.0) } else { 0.0 };
            y -= part;
            s.push_str(&format!(
                r#"<rect x="{x:.1}" y="{y:.1}" width="{bar:.1}" height="{part:.1}" fill="{fill}"/>"#
            ));
        }
        if step >= 18.0 {
            s.push_str(&format!(
                r##"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle" fill="#c62828">{failed}</text>"##,
                x + bar / 2.0,
                (y - 3.0).max(10.0)
            ));
        }
        s.push_str("</g>");
    }
    s.push_str(&format!(
        r##"<text x="{left}" y="{}" font-size="11"><tspan fill="#c62828">■ failed</tspan> <tspan fill="#ef6c00">■ flaky (passed on a rerun)</tspan> <tspan fill="#66bb6a">■ passed</tspan>, oldest run first</text></svg>"##,
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
            serde_json::json!({"run": "<x>", "passed": 5, "failed": 3, "flaky": 1, "cells": 2, "failing_cells": 1}),
        ];
        let svg = counts_plot(&runs);
        assert!(
            svg.contains("&lt;x&gt;: 5 passed, 3 failed, 1 flaky"),
            "{svg}"
        );
        assert!(!svg.contains("<x>"));
        assert!(sparkline(&[]).starts_with("<svg"));
    }
}
