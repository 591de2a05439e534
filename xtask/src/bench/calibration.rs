//! The model of the seed's machine for a run under icount: fitted on the
//! run's own eager and mainline, else on the record's.

use super::grid::{combined, Clock, RowKey};
use super::guest_records::KernelBench;
use super::model::{seed_cells, Cell, CostModel};
use super::record::{read_record, record_path};

/// The model and the cells it was fitted on, and where they came from.
pub(super) struct Calibrated {
    pub(super) model: CostModel,
    pub(super) cells: Vec<Cell>,
    pub(super) source: String,
}

/// The model fitted on this run's eager and mainline, else on the record's.
pub(super) fn model_for(results: &[KernelBench], clock: Clock) -> Option<Calibrated> {
    if clock != Clock::Icount {
        return None;
    }
    let from_run = seed_cells(|kernel, scenario| {
        let k = results.iter().find(|k| k.kernel == kernel)?;
        let key = RowKey::find(scenario, 2048, 1)?;
        combined(k, &key).map(|c| (c.median_ns, c.user_faults))
    });
    let (cells, source) = match from_run {
        Some(cells) => (cells, "this run's eager and mainline".to_string()),
        None => {
            let record = read_record().ok()?;
            let cells = seed_cells(|kernel, scenario| {
                let key = RowKey::find(scenario, 2048, 1)?;
                record
                    .row(kernel, &key)
                    .map(|r| (r.instructions, r.user_faults))
            })?;
            (
                cells,
                format!(
                    "the record's eager and mainline ({})",
                    record_path().display()
                ),
            )
        }
    };
    CostModel::fit(&cells).map(|model| Calibrated {
        model,
        cells,
        source,
    })
}
