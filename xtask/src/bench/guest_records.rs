//! The benchmark's numbers: the guest's `BPFLAB-BENCH` records, combined
//! over boots into the seed-format table, the sweep summary, and the
//! series behind the sweep plot.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::plot;

/// One `BPFLAB-BENCH` record from the guest.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Record {
    pub kind: String,
    #[serde(default)]
    pub scenario: Option<String>,
    pub size_bytes: u64,
    #[serde(default)]
    pub samples: Option<u64>,
    #[serde(default)]
    pub min_ns: Option<u64>,
    #[serde(default)]
    pub median_ns: Option<u64>,
    #[serde(default)]
    pub p90_ns: Option<u64>,
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// The seed's four rows: (scenario, label, seed before µs, seed after µs).
pub const SEED_ROWS: [(&str, &str, f64, f64); 4] = [
    (
        "nopopulate_noaccess",
        "no MAP_POPULATE, no access",
        226.0,
        1.1,
    ),
    (
        "nopopulate_touchall",
        "no MAP_POPULATE, access all pages",
        236.0,
        1341.0,
    ),
    ("populate_noaccess", "MAP_POPULATE, no access", 312.0, 493.0),
    (
        "populate_touchall",
        "MAP_POPULATE, access all pages",
        318.0,
        519.0,
    ),
];

/// Everything measured for one kernel: one list of records per boot.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KernelBench {
    pub kernel: String,
    pub boots: Vec<Vec<Record>>,
}

/// Which median of a record: the whole mmap()+munmap() cycle, or the
/// mmap() call alone within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Cycle,
    MmapOnly,
}

impl Metric {
    fn median_ns(self, r: &Record) -> Option<u64> {
        match self {
            Metric::Cycle => r.median_ns,
            Metric::MmapOnly => r.extra.get("mmap_median_ns").and_then(|v| v.as_u64()),
        }
    }
}

/// Median over boots of each boot's median for (kind, scenario, size), and
/// the spread (max-min)/median of those boot medians.
pub fn combined(k: &KernelBench, kind: &str, scenario: &str, size: u64) -> Option<(f64, f64)> {
    combined_metric(k, kind, scenario, size, Metric::Cycle)
}

fn combined_metric(
    k: &KernelBench,
    kind: &str,
    scenario: &str,
    size: u64,
    metric: Metric,
) -> Option<(f64, f64)> {
    let mut meds: Vec<f64> = k
        .boots
        .iter()
        .filter_map(|recs| {
            recs.iter()
                .find(|r| {
                    r.kind == kind
                        && r.scenario.as_deref() == Some(scenario)
                        && r.size_bytes == size
                })
                .and_then(|r| metric.median_ns(r))
                .map(|ns| ns as f64)
        })
        .collect();
    if meds.is_empty() {
        return None;
    }
    meds.sort_by(f64::total_cmp);
    let mid = meds.len() / 2;
    let median = if meds.len() % 2 == 1 {
        meds[mid]
    } else {
        (meds[mid - 1] + meds[mid]) / 2.0
    };
    let spread = (meds[meds.len() - 1] - meds[0]) / median.max(1.0);
    Some((median, spread))
}

pub fn us(ns: f64) -> String {
    let us = ns / 1000.0;
    if us >= 100.0 {
        format!("{us:.0}us")
    } else {
        format!("{us:.1}us")
    }
}

/// The 8 MiB map of the seed's table.
pub const TABLE_SIZE: u64 = 8 << 20;

/// Every sweep size measured for `scenario` on `k`, ascending.
pub fn sweep_points(k: &KernelBench, scenario: &str, metric: Metric) -> Vec<(u64, f64)> {
    let mut sizes: Vec<u64> = k
        .boots
        .iter()
        .flatten()
        .filter(|r| r.kind == "sweep" && r.scenario.as_deref() == Some(scenario))
        .map(|r| r.size_bytes)
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
        .into_iter()
        .filter_map(|s| combined_metric(k, "sweep", scenario, s, metric).map(|(m, _)| (s, m)))
        .collect()
}

/// How the no-access cost grows from the smallest to the largest size.
pub fn sweep_summary(kernels: &[KernelBench]) -> String {
    let mut out = String::from(
        "\nSize sweep without access (growth = time at largest / time at smallest size):\n",
    );
    for (metric, what) in [
        (Metric::Cycle, "mmap()+munmap()"),
        (Metric::MmapOnly, "mmap() alone"),
    ] {
        for k in kernels {
            let pts = sweep_points(k, "nopopulate_noaccess", metric);
            let (Some(first), Some(last)) = (pts.first(), pts.last()) else {
                continue;
            };
            writeln!(
                out,
                "  {:<10} {what:<16} {} at {} -> {} at {}: growth {:.1}x over {:.0}x more pages",
                k.kernel,
                us(first.1),
                human_size(first.0),
                us(last.1),
                human_size(last.0),
                last.1 / first.1.max(1.0),
                last.0 as f64 / first.0 as f64
            )
            .unwrap();
        }
    }
    for k in kernels {
        let mem = k.boots.iter().flatten().find(|r| r.kind == "memory");
        if let Some(m) = mem {
            let field = |n: &str| m.extra.get(n).and_then(|v| v.as_u64());
            writeln!(
                out,
                "  {:<10} {} mapping: VmPTE +{} kB after mmap, Rss {} kB after mmap",
                k.kernel,
                human_size(m.size_bytes),
                field("vmpte_kb_after_mmap")
                    .zip(field("vmpte_kb_before"))
                    .map_or("?".into(), |(a, b)| a.saturating_sub(b).to_string()),
                field("rss_kb_after_mmap").map_or("?".into(), |v| v.to_string())
            )
            .unwrap();
        }
    }
    out
}

