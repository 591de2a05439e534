//! What the fault windows cost and buy, from one bench run: the access
//! patterns beyond the seed's table (time and Rss per kernel), and the
//! series' targets for each window variant, checked against the same run.

use std::fmt::Write as _;

use super::bench::{combined, fastest, ratio, us, KernelBench, TABLE_SIZE};

/// The bench's access patterns: (scenario, label).
const PATTERNS: [(&str, &str); 5] = [
    ("sparse_1in64", "write 1 page in 64"),
    ("sparse_random_1pct", "write 1% at random"),
    ("stride_2", "write every 2nd page"),
    ("reverse_sweep", "write all, last first"),
    ("nopopulate_readall", "read all pages"),
];

/// The kernels whose fault maps more than one page: the targets are
/// theirs.
const WINDOW_KERNELS: [&str; 2] = ["prefault", "adaptive"];

/// The table's targets: the row, its label, the kernel it is held
/// against, and the largest ratio allowed.
const TARGETS: [(&str, &str, &str, f64); 5] = [
    ("nopopulate_touchall", "access all pages", "base", 1.1),
    ("populate_noaccess", "MAP_POPULATE", "base", 1.1),
    ("populate_touchall", "MAP_POPULATE, access all", "base", 1.1),
    ("nopopulate_noaccess", "no access", "patched", 1.2),
    // Not in the seed's table: a sweep of read faults, against base.
    ("nopopulate_readall", "read all pages", "base", 1.1),
];

/// The sparse patterns' targets against patched: Rss and time.
const SPARSE_TARGETS: [(&str, &str); 2] = [
    ("sparse_1in64", "write 1 page in 64"),
    ("sparse_random_1pct", "write 1% at random"),
];
const SPARSE_RSS_LIMIT: f64 = 2.0;
const SPARSE_TIME_LIMIT: f64 = 1.5;

/// Rss after a pattern's accesses, with how many pages it accessed.
fn rss_kb(k: &KernelBench, scenario: &str) -> Option<(u64, u64)> {
    let r = k
        .boots
        .iter()
        .flatten()
        .find(|r| r.kind == "sparse_rss" && r.scenario.as_deref() == Some(scenario))?;
    let field = |n: &str| r.extra.get(n).and_then(|v| v.as_u64());
    Some((field("rss_kb")?, field("touched_pages")?))
}

/// One line per pattern: each kernel's cycle time and Rss.
pub fn sparse_table(kernels: &[KernelBench]) -> String {
    let mut out = String::from(
        "\nAccess patterns on the 8MiB map (mmap() + accesses + munmap(); Rss after them):\n",
    );
    let mut head = format!("  {:<24}", "");
    for k in kernels {
        write!(head, "{:>20}", k.kernel).unwrap();
    }
    writeln!(out, "{}", head.trim_end()).unwrap();
    for (scenario, label) in PATTERNS {
        let mut line = format!("  {label:<24}");
        for k in kernels {
            let time = combined(k, "sparse", scenario, TABLE_SIZE).map(|(m, _)| us(m));
            let rss = rss_kb(k, scenario).map(|(kb, _)| format!("{kb}kB"));
            let cell = format!(
                "{} {}",
                time.unwrap_or_else(|| "-".into()),
                rss.unwrap_or_else(|| "-".into())
            );
            write!(line, "{cell:>20}").unwrap();
        }
        writeln!(out, "{line}").unwrap();
    }
    out
}

/// "met" when `a / b` is at most `limit`.
fn verdict(a: Option<f64>, b: Option<f64>, limit: f64) -> &'static str {
    match (a, b) {
        (Some(a), Some(b)) if a / b.max(1.0) <= limit => "met",
        (Some(_), Some(_)) => "MISSED",
        _ => "not measured",
    }
}

/// One target's line: what is compared, the ratio, the limit, the verdict.
fn target_line(
    out: &mut String,
    label: &str,
    what: &str,
    (a, b): (Option<f64>, Option<f64>),
    limit: f64,
) {
    writeln!(
        out,
        "  {label:<26} {what:<17} {:>6}  (at most {limit:.1}x)  {}",
        ratio(a, b),
        verdict(a, b, limit)
    )
    .unwrap();
}

