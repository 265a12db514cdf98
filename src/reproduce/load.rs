//! Finding one cell of a finished run: its planned form, its record and
//! the run's lock.

use crate::plan::Cell;
use crate::run::{RunError, RunStore};
use crate::store::lock::Lock;
use crate::store::record::{CellRecord, RunManifest};

/// Finds `cell` in a run: its planned form, its record (if it ran) and the
/// run's lock (if written).
pub fn load_cell(
    store: &RunStore,
    cell: &str,
) -> Result<(RunManifest, Cell, Option<CellRecord>, Option<Lock>), RunError> {
    let manifest = store.manifest()?;
    let planned = manifest
        .cells
        .iter()
        .find(|c| c.id == cell)
        .cloned()
        .ok_or_else(|| {
            let ids: Vec<&str> = manifest
                .cells
                .iter()
                .map(|c| c.id.as_str())
                .take(20)
                .collect();
            RunError::Usage(format!(
                "run {} has no cell `{cell}` (cells: {}{})",
                store.dir.display(),
                ids.join(", "),
                if manifest.cells.len() > 20 {
                    ", …"
                } else {
                    ""
                }
            ))
        })?;
    let record = store.cell_record(cell).ok();
    let lock = Lock::load(&crate::store::layout::lock_of(&store.dir)).ok();
    Ok((manifest, planned, record, lock))
}
