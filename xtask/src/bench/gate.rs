//! The icount record (`docs/bench/icount.json`) and the checks CI holds a
//! bench run to: every row steady from boot to boot, every recorded row
//! and kernel measured in every boot and every measured row recorded, and
//! no row worse than the record by more than the record's own spread.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::grid::{combined, Combined, RowKey};
use super::guest_records::KernelBench;
pub use super::shape::RunShape;

/// Boots of a one-thread row must agree this closely; the thread rows'
/// bound is their own (`threads::STEADY_LIMIT`).
pub const STEADY_LIMIT: f64 = 0.01;
/// Rows this long have the narrower room (`LONG_ROOM`).
pub const LONG_FROM_NS: f64 = 1_000_000.0;

/// The room a row has above the record is the record's measured spread
/// held between a floor (two boots can agree by chance) and a cap; this
/// run's spread never widens it (a change that makes boots disagree would
/// buy itself room):
/// (floor, cap) for rows of 1 ms or more and for shorter ones. Under
/// icount on one vCPU, with the grid's threads under SCHED_FIFO, every
/// row of the record's three boots of each kernel repeated within 0.01%,
/// and a change elsewhere in the kernel (3 instructions more a fault)
/// moved no row by more than 0.11%, the threads' rows included.
pub const LONG_ROOM: (f64, f64) = (0.005, 0.02);
pub const SHORT_ROOM: (f64, f64) = (0.01, 0.05);

/// One row of the record.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RecordRow {
    pub scenario: String,
    pub pages: u64,
    pub threads: u64,
    /// Median guest instructions per cycle.
    pub instructions: f64,
    /// Minor faults per cycle, and of those the user's (exceptions).
    pub faults: f64,
    pub user_faults: f64,
    /// The spread across the record's boots.
    pub spread: f64,
    /// Rss after the pattern (one thread); absent from older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_kb: Option<f64>,
}

/// What `bench --record` writes.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BenchRecord {
    pub clock: String,
    #[serde(flatten)]
    pub shape: RunShape,
    pub boots: usize,
    pub kernels: BTreeMap<String, Vec<RecordRow>>,
}

impl BenchRecord {
    pub fn of(kernels: &[KernelBench], shape: RunShape) -> BenchRecord {
        let boots = kernels.iter().map(|k| k.boots.len()).min().unwrap_or(0);
        let rows = |k: &KernelBench| -> Vec<RecordRow> {
            RowKey::all()
                .into_iter()
                .filter_map(|key| {
                    let c = combined(k, &key)?;
                    Some(RecordRow {
                        scenario: key.scenario.into(),
                        pages: key.pages,
                        threads: key.threads,
                        instructions: c.median_ns,
                        faults: c.faults,
                        user_faults: c.user_faults,
                        spread: c.spread,
                        rss_kb: c.rss_kb,
                    })
                })
                .collect()
        };
        BenchRecord {
            clock: "icount".into(),
            shape,
            boots,
            kernels: kernels
                .iter()
                .map(|k| (k.kernel.clone(), rows(k)))
                .collect(),
        }
    }

    pub fn row(&self, kernel: &str, key: &RowKey) -> Option<&RecordRow> {
        self.kernels.get(kernel)?.iter().find(|r| {
            r.scenario == key.scenario && r.pages == key.pages && r.threads == key.threads
        })
    }
}

/// How far apart a row's boots may be: 1% with one thread, the thread
/// rows' own bound with more.
pub fn steady_limit(key: &RowKey) -> f64 {
    if key.threads == 1 {
        STEADY_LIMIT
    } else {
        super::threads::STEADY_LIMIT
    }
}

/// The room a row has above the record: the record's spread, held
/// between the floor and the cap of its length.
pub fn tolerance(recorded: &RecordRow) -> f64 {
    let (floor, cap) = if recorded.instructions >= LONG_FROM_NS {
        LONG_ROOM
    } else {
        SHORT_ROOM
    };
    recorded.spread.clamp(floor, cap)
}

/// Rows whose boots differ by more than their bound (`steady_limit`),
/// every kernel: (kernel, row, its figures). Needs two boots or more.
pub fn unsteady(kernels: &[KernelBench]) -> Vec<(String, RowKey, Combined)> {
    let mut out = vec![];
    for k in kernels {
        for key in RowKey::all() {
            let over = |c: &Combined| c.boots >= 2 && c.spread > steady_limit(&key);
            if let Some(c) = combined(k, &key).filter(over) {
                out.push((k.kernel.clone(), key, c));
            }
        }
    }
    out
}

