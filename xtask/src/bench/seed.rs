//! The seed's table ("Time for one mmap()+munmap() of an 8MiB mmap-able
//! array map"), from the grid's one-thread rows at 8 MiB: each kernel's
//! figures, its ratio to base, and the seed's own before and after.

use std::fmt::Write as _;

use super::grid::{combined, Clock, Combined, RowKey};
use super::guest_records::{us, KernelBench, SEED_ROWS};
use super::model::CostModel;

fn seed_row(scenario: &'static str) -> RowKey {
    RowKey::find(scenario, 2048, 1).expect("the seed's rows are grid rows")
}

/// A kernel's cell and the figure its ratio to base is taken on.
fn figures(c: &Combined, clock: Clock, model: Option<&CostModel>) -> (String, f64) {
    match (clock, model) {
        (Clock::Icount, Some(m)) => {
            let est = m.estimate_us(c.median_ns, c.user_faults);
            (
                format!(
                    "{:.1}k {:.0} {}",
                    c.median_ns / 1000.0,
                    c.user_faults,
                    us(est * 1000.0)
                ),
                est,
            )
        }
        (Clock::Icount, None) => (
            format!("{:.1}k {:.0}", c.median_ns / 1000.0, c.user_faults),
            c.median_ns,
        ),
        (Clock::Wall, _) => (
            format!("{} ±{:.0}%", us(c.median_ns), c.spread * 100.0),
            c.median_ns,
        ),
    }
}

pub fn seed_table(kernels: &[KernelBench], clock: Clock, model: Option<&CostModel>) -> String {
    let boots = kernels.first().map_or(0, |k| k.boots.len());
    let what = match (clock, model) {
        (Clock::Icount, Some(_)) => "guest instructions (thousands), user page faults, the model's time; ratios on the model",
        (Clock::Icount, None) => "guest instructions (thousands) and user page faults; ratios on instructions",
        (Clock::Wall, _) => "time, ± the spread across boots",
    };
    let mut out = format!(
        "Time for one mmap()+munmap() of an 8MiB mmap-able array map ({} clock, median of {boots} boot(s); {what}):\n\n",
        clock.name()
    );
    let first = kernels.first().map_or("", |k| k.kernel.as_str());
    let mut head = format!("  {:<36}", "");
    for k in kernels {
        write!(head, "{:>24}", k.kernel).unwrap();
    }
    for k in kernels.iter().skip(1) {
        write!(head, "{:>16}", format!("{}/{first}", k.kernel)).unwrap();
    }
    writeln!(head, "   {:>11} {:>9}", "seed before", "after").unwrap();
    out.push_str(&head);
    for (scenario, label, before, after) in SEED_ROWS {
        let cells: Vec<Option<(String, f64)>> = kernels
            .iter()
            .map(|k| combined(k, &seed_row(scenario)).map(|c| figures(&c, clock, model)))
            .collect();
        let mut line = format!("  {label:<36}");
        for c in &cells {
            write!(line, "{:>24}", c.as_ref().map_or("-", |c| c.0.as_str())).unwrap();
        }
        let base = cells.first().and_then(|c| c.as_ref().map(|c| c.1));
        for c in cells.iter().skip(1) {
            let ratio = match (c, base) {
                (Some((_, v)), Some(b)) => format!("{:.2}x", v / b.max(1e-9)),
                _ => "-".into(),
            };
            write!(line, "{ratio:>16}").unwrap();
        }
        writeln!(
            line,
            "   {:>11} {:>9}",
            format!("{before}us"),
            format!("{after}us")
        )
        .unwrap();
        out.push_str(&line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::grid::tests::grid_record;

    fn kernel(name: &str, scale: u64, faults: f64) -> KernelBench {
        let boot = SEED_ROWS
            .iter()
            .map(|(s, _, before, _)| {
                let ns = (*before as u64) * 1000 * scale;
                grid_record(&seed_row(s), &[ns; 3], faults, None)
            })
            .collect();
        KernelBench {
            kernel: name.into(),
            boots: vec![boot],
        }
    }

    #[test]
    fn the_table_shows_each_kernel_its_ratio_and_the_seed() {
        let kernels = [kernel("eager", 10, 0.0), kernel("mainline", 5, 2048.0)];
        let t = seed_table(&kernels, Clock::Icount, None);
        let row = t
            .lines()
            .find(|l| l.contains("no MAP_POPULATE, no access"))
            .unwrap();
        assert!(row.contains("2260.0k 0"), "{row}");
        assert!(row.contains("1130.0k 2048"), "{row}");
        assert!(row.contains("0.50x"), "{row}");
        assert!(row.contains("226us") && row.contains("1.1us"), "{row}");
        // With the model, ratios are the model's: faults now count.
        let m = CostModel {
            us_per_instruction: 0.0001,
            us_per_fault: 0.1,
        };
        let t = seed_table(&kernels, Clock::Icount, Some(&m));
        let row = t
            .lines()
            .find(|l| l.contains("no MAP_POPULATE, no access"))
            .unwrap();
        // base 226us; patched 113 + 204.8 = 317.8us.
        assert!(row.contains("226us") && row.contains("318us"), "{row}");
        assert!(row.contains("1.41x"), "{row}");
        assert!(seed_table(&kernels, Clock::Wall, None).contains("wall clock"));
    }
}
