//! What the prefault window costs and buys, from one bench run: the
//! sparse patterns (time and Rss per kernel), and the window patch's
//! targets checked against the table's figures.

use std::fmt::Write as _;

use guest_common::protocol::PREFAULT_WINDOW_PAGES;

use super::bench::{combined, ratio, table_fastest, us, KernelBench, TABLE_SIZE};

/// The bench's sparse patterns: (scenario, label).
const PATTERNS: [(&str, &str); 2] = [
    ("sparse_1in64", "1 page in 64"),
    ("sparse_random_1pct", "1% of pages at random"),
];

/// The window patch's targets: the row, the kernel, the kernel it is
/// held against, and the largest ratio allowed.
const TARGETS: [(&str, &str, &str, &str, f64); 4] = [
    (
        "nopopulate_touchall",
        "access all pages",
        "prefault",
        "base",
        1.1,
    ),
    ("populate_noaccess", "MAP_POPULATE", "prefault", "base", 1.1),
    (
        "populate_touchall",
        "MAP_POPULATE, access all",
        "prefault",
        "base",
        1.1,
    ),
    (
        "nopopulate_noaccess",
        "no access",
        "prefault",
        "patched",
        1.2,
    ),
];

/// Rss after a pattern's writes, with how many pages it wrote.
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
        "\nSparse writes to the 8MiB map (mmap() + writes + munmap(); Rss after the writes):\n",
    );
    let mut head = format!("  {:<24}", "");
    for k in kernels {
        write!(head, "{:>22}", k.kernel).unwrap();
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
            write!(line, "{cell:>22}").unwrap();
        }
        writeln!(out, "{line}").unwrap();
    }
    out
}

/// The targets, each met or missed, when the run has the kernels they
/// name; empty otherwise.
pub fn window_targets(kernels: &[KernelBench]) -> String {
    let find = |name: &str| kernels.iter().find(|k| k.kernel == name);
    let (Some(_), Some(_), Some(prefault)) = (find("base"), find("patched"), find("prefault"))
    else {
        return String::new();
    };
    let mut out = String::from(
        "\nTargets of the prefault window (8MiB, this run; each boot's fastest cycle, median over boots):\n",
    );
    for (scenario, label, kernel, against, limit) in TARGETS {
        let a = find(kernel).and_then(|k| table_fastest(k, scenario));
        let b = find(against).and_then(|k| table_fastest(k, scenario));
        let verdict = match (a, b) {
            (Some(a), Some(b)) if a / b.max(1.0) <= limit => "met",
            (Some(_), Some(_)) => "MISSED",
            _ => "not measured",
        };
        writeln!(
            out,
            "  {label:<26} {:<17} {:>6}  (at most {limit:.1}x)  {verdict}",
            format!("{kernel}/{against}"),
            ratio(a, b)
        )
        .unwrap();
    }
    for (scenario, label) in PATTERNS {
        let Some((kb, touched)) = rss_kb(prefault, scenario) else {
            continue;
        };
        let bound = touched * PREFAULT_WINDOW_PAGES as u64 * 4;
        let verdict = if kb <= bound { "met" } else { "MISSED" };
        writeln!(
            out,
            "  {label:<26} prefault Rss {kb}kB, at most {PREFAULT_WINDOW_PAGES} pages x {touched} written = {bound}kB  {verdict}"
        )
        .unwrap();
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
        // 32 pages written: the window bounds Rss at 32 windows.
        let bound = 32 * PREFAULT_WINDOW_PAGES as u64 * 4;
        let t = window_targets(&run(105, bound));
        let touch = t.lines().find(|l| l.contains("access all pages")).unwrap();
        assert!(touch.contains("1.05x") && touch.ends_with("met"), "{touch}");
        let rss = t.lines().find(|l| l.contains("1 page in 64")).unwrap();
        assert!(
            rss.contains(&format!("= {bound}kB")) && rss.ends_with("met"),
            "{rss}"
        );
        let t = window_targets(&run(120, bound + 4));
        let touch = t.lines().find(|l| l.contains("access all pages")).unwrap();
        assert!(touch.ends_with("MISSED"), "{touch}");
        assert!(
            t.lines()
                .any(|l| l.contains("1 page in 64") && l.ends_with("MISSED")),
            "{t}"
        );
        assert_eq!(window_targets(&run(100, 0)[..2]), "");
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
