//! The icount record (`docs/bench/icount.json`) and the checks CI holds a
//! bench run to: every row steady from boot to boot, and no row of any
//! kernel worse than the record by more than its own measured spread.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::grid::{combined, Combined, RowKey};
use super::guest_records::KernelBench;

/// Boots of one-thread rows this long or longer must agree this closely.
pub const STEADY_LIMIT: f64 = 0.01;
pub const STEADY_FROM_NS: f64 = 1_000_000.0;

/// The room a row has above the record is its measured spread held
/// between a floor (two boots can agree by chance) and a cap (a change
/// that makes boots disagree must not widen its own room without end):
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
}

/// How a run was made, as far as it changes a row's instructions: a
/// record and a run are compared only when these are the same.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunShape {
    /// `--quick` (fewer cycles and warm-ups per row).
    pub quick: bool,
    /// `--cpus`, and the kernel arguments after the harness's.
    pub cpus: Option<u32>,
    pub append: Vec<String>,
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

    /// This record with `newer`'s kernels put in its place, when both were
    /// made alike; `newer` alone otherwise.
    pub fn merged(self, newer: BenchRecord) -> BenchRecord {
        if self.shape != newer.shape {
            return newer;
        }
        let mut kernels = self.kernels;
        kernels.extend(newer.kernels);
        BenchRecord {
            boots: self.boots.min(newer.boots),
            kernels,
            ..newer
        }
    }

    /// How `shape` differs from the record's, if it does.
    pub fn mismatch(&self, shape: &RunShape) -> Option<String> {
        let r = &self.shape;
        if r.quick != shape.quick {
            return Some(format!(
                "{} --quick, this run {}",
                if r.quick { "with" } else { "without" },
                if shape.quick { "with it" } else { "without it" }
            ));
        }
        (r.cpus != shape.cpus || r.append != shape.append).then(|| {
            format!(
                "with --cpus {:?} and kernel arguments {:?}, this run with {:?} and {:?}",
                r.cpus, r.append, shape.cpus, shape.append
            )
        })
    }

    pub fn row(&self, kernel: &str, key: &RowKey) -> Option<&RecordRow> {
        self.kernels.get(kernel)?.iter().find(|r| {
            r.scenario == key.scenario && r.pages == key.pages && r.threads == key.threads
        })
    }
}

/// Whether a row is held to 1%: one thread, 1 ms or more of guest time.
pub fn is_steady_row(key: &RowKey, median_ns: f64) -> bool {
    key.threads == 1 && median_ns >= STEADY_FROM_NS
}

/// The room a row has above the record: its own spread, this run's or
/// the record's, held between the floor and the cap of its length.
pub fn tolerance(now: &Combined, recorded: &RecordRow) -> f64 {
    let (floor, cap) = if recorded.instructions >= STEADY_FROM_NS {
        LONG_ROOM
    } else {
        SHORT_ROOM
    };
    now.spread.max(recorded.spread).clamp(floor, cap)
}

/// Rows whose boots differ by more than 1%, every kernel: (kernel, row,
/// its figures). Needs two boots or more.
pub fn unsteady(kernels: &[KernelBench]) -> Vec<(String, RowKey, Combined)> {
    let mut out = vec![];
    for k in kernels {
        for key in RowKey::all() {
            if let Some(c) = combined(k, &key).filter(|c| c.boots >= 2 && c.spread > STEADY_LIMIT) {
                out.push((k.kernel.clone(), key, c));
            }
        }
    }
    out
}

