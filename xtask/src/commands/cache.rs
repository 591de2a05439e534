//! `cargo xtask cache`: what the kernel cache holds, part by part, and
//! with `--prune` the old runs and the trees of kernels the series no
//! longer names taken out, down to `--cache-cap` (`kernel::disk_usage`).

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;

use crate::cli::CacheArgs;
use crate::kernel::disk_usage::{self, human, Part};
use crate::kernel::series::Series;
use crate::project;

pub fn run(args: CacheArgs) -> Result<ExitCode> {
    let root = project::cache_dir(args.cache.cache_dir.as_deref())?;
    if !root.is_dir() {
        println!("{}: no cache yet (nothing built)", root.display());
        return Ok(ExitCode::SUCCESS);
    }
    let cap = args
        .cache_cap
        .size
        .as_deref()
        .map(disk_usage::parse_size)
        .transpose()?;
    let parts = if args.prune {
        // The series' variants, and every Debian baseline's.
        let mut names: Vec<String> = Series::load(&args.series.patches)?
            .variant_names()
            .into_iter()
            .map(str::to_string)
            .collect();
        for dir in crate::kernel::baseline_dirs()? {
            names.extend(
                Series::load(&dir)?
                    .variant_names()
                    .iter()
                    .map(|n| n.to_string()),
            );
        }
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let age = Duration::from_secs(args.runs_older_than * 86400);
        let t = disk_usage::trim(&root, &names, age, cap, Path::new(""))?;
        for p in &t.removed {
            println!("removed {}", p.display());
        }
        println!(
            "pruned {} director(ies), {} freed\n",
            t.removed.len(),
            human(t.freed)
        );
        t.parts
    } else {
        disk_usage::parts(&root)
    };
    let total = disk_usage::total(&parts);
    print!("{}", table(&parts, total, &root));
    if let Some(free) = disk_usage::free_bytes(&root) {
        println!("free on its disk: {}", human(free));
    }
    Ok(match cap {
        Some(cap) if total > cap => {
            println!(
                "over the cap of {}: {} ({})",
                human(cap),
                human(total),
                if args.prune {
                    "what is left is in use; raise the cap or remove a kernel's build"
                } else {
                    "run `cargo xtask cache --prune`"
                }
            );
            ExitCode::from(project::EXIT_TESTS_FAILED)
        }
        _ => ExitCode::SUCCESS,
    })
}

/// The parts, their sizes and the total.
fn table(parts: &[Part], total: u64, root: &Path) -> String {
    let w = parts.iter().map(|p| p.name.len()).max().unwrap_or(0).max(8);
    let mut out = format!("{:<w$} {:>7}\n", "part", "size");
    for p in parts {
        out += &format!("{:<w$} {:>7}\n", p.name, human(p.bytes));
    }
    out += &format!(
        "{:<w$} {:>7}  ({})\n",
        "total",
        human(total),
        root.display()
    );
    out
}