/// The unsteady rows' lines, each UNSTEADY: every one fails the gate
/// and the record. Returns the text and how many.
pub fn unsteady_report(kernels: &[KernelBench]) -> (String, usize) {
    let rows = unsteady(kernels);
    let boots = kernels.iter().map(|k| k.boots.len()).min().unwrap_or(0);
    if boots < 2 {
        return (
            "\nSteadiness: one boot per kernel, nothing to compare (--repeat 2 or more).\n".into(),
            0,
        );
    }
    let mut out = format!(
        "\nSteadiness ({boots} boots): {} row(s) whose boots differ by more than {:.0}% (one thread) or {:.1}% (2 and 4 threads) (UNSTEADY: these fail the gate):\n",
        rows.len(),
        STEADY_LIMIT * 100.0,
        super::threads::STEADY_LIMIT * 100.0
    );
    for (kernel, key, c) in &rows {
        writeln!(
            out,
            "  UNSTEADY {kernel:<10} {:<44} {:>10.1}k instructions, boots {:.1}% apart",
            key.describe(),
            c.median_ns / 1000.0,
            c.spread * 100.0
        )
        .unwrap();
    }
    (out, rows.len())
}

/// A run held to the record.
#[derive(Debug, Default, PartialEq)]
pub struct Comparison {
    /// One line for each way a row is worse (instructions, faults).
    pub worse: Vec<String>,
    /// Rows worse in some way, and rows compared.
    pub rows_worse: usize,
    pub compared: usize,
    /// The run's kernels and rows the record lacks.
    pub unrecorded: Vec<String>,
    /// The record's kernels and rows the run did not measure in every
    /// boot.
    pub missing: Vec<String>,
}

impl Comparison {
    /// Whether the run fails the record: a row worse, missing or
    /// unrecorded, or nothing compared.
    pub fn failed(&self) -> bool {
        self.rows_worse > 0
            || !self.missing.is_empty()
            || !self.unrecorded.is_empty()
            || self.compared == 0
    }
}

/// Every row of every kernel against the record: worse by more than its
/// tolerance, in instructions or in faults; and every kernel and row
/// that one side has and the other lacks, a row measured in some boots
/// only counted as lacking.
pub fn regressions(record: &BenchRecord, kernels: &[KernelBench]) -> Comparison {
    let mut c = Comparison::default();
    for name in record.kernels.keys() {
        if !kernels.iter().any(|k| &k.kernel == name) {
            c.missing.push(format!("{name} (every row)"));
        }
    }
    for k in kernels {
        if !record.kernels.contains_key(&k.kernel) {
            c.unrecorded.push(format!("{} (every row)", k.kernel));
            continue;
        }
        for key in RowKey::all() {
            let row = format!("{}: {}", k.kernel, key.describe());
            match (combined(k, &key), record.row(&k.kernel, &key)) {
                (None, None) => {}
                (Some(_), None) => c.unrecorded.push(row),
                (None, Some(_)) => c.missing.push(row),
                (Some(now), Some(_)) if now.boots < k.boots.len() => c.missing.push(format!(
                    "{row} (measured in {} of {} boots)",
                    now.boots,
                    k.boots.len()
                )),
                (Some(now), Some(then)) => {
                    c.compared += 1;
                    let lines = row_regressions(&k.kernel, &key, &now, then);
                    c.rows_worse += usize::from(!lines.is_empty());
                    c.worse.extend(lines);
                }
            }
        }
    }
    c
}

/// Every row measured in some boots of its kernel but not all, as
/// `kernel: row (measured in N of M boots)`: a record takes none of them.
pub fn partial_rows(kernels: &[KernelBench]) -> Vec<String> {
    let mut partial = vec![];
    for k in kernels {
        for key in RowKey::all() {
            if let Some(now) = combined(k, &key).filter(|c| c.boots < k.boots.len()) {
                partial.push(format!(
                    "{}: {} (measured in {} of {} boots)",
                    k.kernel,
                    key.describe(),
                    now.boots,
                    k.boots.len()
                ));
            }
        }
    }
    partial
}

