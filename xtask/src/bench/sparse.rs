//! The access patterns beyond the seed's table, from one bench run: time
//! and Rss per kernel (`targets` holds them to the series' targets).

use std::fmt::Write as _;

use super::guest_records::{combined, us, KernelBench, TABLE_SIZE};

/// The bench's access patterns: (scenario, label).
const PATTERNS: [(&str, &str); 5] = [
    ("sparse_1in64", "write 1 page in 64"),
    ("sparse_random_1pct", "write 1% at random"),
    ("stride_2", "write every 2nd page"),
    ("reverse_sweep", "write all, last first"),
    ("nopopulate_readall", "read all pages"),
];

/// A field of the record of the untimed round of a pattern (its Rss, the
/// pages it accessed, its minor faults), from the first boot that has it.
fn round_field(k: &KernelBench, scenario: &str, field: &str) -> Option<u64> {
    let r = k
        .boots
        .iter()
        .flatten()
        .find(|r| r.kind == "sparse_rss" && r.scenario.as_deref() == Some(scenario))?;
    r.extra.get(field)?.as_u64()
}

/// Rss after a pattern's accesses, with how many pages it accessed.
pub fn rss_kb(k: &KernelBench, scenario: &str) -> Option<(u64, u64)> {
    Some((
        round_field(k, scenario, "rss_kb")?,
        round_field(k, scenario, "touched_pages")?,
    ))
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
    out.push_str(&fault_counts(kernels));
    out
}

/// Minor faults of one untimed round of each pattern, per kernel (runs
/// before the count was recorded show "-").
fn fault_counts(kernels: &[KernelBench]) -> String {
    let mut out = String::from(" minor faults of one round:\n");
    for (scenario, label) in PATTERNS {
        let mut line = format!("  {label:<24}");
        for k in kernels {
            let faults = round_field(k, scenario, "minor_faults");
            write!(line, "{:>20}", faults.map_or("-".into(), |f| f.to_string())).unwrap();
        }
        writeln!(out, "{line}").unwrap();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::guest_records::Record;
    use std::collections::BTreeMap;

    fn rec(kind: &str, median: u64, extra: &[(&str, u64)]) -> Record {
        Record {
            kind: kind.into(),
            scenario: Some("sparse_1in64".into()),
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

    #[test]
    fn sparse_rows_have_time_and_rss() {
        let run: Vec<KernelBench> = [("mainline", 128), ("prefault", 2048)]
            .iter()
            .map(|&(name, kb)| KernelBench {
                kernel: name.into(),
                boots: vec![vec![
                    rec("sparse", 50_000, &[]),
                    rec(
                        "sparse_rss",
                        0,
                        &[
                            ("rss_kb", kb),
                            ("touched_pages", 32),
                            ("minor_faults", kb / 4),
                        ],
                    ),
                ]],
            })
            .collect();
        let t = sparse_table(&run);
        let row = t.lines().find(|l| l.contains("1 page in 64")).unwrap();
        assert!(
            row.contains("50.0us 128kB") && row.contains("50.0us 2048kB"),
            "{row}"
        );
        assert_eq!(rss_kb(&run[1], "sparse_1in64"), Some((2048, 32)));
        let faults = t
            .lines()
            .skip_while(|l| !l.contains("minor faults"))
            .nth(1)
            .unwrap();
        assert!(faults.ends_with("32                 512"), "{faults}");
    }
}