/// The unsteady rows' lines; those that fail CI (one thread, 1 ms or
/// more) are marked. Returns the text and how many fail.
pub fn unsteady_report(kernels: &[KernelBench]) -> (String, usize) {
    let rows = unsteady(kernels);
    let boots = kernels.iter().map(|k| k.boots.len()).min().unwrap_or(0);
    if boots < 2 {
        return (
            "\nSteadiness: one boot per kernel, nothing to compare (--repeat 2 or more).\n".into(),
            0,
        );
    }
    let failing = rows
        .iter()
        .filter(|(_, key, c)| is_steady_row(key, c.median_ns))
        .count();
    let mut out = format!(
        "\nSteadiness ({boots} boots): {} row(s) whose boots differ by more than {:.0}%, {failing} of them one-thread rows of 1 ms or more (UNSTEADY: these fail the gate):\n",
        rows.len(),
        STEADY_LIMIT * 100.0
    );
    for (kernel, key, c) in &rows {
        let mark = if is_steady_row(key, c.median_ns) {
            "UNSTEADY"
        } else {
            "unsteady"
        };
        writeln!(
            out,
            "  {mark:<8} {kernel:<10} {:<44} {:>10.1}k instructions, boots {:.1}% apart",
            key.describe(),
            c.median_ns / 1000.0,
            c.spread * 100.0
        )
        .unwrap();
    }
    (out, failing)
}

/// A run held to the record.
#[derive(Debug, Default, PartialEq)]
pub struct Comparison {
    /// One line for each way a row is worse (instructions, faults).
    pub worse: Vec<String>,
    /// Rows worse in some way, and rows compared.
    pub rows_worse: usize,
    pub compared: usize,
    /// The run's kernels the record has no rows of.
    pub unrecorded: Vec<String>,
    /// Rows the record has of a run's kernel that the run did not measure.
    pub missing: Vec<String>,
}

/// Every row of every kernel against the record: worse by more than its
/// tolerance, in instructions or in faults.
pub fn regressions(record: &BenchRecord, kernels: &[KernelBench]) -> Comparison {
    let mut c = Comparison::default();
    for k in kernels {
        if !record.kernels.contains_key(&k.kernel) {
            c.unrecorded.push(k.kernel.clone());
        }
        for key in RowKey::all() {
            let (now, Some(then)) = (combined(k, &key), record.row(&k.kernel, &key)) else {
                continue;
            };
            let Some(now) = now else {
                c.missing.push(format!("{}: {}", k.kernel, key.describe()));
                continue;
            };
            c.compared += 1;
            let lines = row_regressions(&k.kernel, &key, &now, then);
            c.rows_worse += usize::from(!lines.is_empty());
            c.worse.extend(lines);
        }
    }
    c
}

