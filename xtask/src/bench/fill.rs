//! Where a cycle's time goes, from the bench's probed cycles (kind
//! "fill"): the calls of the kernel's fill function, the time inside
//! them, and the rest, per kernel. On base the fill is mmap()'s eager
//! insert, on the series' kernels each fault's; what a fault costs
//! beyond its fill is what the rest adds over base's, per fault.

use std::fmt::Write as _;

use super::guest_records::{us, KernelBench, Record};
use super::interval::median;

/// The probed patterns: (scenario, label).
const PATTERNS: [(&str, &str); 3] = [
    ("nopopulate_touchall", "write all pages"),
    ("populate_noaccess", "MAP_POPULATE"),
    ("nopopulate_readall", "read all pages"),
];

/// A row of the table: its name, and how a kernel's split shows in it.
type Row<'a> = (&'static str, &'a dyn Fn(&Split) -> String);

/// One kernel's split of a pattern's cycle, medians over boots.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Split {
    cycle_ns: f64,
    fill_ns: f64,
    fills: f64,
    faults: f64,
    pages: f64,
}

fn per_cycle(r: &Record, field: &str) -> Option<f64> {
    let cycles = r.extra.get("cycles")?.as_f64()?.max(1.0);
    Some(r.extra.get(field)?.as_f64()? / cycles)
}

fn split(k: &KernelBench, scenario: &str) -> Option<Split> {
    let recs: Vec<&Record> = k
        .boots
        .iter()
        .flatten()
        .filter(|r| r.kind == "fill" && r.scenario.as_deref() == Some(scenario))
        .collect();
    let med = |f: &dyn Fn(&Record) -> Option<f64>| {
        let mut v: Vec<f64> = recs.iter().filter_map(|r| f(r)).collect();
        (!v.is_empty()).then(|| median(&mut v))
    };
    Some(Split {
        cycle_ns: med(&|r| r.median_ns.map(|n| n as f64))?,
        fill_ns: med(&|r| per_cycle(r, "fill_us").map(|u| u * 1000.0))?,
        fills: med(&|r| per_cycle(r, "fills"))?,
        faults: med(&|r| per_cycle(r, "minor_faults"))?,
        pages: recs.first()?.size_bytes as f64 / 4096.0,
    })
}

/// The table; empty when no kernel has probed cycles (older runs).
pub fn fill_table(kernels: &[KernelBench]) -> String {
    if !kernels.iter().any(|k| split(k, PATTERNS[0].0).is_some()) {
        return String::new();
    }
    let mut out = String::from(
        "\nWhere a cycle's time goes (kprobes on the fill function: remap_vmalloc_range on eager, \
         array_map_mmap_fault on the series'; the probes slow every fill, so these cycles are \
         not the table's; median over boots):\n",
    );
    let reference = kernels.first();
    for (scenario, label) in PATTERNS {
        writeln!(out, " {label}:").unwrap();
        let mut head = format!("  {:<34}", "");
        for k in kernels {
            write!(head, "{:>11}", k.kernel).unwrap();
        }
        writeln!(out, "{}", head.trim_end()).unwrap();
        let splits: Vec<Option<Split>> = kernels.iter().map(|k| split(k, scenario)).collect();
        let base = reference.and_then(|k| split(k, scenario));
        let rows: [Row; 6] = [
            ("cycle (probed)", &|s| us(s.cycle_ns)),
            ("fills, faults", &|s| {
                format!("{:.0}, {:.0}", s.fills, s.faults)
            }),
            ("in the fills", &|s| us(s.fill_ns)),
            ("outside them", &|s| us(s.cycle_ns - s.fill_ns)),
            ("in the fills, per page", &|s| us(s.fill_ns / s.pages)),
            ("outside, over eager's, per fault", &|s| {
                beyond_base_per_fault(s, base.as_ref())
            }),
        ];
        for (name, cell) in rows {
            let mut line = format!("  {name:<34}");
            for s in &splits {
                write!(line, "{:>11}", s.as_ref().map_or("-".into(), cell)).unwrap();
            }
            writeln!(out, "{line}").unwrap();
        }
    }
    out
}

/// What a cycle spends outside its fills beyond base's, per fault taken.
fn beyond_base_per_fault(s: &Split, base: Option<&Split>) -> String {
    match base {
        Some(b) if s.faults >= 1.0 => {
            let extra = (s.cycle_ns - s.fill_ns) - (b.cycle_ns - b.fill_ns);
            us(extra / s.faults)
        }
        _ => "-".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::guest_records::TABLE_SIZE;
    use std::collections::BTreeMap;

    fn fill(scenario: &str, median: u64, fields: &[(&str, u64)]) -> Record {
        Record {
            kind: "fill".into(),
            scenario: Some(scenario.into()),
            size_bytes: TABLE_SIZE,
            samples: None,
            min_ns: None,
            median_ns: Some(median),
            p90_ns: None,
            extra: fields
                .iter()
                .map(|(k, v)| (k.to_string(), serde_json::json!(v)))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    fn kernel(name: &str, boots: &[(u64, u64, u64, u64)]) -> KernelBench {
        KernelBench {
            kernel: name.into(),
            boots: boots
                .iter()
                .map(|&(median, fill_us, fills, faults)| {
                    vec![fill(
                        "nopopulate_touchall",
                        median,
                        &[
                            ("cycles", 10),
                            ("fill_us", fill_us),
                            ("fills", fills),
                            ("minor_faults", faults),
                        ],
                    )]
                })
                .collect(),
        }
    }

    #[test]
    fn splits_a_cycle_into_fills_and_the_rest_per_fault() {
        // base: 1 fill of 1000us in a 1500us cycle; adaptive: 38 fills a
        // cycle over two boots, each figure the median of the two.
        let run = [
            kernel("eager", &[(1_500_000, 10_000, 10, 0)]),
            kernel(
                "adaptive",
                &[(1_880_000, 11_000, 380, 380), (9_000_000, 90_000, 380, 380)],
            ),
        ];
        let t = fill_table(&run);
        let row = |name: &str| {
            t.lines()
                .find(|l| l.trim_start().starts_with(name))
                .unwrap_or_else(|| panic!("no {name} row in\n{t}"))
                .to_string()
        };
        assert!(row("fills, faults").ends_with("1, 0     38, 38"), "{t}");
        assert!(row("in the fills ").contains("1000us"), "{t}");
        // Two boots: the median of 1880us and 9000us cycles.
        assert!(row("cycle (probed)").ends_with("5440us"), "{t}");
        let per_fault = row("outside, over eager's");
        assert!(
            per_fault.ends_with(&us((5_440_000.0 - 5_050_000.0 - 500_000.0) / 38.0)),
            "{t}"
        );
    }

    #[test]
    fn older_runs_have_no_table() {
        let run = [KernelBench {
            kernel: "eager".into(),
            boots: vec![vec![]],
        }];
        assert_eq!(fill_table(&run), "");
    }
}