/// One row's lines: its instructions, then its faults.
fn row_regressions(kernel: &str, key: &RowKey, now: &Combined, then: &RecordRow) -> Vec<String> {
    let tol = tolerance(then);
    let grew = now.median_ns / then.instructions.max(1.0) - 1.0;
    let mut worse = vec![];
    if grew > tol {
        worse.push(format!(
            "{kernel}: {}: {:.1}k instructions against the record's {:.1}k (+{:.2}%, allowed {:.2}%)",
            key.describe(),
            now.median_ns / 1000.0,
            then.instructions / 1000.0,
            grew * 100.0,
            tol * 100.0
        ));
    }
    if now.faults > then.faults * (1.0 + tol) + 0.5 {
        worse.push(format!(
            "{kernel}: {}: {:.1} faults a cycle against the record's {:.1}",
            key.describe(),
            now.faults,
            then.faults
        ));
    }
    worse
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::grid::tests::grid_record;
    use crate::bench::shape::tests::shape;

    fn kernel(name: &str, boots: &[(u64, f64)]) -> KernelBench {
        let key = RowKey::find("nopopulate_touchall", 2048, 1).unwrap();
        KernelBench {
            kernel: name.into(),
            boots: boots
                .iter()
                .map(|&(ns, faults)| vec![grid_record(&key, &[ns, ns, ns], faults, None)])
                .collect(),
        }
    }

    #[test]
    fn a_row_worse_than_the_record_by_more_than_its_spread_fails() {
        let recorded = [kernel("adaptive", &[(1_800_000, 38.0), (1_801_000, 38.0)])];
        let record = BenchRecord::of(&recorded, shape());
        let c = regressions(&record, &recorded);
        assert_eq!((c.worse.len(), c.compared), (0, 1), "{:?}", c.worse);
        assert!(!c.failed());
        // 0.8% slower: above the record's 0.06% spread and the 0.5% floor.
        let slower = [kernel("adaptive", &[(1_815_000, 38.0), (1_815_000, 38.0)])];
        let worse = regressions(&record, &slower).worse;
        assert_eq!(worse.len(), 1, "{worse:?}");
        assert!(
            worse[0].starts_with("adaptive: write all, 8 MiB, 1 thread:"),
            "{worse:?}"
        );
        // A run's own spread buys no room: 0.8% slower with boots 3%
        // apart still fails against the record's 0.5%.
        let noisy = [kernel("adaptive", &[(1_785_000, 38.0), (1_845_000, 38.0)])];
        let c = regressions(&record, &noisy);
        assert_eq!(c.rows_worse, 1, "{:?}", c.worse);
        assert!(c.worse[0].contains("allowed 0.50%"), "{:?}", c.worse);
        // More faults fail on their own.
        let faulty = [kernel("adaptive", &[(1_800_000, 40.0), (1_800_000, 40.0)])];
        let c = regressions(&record, &faulty);
        assert_eq!(c.rows_worse, 1, "one row, worse in faults: {:?}", c.worse);
        assert!(
            c.worse.iter().any(|w| w.contains("40.0 faults")),
            "{:?}",
            c.worse
        );
        // Worse in both ways is one row worse, said twice.
        let both = [kernel("adaptive", &[(1_900_000, 40.0), (1_900_000, 40.0)])];
        let both = regressions(&record, &both);
        assert_eq!(
            (both.worse.len(), both.rows_worse),
            (2, 1),
            "{:?}",
            both.worse
        );
        // Faster is never a failure.
        let faster = [kernel("adaptive", &[(1_500_000, 30.0), (1_500_000, 30.0)])];
        let c = regressions(&record, &faster);
        assert_eq!((c.worse.len(), c.rows_worse, c.compared), (0, 0, 1));
    }

    #[test]
    fn every_recorded_row_and_kernel_is_measured_and_every_measured_one_recorded() {
        let recorded = [
            kernel("adaptive", &[(1_800_000, 38.0), (1_800_000, 38.0)]),
            kernel("eager", &[(1_700_000, 0.0), (1_700_000, 0.0)]),
        ];
        let record = BenchRecord::of(&recorded, shape());
        // eager not booted: named, and the gate fails.
        let c = regressions(&record, &recorded[..1]);
        assert_eq!(c.missing, ["eager (every row)"]);
        assert!(c.failed());
        // A kernel the record lacks fails, not a warning.
        let mut more = recorded.to_vec();
        more.push(kernel("direct", &[(1, 0.0), (1, 0.0)]));
        let c = regressions(&record, &more);
        assert_eq!(c.unrecorded, ["direct (every row)"]);
        assert!(c.failed());
        // A recorded row the run lacks is named, not skipped.
        let empty = [
            KernelBench {
                kernel: "adaptive".into(),
                boots: vec![vec![], vec![]],
            },
            recorded[1].clone(),
        ];
        let c = regressions(&record, &empty);
        assert_eq!(c.missing, ["adaptive: write all, 8 MiB, 1 thread"]);
        assert!(c.failed());
        // A row measured in one of two boots is not compared as whole.
        let mut half = recorded.to_vec();
        half[0].boots[1].clear();
        let c = regressions(&record, &half);
        let partial = "adaptive: write all, 8 MiB, 1 thread (measured in 1 of 2 boots)";
        assert_eq!(c.missing, [partial]);
        // And a record takes no such row.
        assert_eq!(partial_rows(&half), [partial]);
        assert!(partial_rows(&recorded).is_empty());
        // A measured row the record lacks fails, naming it.
        let extra = RowKey::find("stride_2", 16, 1).unwrap();
        let mut new_row = recorded.to_vec();
        for boot in &mut new_row[0].boots {
            boot.push(grid_record(&extra, &[9, 9, 9], 0.0, None));
        }
        let c = regressions(&record, &new_row);
        assert_eq!(
            c.unrecorded,
            ["adaptive: write every 2nd page, 16 pages, 1 thread"]
        );
        assert!(c.failed());
    }

    #[test]
    fn the_room_is_the_records_spread_held_between_floor_and_cap() {
        let row = |ns: f64, spread: f64| {
            tolerance(&RecordRow {
                scenario: "stride_2".into(),
                pages: 2048,
                threads: 4,
                instructions: ns,
                faults: 0.0,
                user_faults: 0.0,
                spread,
                rss_kb: None,
            })
        };
        assert_eq!(row(2e6, 0.0), LONG_ROOM.0);
        assert_eq!(row(3e4, 0.0), SHORT_ROOM.0);
        assert_eq!(row(3e4, 0.03), 0.03, "a wider recorded spread");
        assert_eq!(row(3e4, 0.9), SHORT_ROOM.1, "but capped");
        assert_eq!(row(2e6, 0.9), LONG_ROOM.1);
    }

    #[test]
    fn every_row_is_held_to_its_steadiness_bound() {
        let steady = [kernel("eager", &[(1_800_000, 0.0), (1_805_000, 0.0)])];
        assert_eq!(unsteady_report(&steady).1, 0);
        let apart = [kernel("eager", &[(1_800_000, 0.0), (1_830_000, 0.0)])];
        let (text, failing) = unsteady_report(&apart);
        assert_eq!(failing, 1, "{text}");
        assert!(text.contains("UNSTEADY eager"), "{text}");
        // A short one-thread row is held too, not only those of 1 ms.
        let short = [kernel("eager", &[(10_000, 0.0), (10_200, 0.0)])];
        assert_eq!(unsteady_report(&short).1, 1);
        // A thread row, to the threads' own bound.
        let key = RowKey::find("stride_2", 16, 4).unwrap();
        let threads = |a: u64, b: u64| {
            [KernelBench {
                kernel: "adaptive".into(),
                boots: [a, b]
                    .map(|ns| vec![grid_record(&key, &[ns; 3], 0.0, None)])
                    .to_vec(),
            }]
        };
        let within = (1.0 + crate::bench::threads::STEADY_LIMIT * 0.9) * 10_000.0;
        let beyond = (1.0 + crate::bench::threads::STEADY_LIMIT * 1.1) * 10_000.0;
        assert_eq!(unsteady_report(&threads(10_000, within as u64)).1, 0);
        assert_eq!(unsteady_report(&threads(10_000, beyond as u64)).1, 1);
        let (text, failing) = unsteady_report(&[kernel("eager", &[(1, 0.0)])]);
        assert_eq!(failing, 0);
        assert!(text.contains("nothing to compare"), "{text}");
    }
}
