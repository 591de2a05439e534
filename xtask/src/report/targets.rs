//! The series' targets for each window kernel, from one bench run: every
//! timed row at 1, 2 and 4 threads as a ratio with its 95% bootstrap
//! interval (`interval`), "met" only when the whole interval is inside the
//! target, "MISSED" when it is wholly outside, "not established" between;
//! and the sparse patterns' Rss, which is exact.

use std::fmt::Write as _;

use super::bench::{cycles, KernelBench};
use super::interval::{ratio_interval, show, verdict};
use super::sparse::rss_kb;

/// The kernels whose fault maps more than one page: the targets are
/// theirs.
const WINDOW_KERNELS: [&str; 2] = ["prefault", "adaptive"];

/// The timed targets: row, label, the kernel it is held against, and the
/// largest ratio allowed.
const TIMED: [(&str, &str, &str, f64); 6] = [
    ("nopopulate_touchall", "write all pages", "base", 1.1),
    ("populate_noaccess", "MAP_POPULATE", "base", 1.1),
    ("populate_touchall", "MAP_POPULATE, write all", "base", 1.1),
    ("nopopulate_noaccess", "no access", "patched", 1.2),
    ("sparse_1in64", "write 1 page in 64", "patched", 1.5),
    ("sparse_random_1pct", "write 1% at random", "patched", 1.5),
];

/// Where each thread count's rows are: (record kind of the seed's rows,
/// of the sparse rows, label). One thread's rows are the table's.
const THREADS: [(&str, &str, &str); 5] = [
    ("scenario", "sparse", "1 thread"),
    ("own2", "own2", "2 threads, own mappings"),
    ("shared2", "shared2", "2 threads, one mapping"),
    ("own4", "own4", "4 threads, own mappings"),
    ("shared4", "shared4", "4 threads, one mapping"),
];

/// Reading every page, one thread, against base (read faults take
/// do_read_fault(), writes do_shared_fault()).
const READ_ALL: (&str, &str, f64) = ("nopopulate_readall", "read all pages", 1.1);

const SPARSE_RSS: [(&str, &str); 2] = [
    ("sparse_1in64", "write 1 page in 64"),
    ("sparse_random_1pct", "write 1% at random"),
];
const SPARSE_RSS_LIMIT: f64 = 2.0;

/// One timed target's line, or a line saying it was not measured.
fn timed_line(
    out: &mut String,
    label: &str,
    what: &str,
    a: &KernelBench,
    b: &KernelBench,
    (kind, scenario, limit): (&str, &str, f64),
) {
    let (shown, word) = match ratio_interval(&cycles(a, kind, scenario), &cycles(b, kind, scenario))
    {
        Some(i) => (show(&i), verdict(&i, limit)),
        None => ("-".to_string(), "not measured"),
    };
    writeln!(
        out,
        "  {label:<26} {what:<18} {shown:>20}  (at most {limit:.1}x)  {word}"
    )
    .unwrap();
}

