//! The run's triage (`triage.json`, [`crate::triage`]) in the pages: the
//! line beside each new signature (`started at <commit> "<subject>" …`)
//! and the fix range of each signature that is gone.

use std::path::Path;

use super::view::View;
use crate::triage::store::Triage;

/// The triage of the run whose `report/` folder is `out`, if it has one
/// (a triage that cannot be read is left out with a warning).
pub fn of(out: &Path) -> Option<Triage> {
    let run = out.parent()?;
    if !crate::store::layout::is_run(run) {
        return None;
    }
    match crate::triage::store::load(run) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!("{e}");
            None
        }
    }
}

/// Puts the triage's lines into the view.
pub fn apply(v: &mut View, triage: Option<&Triage>) {
    let Some(t) = triage else {
        return;
    };
    for s in &mut v.signatures {
        if let Some(l) = t.line_of(&s.id) {
            s.triage = l.to_string();
        }
    }
    v.triage_gone = t
        .gone()
        .map(|i| format!("{} \"{}\": {}", i.signature.id, i.signature.message, i.line))
        .collect();
}
