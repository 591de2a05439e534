//! What an icount figure would cost on the seed's machine. Instructions
//! alone underprice a page fault (its exception entry and exit cost a CPU
//! far more than their instruction count), so the model prices both:
//! t = a × guest instructions + b × user page faults, with a and b fitted
//! by least squares to the seed's eight cells (its table, measured on
//! KVM, `records::SEED_ROWS`) from eager's and mainline's icount rows at 8 MiB.
//! The faults are the user's: MAP_POPULATE's are taken inside mmap()
//! through get_user_pages, with no exception, and rusage counts them as
//! well, so they are left out. Of the seed's cells only mainline's
//! write-all then has faults: the fault price rests on that one cell.

use std::fmt::Write as _;

use super::guest_records::SEED_ROWS;

/// The fitted prices.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostModel {
    /// µs per guest instruction.
    pub us_per_instruction: f64,
    /// µs per user page fault.
    pub us_per_fault: f64,
}

/// One of the seed's cells with what icount measured for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// "eager" (the seed's "before") or "mainline" ("after").
    pub kernel: &'static str,
    pub scenario: &'static str,
    pub label: &'static str,
    pub seed_us: f64,
    pub instructions: f64,
    pub faults: f64,
}

impl CostModel {
    pub fn estimate_us(&self, instructions: f64, faults: f64) -> f64 {
        self.us_per_instruction * instructions + self.us_per_fault * faults
    }

    /// Least squares without an intercept: the 2x2 normal equations.
    /// None when the cells cannot separate the two prices (no faults, or
    /// no cells).
    pub fn fit(cells: &[Cell]) -> Option<CostModel> {
        let sum = |f: &dyn Fn(&Cell) -> f64| cells.iter().map(f).sum::<f64>();
        let xx = sum(&|c| c.instructions * c.instructions);
        let xf = sum(&|c| c.instructions * c.faults);
        let ff = sum(&|c| c.faults * c.faults);
        let xy = sum(&|c| c.instructions * c.seed_us);
        let fy = sum(&|c| c.faults * c.seed_us);
        let det = xx * ff - xf * xf;
        if det.abs() <= f64::EPSILON * xx * ff || ff == 0.0 {
            return None;
        }
        Some(CostModel {
            us_per_instruction: (xy * ff - fy * xf) / det,
            us_per_fault: (fy * xx - xy * xf) / det,
        })
    }
}

/// The seed's eight cells, each with `measure(kernel, scenario)`'s
/// (instructions, faults per cycle) at 8 MiB and one thread; None if one
/// is missing.
pub fn seed_cells(measure: impl Fn(&str, &str) -> Option<(f64, f64)>) -> Option<Vec<Cell>> {
    let mut cells = vec![];
    for (kernel, after) in [("eager", false), ("mainline", true)] {
        for (scenario, label, before_us, after_us) in SEED_ROWS {
            let (instructions, faults) = measure(kernel, scenario)?;
            cells.push(Cell {
                kernel,
                scenario,
                label,
                seed_us: if after { after_us } else { before_us },
                instructions,
                faults,
            });
        }
    }
    Some(cells)
}

