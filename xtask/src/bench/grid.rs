//! The grid's rows as the guest measured them
//! (`vm-images/bench/src/grid.rs`, from the table both sides read,
//! guest-common's `bench/grid.rs`): every pattern at every map size, by
//! 1, 2 and 4 threads, combined over boots; and the table of them.

use std::fmt::Write as _;

use guest_common::bench::grid::{PAGES, PATTERNS, THREADS};

use super::guest_records::{us, KernelBench, Record};
use super::interval::median;
use super::model::CostModel;

/// What a guest time is: instructions counted by QEMU (icount, 1 ns
/// each), or the host's wall clock seen through the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Clock {
    Icount,
    Wall,
}

impl Clock {
    pub fn name(self) -> &'static str {
        match self {
            Clock::Icount => "icount",
            Clock::Wall => "wall",
        }
    }
}

/// One row: a pattern at a size, by some threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct RowKey {
    pub scenario: &'static str,
    pub pages: u64,
    pub threads: u64,
}

impl RowKey {
    /// Every row of the grid, in the table's order.
    pub fn all() -> Vec<RowKey> {
        let mut rows = vec![];
        for &threads in THREADS {
            for &pages in PAGES {
                for p in PATTERNS {
                    rows.push(RowKey {
                        scenario: p.scenario.name(),
                        pages,
                        threads,
                    });
                }
            }
        }
        rows
    }

    /// The key of a scenario named at run time, if it is the grid's.
    pub fn find(scenario: &str, pages: u64, threads: u64) -> Option<RowKey> {
        RowKey::all()
            .into_iter()
            .find(|k| k.scenario == scenario && k.pages == pages && k.threads == threads)
    }

    pub fn label(&self) -> &'static str {
        PATTERNS
            .iter()
            .find(|p| p.scenario.name() == self.scenario)
            .map_or(self.scenario, |p| p.label)
    }

    /// "write all, 16 pages, 2 threads".
    pub fn describe(&self) -> String {
        format!(
            "{}, {}, {} thread{}",
            self.label(),
            pages_label(self.pages),
            self.threads,
            if self.threads == 1 { "" } else { "s" }
        )
    }
}

/// "1 page", "16 pages", "8 MiB" for the seed's size and above.
pub fn pages_label(pages: u64) -> String {
    match pages {
        1 => "1 page".into(),
        p if p >= 2048 => format!("{} MiB", p * 4 / 1024),
        p => format!("{p} pages"),
    }
}

/// One row of one kernel, over its boots.
#[derive(Debug, Clone, PartialEq)]
pub struct Combined {
    /// The median over boots of each boot's median cycle (ns; under
    /// icount, guest instructions).
    pub median_ns: f64,
    /// (max - min) / median of the boots' medians: 0 with one boot.
    pub spread: f64,
    pub boots: usize,
    /// Minor faults per cycle (median over boots).
    pub faults: f64,
    /// Of those, the user's: each an exception (MAP_POPULATE's, taken
    /// inside mmap() through get_user_pages, are not).
    pub user_faults: f64,
    /// Rss after the pattern (one thread only).
    pub rss_kb: Option<f64>,
    /// Each boot's timed cycles, for the wall clock's intervals.
    pub boot_cycles: Vec<Vec<f64>>,
}

fn number(r: &Record, key: &str) -> Option<f64> {
    r.extra.get(key).and_then(|v| v.as_f64())
}

fn is_row(r: &Record, key: &RowKey) -> bool {
    r.kind == "grid"
        && r.scenario.as_deref() == Some(key.scenario)
        && number(r, "pages") == Some(key.pages as f64)
        && number(r, "threads") == Some(key.threads as f64)
}

/// The row `key` of kernel `k`, over the boots that measured it.
pub fn combined(k: &KernelBench, key: &RowKey) -> Option<Combined> {
    let found: Vec<&Record> = k
        .boots
        .iter()
        .filter_map(|recs| recs.iter().find(|r| is_row(r, key)))
        .collect();
    let mut medians: Vec<f64> = found
        .iter()
        .filter_map(|r| r.median_ns.map(|n| n as f64))
        .collect();
    if medians.is_empty() {
        return None;
    }
    let median_ns = median(&mut medians);
    let (lo, hi) = medians
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &m| (lo.min(m), hi.max(m)));
    let mut faults: Vec<f64> = found
        .iter()
        .filter_map(|r| number(r, "faults_per_cycle"))
        .collect();
    let mut user: Vec<f64> = found
        .iter()
        .filter_map(|r| Some(number(r, "faults_per_cycle")? - number(r, "mmap_faults")?))
        .collect();
    let mut rss: Vec<f64> = found.iter().filter_map(|r| number(r, "rss_kb")).collect();
    Some(Combined {
        median_ns,
        spread: (hi - lo) / median_ns.max(1.0),
        boots: medians.len(),
        faults: if faults.is_empty() {
            0.0
        } else {
            median(&mut faults)
        },
        user_faults: if user.is_empty() {
            0.0
        } else {
            median(&mut user)
        },
        rss_kb: (!rss.is_empty()).then(|| median(&mut rss)),
        boot_cycles: found.iter().map(|r| cycles_of(r)).collect(),
    })
}

fn cycles_of(r: &Record) -> Vec<f64> {
    r.extra
        .get("cycles_ns")
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
        .unwrap_or_default()
}