pub fn human_size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{}GiB", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}MiB", b >> 20),
        b => format!("{}KiB", b >> 10),
    }
}

pub fn parse_records(lines: &[String]) -> Result<Vec<Record>> {
    lines
        .iter()
        .map(|l| serde_json::from_str(l).with_context(|| format!("malformed bench record: {l}")))
        .collect()
}

/// What bench.json holds: the run's settings, the seed's figures and every
/// kernel's records.
pub fn summary_json(
    clock: &str,
    quick: bool,
    repeat: usize,
    results: &[KernelBench],
) -> serde_json::Value {
    serde_json::json!({
        "clock": clock,
        "quick": quick,
        "boots_per_kernel": repeat,
        "seed": SEED_ROWS.iter().map(|(s, l, b, a)| serde_json::json!({"scenario": s, "label": l, "before_us": b, "after_us": a})).collect::<Vec<_>>(),
        "kernels": results,
    })
}

/// The sweep plot's lines: per kernel, the no-access cycle, mmap() alone,
/// and the touch-all cycle, in µs; kernels without sweep data draw none.
pub fn sweep_curves(results: &[KernelBench]) -> Vec<plot::Curve> {
    results
        .iter()
        .flat_map(|k| {
            [
                ("nopopulate_noaccess", Metric::Cycle, "no access"),
                (
                    "nopopulate_noaccess",
                    Metric::MmapOnly,
                    "no access, mmap() alone",
                ),
                ("nopopulate_touchall", Metric::Cycle, "touch all"),
            ]
            .map(|(s, metric, label)| plot::Curve {
                label: format!("{} {label}", k.kernel),
                points: sweep_points(k, s, metric)
                    .into_iter()
                    .map(|(x, y)| (x as f64, y / 1000.0))
                    .collect(),
            })
        })
        .filter(|s| !s.points.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: &str, scenario: &str, size: u64, median: u64) -> Record {
        Record {
            kind: kind.into(),
            scenario: Some(scenario.into()),
            size_bytes: size,
            samples: Some(10),
            min_ns: Some(median / 2),
            median_ns: Some(median),
            p90_ns: Some(median * 2),
            extra: BTreeMap::new(),
        }
    }

    fn kernels() -> Vec<KernelBench> {
        let boot = |f: u64| {
            SEED_ROWS
                .iter()
                .map(|(s, _, b, _)| rec("scenario", s, 8 << 20, (*b as u64) * 1000 * f))
                .collect::<Vec<_>>()
        };
        vec![
            KernelBench {
                kernel: "eager".into(),
                boots: vec![boot(10), boot(12), boot(11)],
            },
            KernelBench {
                kernel: "mainline".into(),
                boots: vec![boot(1), boot(1), boot(1)],
            },
        ]
    }

    #[test]
    fn combines_boots_by_median_with_spread() {
        let k = &kernels()[0];
        let (m, spread) = combined(k, "scenario", "nopopulate_noaccess", 8 << 20).unwrap();
        assert_eq!(m, 226.0 * 1000.0 * 11.0);
        assert!((spread - 2.0 / 11.0).abs() < 1e-9);
        assert!(combined(k, "scenario", "nope", 8 << 20).is_none());
    }

    #[test]
    fn parses_guest_records() {
        let lines = vec![
            r#"{"kind":"scenario","scenario":"nopopulate_noaccess","size_bytes":8388608,"samples":30,"min_ns":1,"median_ns":2,"p90_ns":3}"#.to_string(),
            r#"{"kind":"sweep","scenario":"nopopulate_noaccess","size_bytes":4096,"samples":30,"min_ns":1,"median_ns":8000,"p90_ns":3,"mmap_min_ns":1,"mmap_median_ns":4000}"#.to_string(),
            r#"{"kind":"sweep","scenario":"nopopulate_noaccess","size_bytes":1073741824,"samples":10,"min_ns":1,"median_ns":18000,"p90_ns":3,"mmap_min_ns":1,"mmap_median_ns":4200}"#.to_string(),
            r#"{"kind":"memory","size_bytes":1073741824,"vmpte_kb_before":44,"vmpte_kb_after_mmap":2096,"vmpte_kb_after_touch":null,"rss_kb_after_mmap":0}"#.to_string(),
        ];
        let recs = parse_records(&lines).unwrap();
        assert_eq!(recs[0].median_ns, Some(2));
        assert_eq!(recs[3].extra["vmpte_kb_after_mmap"], 2096);
        assert!(parse_records(&["{not json".to_string()]).is_err());
        let k = KernelBench {
            kernel: "eager".into(),
            boots: vec![recs],
        };
        let s = sweep_summary(&[k]);
        assert!(s.contains("VmPTE +2052 kB"), "{s}");
        let cycle = s
            .lines()
            .find(|l| l.contains("mmap()+munmap()") && l.contains("eager"))
            .unwrap();
        assert!(
            cycle.contains("8.0us at 4KiB -> 18.0us at 1GiB: growth 2.2x"),
            "{cycle}"
        );
        let alone = s.lines().find(|l| l.contains("mmap() alone")).unwrap();
        assert!(
            alone.contains("4.0us at 4KiB -> 4.2us at 1GiB: growth 1.1x"),
            "{alone}"
        );
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(human_size(4096), "4KiB");
        assert_eq!(human_size(8 << 20), "8MiB");
        assert_eq!(human_size(1 << 30), "1GiB");
    }
}
