//! Which mutants a run takes: CI's sample (or a sample file), a patch,
//! id filters; with the equivalent ones and the sample read when the
//! series is the project's own, which mutants/'s lists are of.

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use anyhow::{bail, Context, Result};

use super::lists::{self, Sample, CI_SAMPLE};
use super::{patch_number, Mutant};
use crate::kernel::series::Series;
use crate::kernel::SourceConfig;
use crate::project;

/// Which mutants: `--patch` (a number or a file name), `--filter` (parts
/// of ids; none: all), `--sample` (CI's) or `--sample-file`.
pub struct Selection<'a> {
    pub patch: Option<&'a str>,
    pub filter: &'a [String],
    pub sample: bool,
    pub sample_file: Option<&'a Path>,
}

/// The series, its patches' texts, and the mutants chosen of it, with
/// the equivalent ones (id to why) and the sample they came from.
pub struct Selected {
    pub series: Series,
    pub texts: Vec<String>,
    pub mutants: Vec<Mutant>,
    pub equivalent: HashMap<String, String>,
    pub sample: Option<Sample>,
}

/// The mutants `choice` takes of `series`, `source`'s.
pub fn mutants(source: &SourceConfig, series: Series, choice: &Selection) -> Result<Selected> {
    let texts = super::read_patches(&series)?;
    let all = super::of_series(&series, &texts);
    let own = own_series(&source.patches);
    let equivalent: HashMap<String, String> = if own {
        let listed = lists::equivalents()?;
        lists::check_equivalents(&all, &listed)?;
        listed.into_iter().map(|e| (e.id, e.reason)).collect()
    } else {
        HashMap::new()
    };
    let sample = match (choice.sample_file, choice.sample, own) {
        (Some(file), _, _) => Some(lists::sample_file(file)?),
        (None, false, _) => None,
        (None, true, true) => Some(lists::sample()?),
        (None, true, false) => bail!(
            "--sample runs mutants/{CI_SAMPLE}, of the project's own series; with --patches {}, give --sample-file FILE in its form, or choose mutants with --patch or --filter",
            source.patches.display()
        ),
    };
    let mutants = select(&all, choice, &series, sample.as_ref())?;
    Ok(Selected {
        series,
        texts,
        mutants,
        equivalent,
        sample,
    })
}

/// Whether `patches` is the project's own series, which mutants/'s
/// lists are of.
fn own_series(patches: &Path) -> bool {
    let own = project::root().join("patches");
    match (fs::canonicalize(patches), fs::canonicalize(own)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// The mutants asked for: `--sample` (its entries), `--patch`, `--filter`.
fn select(
    all: &[Mutant],
    choice: &Selection,
    series: &Series,
    sample: Option<&Sample>,
) -> Result<Vec<Mutant>> {
    if let Some(sample) = sample {
        return lists::sampled(all, sample);
    }
    let patch = match choice.patch {
        None => None,
        Some(p) => Some(patch_index(series, p)?),
    };
    Ok(all
        .iter()
        .filter(|m| patch.is_none_or(|p| m.patch == p))
        .filter(|m| {
            choice.filter.is_empty() || choice.filter.iter().any(|f| m.id.contains(f.as_str()))
        })
        .cloned()
        .collect())
}

/// `--patch 2`, `0002` or the file name, to the patch's index.
fn patch_index(series: &Series, word: &str) -> Result<usize> {
    let found = series.patches.iter().position(|p| {
        p.name == word
            || patch_number(&p.name) == word
            || word.parse::<usize>().ok() == patch_number(&p.name).parse().ok()
    });
    found.with_context(|| {
        let names: Vec<&str> = series
            .patches
            .iter()
            .map(|p| patch_number(&p.name))
            .collect();
        format!(
            "--patch {word}: the series has patches {}",
            names.join(", ")
        )
    })
}