/// One kernel's cell: guest instructions in thousands (icount) or µs
/// (wall), user faults per cycle, and under icount the model's µs.
fn cell(c: &Combined, clock: Clock, model: Option<&CostModel>) -> String {
    let faults = format!("{:.0}", c.user_faults);
    match (clock, model) {
        (Clock::Icount, Some(m)) => format!(
            "{:.1}k {faults} {}",
            c.median_ns / 1000.0,
            us(m.estimate_us(c.median_ns, c.user_faults) * 1000.0)
        ),
        (Clock::Icount, None) => format!("{:.1}k {faults}", c.median_ns / 1000.0),
        (Clock::Wall, _) => format!("{} {faults}", us(c.median_ns)),
    }
}

/// The grid table: one block per thread count and size, a line per
/// pattern, a cell per kernel, and the largest spread across boots.
pub fn grid_table(kernels: &[KernelBench], clock: Clock, model: Option<&CostModel>) -> String {
    if !kernels
        .iter()
        .any(|k| RowKey::all().iter().any(|r| combined(k, r).is_some()))
    {
        return String::new();
    }
    let boots = kernels.first().map_or(0, |k| k.boots.len());
    let what = match (clock, model) {
        (Clock::Icount, Some(_)) => "guest instructions (thousands), user page faults (MAP_POPULATE's inside mmap() not counted), and the model's time on the seed's machine",
        (Clock::Icount, None) => "guest instructions (thousands) and user page faults (MAP_POPULATE's inside mmap() not counted)",
        (Clock::Wall, _) => "time and user page faults (MAP_POPULATE's inside mmap() not counted)",
    };
    let mut out = format!(
        "\nEvery pattern at every size ({} clock; per cycle, median of {boots} boot(s): {what}; spread: the largest across boots of any kernel):\n",
        clock.name()
    );
    let width = if model.is_some() { 24 } else { 16 };
    for &threads in THREADS {
        for &pages in PAGES {
            let mut head = format!(
                " {} thread{}, {}:",
                threads,
                if threads == 1 { "" } else { "s (one mapping)" },
                pages_label(pages)
            );
            head = format!("{head:<40}");
            for k in kernels {
                write!(head, "{:>width$}", k.kernel).unwrap();
            }
            writeln!(out, "{head}   spread").unwrap();
            for p in PATTERNS {
                let key = RowKey {
                    scenario: p.scenario.name(),
                    pages,
                    threads,
                };
                let rows: Vec<Option<Combined>> =
                    kernels.iter().map(|k| combined(k, &key)).collect();
                let mut line = format!("  {:<38}", p.label);
                for r in &rows {
                    let text = r.as_ref().map_or("-".into(), |c| cell(c, clock, model));
                    write!(line, "{text:>width$}").unwrap();
                }
                let spread = rows.iter().flatten().map(|c| c.spread).fold(0.0, f64::max);
                writeln!(line, "   {:>5.1}%", spread * 100.0).unwrap();
                out.push_str(&line);
            }
        }
    }
    out
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A grid record as the guest writes it.
    pub fn grid_record(key: &RowKey, cycles: &[u64], faults: f64, rss_kb: Option<u64>) -> Record {
        let mut sorted = cycles.to_vec();
        sorted.sort_unstable();
        let mut extra = BTreeMap::new();
        extra.insert("pages".into(), serde_json::json!(key.pages));
        extra.insert("threads".into(), serde_json::json!(key.threads));
        extra.insert("faults_per_cycle".into(), serde_json::json!(faults));
        extra.insert("mmap_faults".into(), serde_json::json!(0));
        extra.insert("rss_kb".into(), serde_json::json!(rss_kb));
        extra.insert("cycles_ns".into(), serde_json::json!(cycles));
        Record {
            kind: "grid".into(),
            scenario: Some(key.scenario.into()),
            size_bytes: key.pages * 4096,
            samples: Some(cycles.len() as u64),
            min_ns: sorted.first().copied(),
            median_ns: sorted.get(sorted.len() / 2).copied(),
            p90_ns: sorted.last().copied(),
            extra,
        }
    }

    #[test]
    fn rows_combine_over_boots_with_their_spread() {
        let key = RowKey::find("nopopulate_touchall", 2048, 1).unwrap();
        let other = RowKey::find("nopopulate_touchall", 2048, 2).unwrap();
        let k = KernelBench {
            kernel: "eager".into(),
            boots: vec![
                vec![
                    grid_record(&key, &[990, 1000, 1010], 2048.0, Some(8192)),
                    grid_record(&other, &[5, 5, 5], 1.0, None),
                ],
                vec![grid_record(&key, &[1010, 1020, 1030], 2048.0, Some(8192))],
            ],
        };
        let c = combined(&k, &key).unwrap();
        assert_eq!((c.median_ns, c.boots, c.faults), (1010.0, 2, 2048.0));
        assert_eq!(c.user_faults, 2048.0, "no faults inside mmap()");
        assert!((c.spread - 20.0 / 1010.0).abs() < 1e-12, "{c:?}");
        assert_eq!(c.rss_kb, Some(8192.0));
        assert_eq!(combined(&k, &other).unwrap().boots, 1);
        assert_eq!(combined(&k, &RowKey::find("stride_2", 1, 1).unwrap()), None);
        assert_eq!(RowKey::all().len(), 9 * PAGES.len() * 3);
        assert_eq!(
            key.describe(),
            "write all, 8 MiB, 1 thread",
            "the seed's size named as the seed does"
        );
        let t = grid_table(&[k], Clock::Icount, None);
        assert!(t.contains("1.0k 2048"), "{t}");
        assert!(t.contains("2.0%"), "{t}");
    }
}
