//! The 2- and 4-thread rows of one bench run: each kernel's time per row,
//! threads on their own mappings and on one shared mapping.

use std::fmt::Write as _;

use super::guest_records::{combined, us, KernelBench, TABLE_SIZE};

/// How far apart the boots of a 2- or 4-thread grid row may be, their
/// own bound: under icount on one vCPU, the threads under SCHED_FIFO,
/// no row of 675 (a record run's five kernels) was more than 1.3% apart
/// (`bench/run.rs`), and in the 7.3 record's three boots no thread row
/// more than 0.006%. One thread is held to 1% (`gate::STEADY_LIMIT`).
pub const STEADY_LIMIT: f64 = 0.015;

/// The guest's thread kinds (`vm-images/bench/src/threads.rs`): kind,
/// label.
const KINDS: [(&str, &str); 4] = [
    ("own2", "2 threads, own mappings"),
    ("shared2", "2 threads, one mapping"),
    ("own4", "4 threads, own mappings"),
    ("shared4", "4 threads, one mapping"),
];

/// The rows each kind times: scenario, label.
const ROWS: [(&str, &str); 6] = [
    ("nopopulate_noaccess", "no access"),
    ("nopopulate_touchall", "write all pages"),
    ("populate_noaccess", "MAP_POPULATE"),
    ("populate_touchall", "MAP_POPULATE, write all"),
    ("sparse_1in64", "write 1 page in 64"),
    ("sparse_random_1pct", "write 1% at random"),
];

/// The table, or nothing when the run has no threaded rows.
pub fn threads_table(kernels: &[KernelBench]) -> String {
    let measured = |kind: &str| {
        kernels
            .iter()
            .any(|k| combined(k, kind, ROWS[0].0, TABLE_SIZE).is_some())
    };
    if !KINDS.iter().any(|(kind, _)| measured(kind)) {
        return String::new();
    }
    let mut out = String::from(
        "\nThreads of one process at once on the 8MiB map (the whole cycle, median over boots of each boot's median):\n",
    );
    let mut head = format!("  {:<28}", "");
    for k in kernels {
        write!(head, "{:>11}", k.kernel).unwrap();
    }
    for (kind, label) in KINDS {
        writeln!(out, " {label}:\n{}", head.trim_end()).unwrap();
        for (scenario, row) in ROWS {
            let mut line = format!("  {row:<28}");
            for k in kernels {
                let cell =
                    combined(k, kind, scenario, TABLE_SIZE).map_or("-".into(), |(m, _)| us(m));
                write!(line, "{cell:>11}").unwrap();
            }
            writeln!(out, "{line}").unwrap();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::guest_records::Record;

    #[test]
    fn a_row_per_kind_and_pattern_with_each_kernels_time() {
        let rec = |kind: &str, scenario: &str, ns: u64| Record {
            kind: kind.into(),
            scenario: Some(scenario.into()),
            size_bytes: TABLE_SIZE,
            samples: Some(1),
            min_ns: Some(ns),
            median_ns: Some(ns),
            p90_ns: Some(ns),
            extra: Default::default(),
        };
        let k = KernelBench {
            kernel: "adaptive".into(),
            boots: vec![vec![
                rec("own2", "nopopulate_noaccess", 20_000),
                rec("own2", "nopopulate_touchall", 2_500_000),
            ]],
        };
        let t = threads_table(std::slice::from_ref(&k));
        assert!(t.contains(" 2 threads, own mappings:"), "{t}");
        let row = t.lines().find(|l| l.contains("write all pages")).unwrap();
        assert!(row.ends_with("2500us"), "{row}");
        assert!(t
            .lines()
            .find(|l| l.contains("MAP_POPULATE,"))
            .unwrap()
            .ends_with('-'));
        let none = KernelBench {
            boots: vec![vec![rec("scenario", "nopopulate_noaccess", 1)]],
            ..k
        };
        assert_eq!(threads_table(&[none]), "");
    }
}