/// One row's lines: its instructions, then its faults.
fn row_regressions(kernel: &str, key: &RowKey, now: &Combined, then: &RecordRow) -> Vec<String> {
    let tol = tolerance(now, then);
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
        // 0.8% slower: above the record's 0.06% spread and the 0.5% floor.
        let slower = [kernel("adaptive", &[(1_815_000, 38.0), (1_815_000, 38.0)])];
        let worse = regressions(&record, &slower).worse;
        assert_eq!(worse.len(), 1, "{worse:?}");
        assert!(
            worse[0].starts_with("adaptive: write all, 8 MiB, 1 thread:"),
            "{worse:?}"
        );
        // A steady row never gets more than 2%, whatever its spread.
        let noisy = [kernel("adaptive", &[(1_800_000, 38.0), (1_900_000, 38.0)])];
        let worse = regressions(&record, &noisy).worse;
        assert_eq!(worse.len(), 1, "{worse:?}");
        // More faults fail on their own.
        let faulty = [kernel("adaptive", &[(1_800_000, 40.0)])];
        let c = regressions(&record, &faulty);
        assert_eq!(c.rows_worse, 1, "one row, worse in faults: {:?}", c.worse);
        let worse = c.worse;
        assert!(worse.iter().any(|w| w.contains("40.0 faults")), "{worse:?}");
        // Faster is never a failure; another kernel is not compared.
        // Worse in both ways is one row worse, said twice.
        let both = regressions(&record, &[kernel("adaptive", &[(1_900_000, 40.0)])]);
        assert_eq!(
            (both.worse.len(), both.rows_worse),
            (2, 1),
            "{:?}",
            both.worse
        );
        let c = regressions(&record, &[kernel("adaptive", &[(1_500_000, 30.0)])]);
        assert_eq!((c.worse.len(), c.rows_worse, c.compared), (0, 0, 1));
        let c = regressions(&record, &[kernel("eager", &[(9, 0.0)])]);
        assert_eq!((c.compared, c.unrecorded), (0, vec!["eager".to_string()]));
        // A recorded row the run lacks is named, not skipped.
        let empty = [KernelBench {
            kernel: "adaptive".into(),
            boots: vec![vec![], vec![]],
        }];
        let c = regressions(&record, &empty);
        assert_eq!(c.compared, 0);
        assert_eq!(c.missing, ["adaptive: write all, 8 MiB, 1 thread"]);
    }

    fn shape() -> RunShape {
        RunShape {
            quick: true,
            cpus: Some(1),
            append: vec!["nokaslr".into()],
        }
    }

    #[test]
    fn a_record_takes_a_runs_kernels_and_names_how_a_run_differs() {
        let old = BenchRecord::of(
            &[
                kernel("eager", &[(1, 0.0)]),
                kernel("adaptive", &[(2, 0.0)]),
            ],
            shape(),
        );
        let new = BenchRecord::of(&[kernel("adaptive", &[(3, 0.0)])], shape());
        let merged = old.clone().merged(new.clone());
        assert_eq!(merged.kernels.len(), 2, "eager is kept");
        assert_eq!(merged.kernels["adaptive"][0].instructions, 3.0);
        let mut other = shape();
        other.cpus = Some(4);
        let apart = BenchRecord::of(&[kernel("adaptive", &[(3, 0.0)])], other.clone());
        assert_eq!(
            old.clone().merged(apart).kernels.len(),
            1,
            "made otherwise: replaced"
        );
        assert_eq!(old.mismatch(&shape()), None);
        assert!(old.mismatch(&other).unwrap().contains("--cpus Some(1)"));
        other = shape();
        other.quick = false;
        assert!(old.mismatch(&other).unwrap().starts_with("with --quick"));
    }

    #[test]
    fn rows_of_a_millisecond_or_more_have_the_narrower_room() {
        let row = |ns: f64, spread: f64| {
            let c = Combined {
                median_ns: ns,
                spread,
                boots: 2,
                faults: 0.0,
                user_faults: 0.0,
                rss_kb: None,
                boot_cycles: vec![],
            };
            let r = RecordRow {
                scenario: "stride_2".into(),
                pages: 2048,
                threads: 4,
                instructions: ns,
                faults: 0.0,
                user_faults: 0.0,
                spread: 0.0,
            };
            tolerance(&c, &r)
        };
        assert_eq!(row(2e6, 0.0), LONG_ROOM.0);
        assert_eq!(row(3e4, 0.0), SHORT_ROOM.0);
        assert_eq!(row(3e4, 0.03), 0.03, "a wider measured spread");
        assert_eq!(row(3e4, 0.9), SHORT_ROOM.1, "but capped");
        assert_eq!(row(2e6, 0.9), LONG_ROOM.1);
    }

    #[test]
    fn boots_more_than_one_percent_apart_are_unsteady() {
        let steady = [kernel("eager", &[(1_800_000, 0.0), (1_805_000, 0.0)])];
        assert_eq!(unsteady_report(&steady).1, 0);
        let apart = [kernel("eager", &[(1_800_000, 0.0), (1_830_000, 0.0)])];
        let (text, failing) = unsteady_report(&apart);
        assert_eq!(failing, 1, "{text}");
        assert!(text.contains("UNSTEADY eager"), "{text}");
        let (text, failing) = unsteady_report(&[kernel("eager", &[(1, 0.0)])]);
        assert_eq!(failing, 0);
        assert!(text.contains("nothing to compare"), "{text}");
    }
}