/// The targets of every window kernel in the run, when the run also has
/// base and patched; empty otherwise.
pub fn window_targets(kernels: &[KernelBench]) -> String {
    let find = |name: &str| kernels.iter().find(|k| k.kernel == name);
    let (Some(base), Some(patched)) = (find("base"), find("patched")) else {
        return String::new();
    };
    let against = |name: &str| if name == "base" { base } else { patched };
    let mut out = String::new();
    for k in WINDOW_KERNELS.iter().filter_map(|n| find(n)) {
        writeln!(
            out,
            "\nTargets of {} (8MiB, this run; ratio of the median over boots of each boot's median cycle, [95% bootstrap interval over boots and cycles]):",
            k.kernel
        )
        .unwrap();
        for (table_kind, sparse_kind, threads) in THREADS {
            writeln!(out, " {threads}:").unwrap();
            for (scenario, label, other, limit) in TIMED {
                let kind = if scenario.starts_with("sparse") {
                    sparse_kind
                } else {
                    table_kind
                };
                let what = format!("{}/{other}", k.kernel);
                timed_line(
                    &mut out,
                    label,
                    &what,
                    k,
                    against(other),
                    (kind, scenario, limit),
                );
            }
        }
        writeln!(out, " 1 thread, reads and Rss:").unwrap();
        let (scenario, label, limit) = READ_ALL;
        timed_line(
            &mut out,
            label,
            &format!("{}/base", k.kernel),
            k,
            base,
            ("sparse", scenario, limit),
        );
        for (scenario, label) in SPARSE_RSS {
            let kb = |x: &KernelBench| rss_kb(x, scenario).map(|(kb, _)| kb as f64);
            let (shown, word) = match (kb(k), kb(patched)) {
                (Some(a), Some(b)) => {
                    let r = a / b.max(1.0);
                    (
                        format!("{r:.2}x"),
                        if r <= SPARSE_RSS_LIMIT {
                            "met"
                        } else {
                            "MISSED"
                        },
                    )
                }
                _ => ("-".to_string(), "not measured"),
            };
            let what = format!("Rss {}/patched", k.kernel);
            writeln!(
                out,
                "  {label:<26} {what:<18} {shown:>20}  (at most {SPARSE_RSS_LIMIT:.1}x)  {word}"
            )
            .unwrap();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::bench::{Record, TABLE_SIZE};
    use std::collections::BTreeMap;

    fn rec(kind: &str, scenario: &str, cycles: &[u64], extra: &[(&str, u64)]) -> Record {
        let mut extra: BTreeMap<String, serde_json::Value> = extra
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
            .collect();
        extra.insert("cycles_ns".into(), serde_json::json!(cycles));
        Record {
            kind: kind.into(),
            scenario: Some(scenario.into()),
            size_bytes: TABLE_SIZE,
            samples: Some(cycles.len() as u64),
            min_ns: cycles.iter().min().copied(),
            median_ns: cycles.get(cycles.len() / 2).copied(),
            p90_ns: cycles.iter().max().copied(),
            extra,
        }
    }

    /// base, patched and prefault, two boots each: every row 100 µs with
    /// a little noise, prefault's touch-all `touchall` µs, its Rss after
    /// one page in 64 `rss` kB against patched's 128.
    fn run(touchall: u64, rss: u64) -> Vec<KernelBench> {
        ["base", "patched", "prefault"]
            .iter()
            .map(|&name| {
                let boot = |jitter: u64| {
                    let mut recs: Vec<Record> = TIMED
                        .iter()
                        .map(|(s, ..)| {
                            let us = if name == "prefault" && *s == "nopopulate_touchall" {
                                touchall
                            } else {
                                100
                            };
                            let kind = if s.starts_with("sparse") {
                                "sparse"
                            } else {
                                "scenario"
                            };
                            let c: Vec<u64> =
                                (0..9).map(|i| us * 1000 + i * 100 + jitter).collect();
                            rec(kind, s, &c, &[])
                        })
                        .collect();
                    let kb = if name == "prefault" { rss } else { 128 };
                    recs.push(rec(
                        "sparse_rss",
                        "sparse_1in64",
                        &[],
                        &[("rss_kb", kb), ("touched_pages", 32)],
                    ));
                    recs
                };
                KernelBench {
                    kernel: name.into(),
                    boots: vec![boot(0), boot(300)],
                }
            })
            .collect()
    }

    fn line<'a>(t: &'a str, starts: &str) -> &'a str {
        t.lines()
            .find(|l| l.trim_start().starts_with(starts))
            .unwrap_or_else(|| panic!("no {starts} in {t}"))
    }

    fn rss_line(t: &str) -> &str {
        t.lines()
            .find(|l| l.contains("write 1 page in 64") && l.contains("Rss"))
            .unwrap_or_else(|| panic!("no Rss line in {t}"))
    }

    #[test]
    fn a_target_is_met_only_with_its_whole_interval_inside() {
        let t = window_targets(&run(105, 256));
        let touch = line(&t, "write all pages");
        assert!(
            touch.contains("1.05x [") && touch.ends_with("met"),
            "{touch}"
        );
        assert!(rss_line(&t).ends_with("met"), "{t}");
        let t = window_targets(&run(130, 260));
        assert!(line(&t, "write all pages").ends_with("MISSED"), "{t}");
        assert!(rss_line(&t).ends_with("MISSED"), "{t}");
        // Rows the run lacks (the threads') are said to be unmeasured.
        assert!(t.contains(" 2 threads, own mappings:"), "{t}");
        assert!(t.lines().any(|l| l.ends_with("not measured")), "{t}");
        assert_eq!(window_targets(&run(100, 0)[2..]), "");
    }
}