/// The targets of every window kernel in the run, each met or missed,
/// when the run also has base and patched; empty otherwise.
pub fn window_targets(kernels: &[KernelBench]) -> String {
    let find = |name: &str| kernels.iter().find(|k| k.kernel == name);
    let (Some(_), Some(patched)) = (find("base"), find("patched")) else {
        return String::new();
    };
    let mut out = String::new();
    for k in WINDOW_KERNELS.iter().filter_map(|n| find(n)) {
        writeln!(
            out,
            "\nTargets of {} (8MiB, this run; each boot's fastest cycle, median over boots):",
            k.kernel
        )
        .unwrap();
        for (scenario, label, against, limit) in TARGETS {
            let kind = if scenario == "nopopulate_readall" {
                "sparse"
            } else {
                "scenario"
            };
            let a = fastest(k, kind, scenario);
            let b = find(against).and_then(|o| fastest(o, kind, scenario));
            target_line(
                &mut out,
                label,
                &format!("{}/{against}", k.kernel),
                (a, b),
                limit,
            );
        }
        for (scenario, label) in SPARSE_TARGETS {
            let kb = |x: &KernelBench| rss_kb(x, scenario).map(|(kb, _)| kb as f64);
            let what = format!("Rss {}/patched", k.kernel);
            target_line(
                &mut out,
                label,
                &what,
                (kb(k), kb(patched)),
                SPARSE_RSS_LIMIT,
            );
            let time = |x: &KernelBench| fastest(x, "sparse", scenario);
            let what = format!("{}/patched", k.kernel);
            target_line(
                &mut out,
                label,
                &what,
                (time(k), time(patched)),
                SPARSE_TIME_LIMIT,
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::bench::Record;
    use std::collections::BTreeMap;

    fn rec(kind: &str, scenario: &str, median: u64, extra: &[(&str, u64)]) -> Record {
        Record {
            kind: kind.into(),
            scenario: Some(scenario.into()),
            size_bytes: TABLE_SIZE,
            samples: Some(10),
            min_ns: Some(median),
            median_ns: Some(median),
            p90_ns: Some(median),
            extra: extra
                .iter()
                .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    /// base, patched and prefault with `touchall` µs for the touch-all row
    /// on prefault and 100 µs everywhere else.
    fn run(prefault_touchall: u64, prefault_rss: u64) -> Vec<KernelBench> {
        ["base", "patched", "prefault"]
            .iter()
            .map(|&name| {
                let mut boot: Vec<Record> = TARGETS
                    .iter()
                    .map(|(s, ..)| {
                        let us = if name == "prefault" && *s == "nopopulate_touchall" {
                            prefault_touchall
                        } else {
                            100
                        };
                        rec("scenario", s, us * 1000, &[])
                    })
                    .collect();
                boot.push(rec("sparse", "sparse_1in64", 50_000, &[]));
                let rss = if name == "prefault" {
                    prefault_rss
                } else {
                    128
                };
                boot.push(rec(
                    "sparse_rss",
                    "sparse_1in64",
                    0,
                    &[("rss_kb", rss), ("touched_pages", 32)],
                ));
                KernelBench {
                    kernel: name.into(),
                    boots: vec![boot],
                }
            })
            .collect()
    }

    #[test]
    fn targets_met_and_missed() {
        // Rss 2x patched's is the most allowed.
        let t = window_targets(&run(105, 256));
        let touch = t.lines().find(|l| l.contains("access all pages")).unwrap();
        assert!(touch.contains("1.05x") && touch.ends_with("met"), "{touch}");
        let rss = t
            .lines()
            .find(|l| l.contains("Rss prefault/patched"))
            .unwrap();
        assert!(rss.contains("2.00x") && rss.ends_with("met"), "{rss}");
        let t = window_targets(&run(120, 260));
        let touch = t.lines().find(|l| l.contains("access all pages")).unwrap();
        assert!(touch.ends_with("MISSED"), "{touch}");
        assert!(
            t.lines()
                .any(|l| l.contains("Rss prefault/patched") && l.ends_with("MISSED")),
            "{t}"
        );
        // Without base and patched in the run there is nothing to hold
        // the windows against.
        assert_eq!(window_targets(&run(100, 0)[2..]), "");
    }

    #[test]
    fn sparse_rows_have_time_and_rss() {
        let t = sparse_table(&run(100, 2048));
        let row = t.lines().find(|l| l.contains("1 page in 64")).unwrap();
        assert!(
            row.contains("50.0us 128kB") && row.contains("50.0us 2048kB"),
            "{row}"
        );
    }
}