/// The fit and each cell's residual, for under the table.
pub fn fit_report(model: &CostModel, cells: &[Cell], source: &str) -> String {
    let mut out = format!(
        "\nThe model (\"model\" columns): t = {:.4} ns x guest instructions + {:.3} us x user page faults,\n\
         least squares on the seed's 8 cells from {source}. Only mainline's write-all cell has user\n\
         faults (MAP_POPULATE's are taken inside mmap(), no exception), so the fault price rests on that one cell.\n",
        model.us_per_instruction * 1000.0,
        model.us_per_fault
    );
    for c in cells {
        let est = model.estimate_us(c.instructions, c.faults);
        writeln!(
            out,
            "  {:<8} {:<36} model {:>8.1}us  seed {:>7.1}us  residual {:>+7.1}us ({:+.0}%)",
            c.kernel,
            c.label,
            est,
            c.seed_us,
            est - c.seed_us,
            (est - c.seed_us) / c.seed_us * 100.0
        )
        .unwrap();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// icount's figures for the seed's rows (guest instructions and user
    /// faults per cycle at 8 MiB), from docs/bench/icount.json.
    fn recorded() -> Vec<Cell> {
        let record: serde_json::Value =
            serde_json::from_str(include_str!("../../../docs/bench/icount.json"))
                .expect("docs/bench/icount.json parses");
        seed_cells(|kernel, scenario| {
            record["kernels"][kernel].as_array()?.iter().find_map(|r| {
                (r["scenario"] == scenario && r["pages"] == 2048 && r["threads"] == 1).then(|| {
                    (
                        r["instructions"].as_f64().unwrap(),
                        r["user_faults"].as_f64().unwrap(),
                    )
                })
            })
        })
        .expect("the record holds the seed's rows of eager and mainline")
    }

    #[test]
    fn the_fit_reproduces_the_seeds_table_from_the_recorded_icount_rows() {
        let cells = recorded();
        let m = CostModel::fit(&cells).unwrap();
        for c in &cells {
            let est = m.estimate_us(c.instructions, c.faults);
            // Within 8% of each cell, and the 1.1 us cell within 0.6 us.
            let allowed = (c.seed_us * 0.08).max(0.6);
            assert!(
                (est - c.seed_us).abs() <= allowed,
                "{} {}: model {est:.1} against the seed's {}",
                c.kernel,
                c.label,
                c.seed_us
            );
        }
        assert!(m.us_per_instruction > 0.0, "{m:?}");
        assert_fault_price_plausible(&m);
    }

    /// The fault price is fitted on the one cell with faults, whose
    /// residual is then 0 whatever the price: the residuals cannot judge
    /// it. What can is that cell in the seed's table: its 2048 faults
    /// cannot cost more than its whole 1341 us (mainline, write all
    /// 8 MiB), at most 0.65 us a fault; and a fault is an exception entry
    /// and exit and a page's allocation and mapping, 0.1 us or more.
    const FAULT_PRICE_US: std::ops::RangeInclusive<f64> = 0.1..=0.65;

    fn assert_fault_price_plausible(m: &CostModel) {
        assert!(
            FAULT_PRICE_US.contains(&m.us_per_fault),
            "the fault price {:.3} us is outside {FAULT_PRICE_US:?} us",
            m.us_per_fault
        );
    }

    #[test]
    fn a_fault_price_ten_times_too_high_is_caught() {
        let cells = recorded();
        let m = CostModel::fit(&cells).unwrap();
        let tenfold = CostModel {
            us_per_fault: m.us_per_fault * 10.0,
            ..m
        };
        let caught = std::panic::catch_unwind(|| assert_fault_price_plausible(&tenfold));
        assert!(caught.is_err(), "ten times the price passed: {tenfold:?}");
        // The faulting cell ten times slower fits with residual 0 again,
        // and a tenfold price: the range catches what the residuals cannot.
        let mut slower = cells.clone();
        for c in slower.iter_mut().filter(|c| c.faults > 0.0) {
            c.seed_us *= 10.0;
        }
        let refit = CostModel::fit(&slower).unwrap();
        let faulting = slower.iter().find(|c| c.faults > 0.0).unwrap();
        let residual = refit.estimate_us(faulting.instructions, faulting.faults) - faulting.seed_us;
        assert!(residual.abs() < 1e-6, "residual {residual}");
        let caught = std::panic::catch_unwind(|| assert_fault_price_plausible(&refit));
        assert!(
            caught.is_err(),
            "a price fitted on a tenfold cell passed: {refit:?}"
        );
    }

    #[test]
    fn the_fit_solves_an_exact_system_and_refuses_one_without_faults() {
        let cell = |i: f64, f: f64| Cell {
            kernel: "eager",
            scenario: "s",
            label: "l",
            seed_us: 0.1 * i + 2.0 * f,
            instructions: i,
            faults: f,
        };
        let m = CostModel::fit(&[cell(100.0, 0.0), cell(50.0, 3.0), cell(10.0, 1.0)]).unwrap();
        assert!((m.us_per_instruction - 0.1).abs() < 1e-9, "{m:?}");
        assert!((m.us_per_fault - 2.0).abs() < 1e-9, "{m:?}");
        assert_eq!(CostModel::fit(&[cell(100.0, 0.0), cell(50.0, 0.0)]), None);
        assert_eq!(CostModel::fit(&[]), None);
    }
}
