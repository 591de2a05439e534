//! The patch series under patches/: the `series` file names the patches in
//! the order they apply, quilt-style. A line `[name]` starts a kernel
//! variant: the kernel built from every patch above the line and the
//! patches below it, up to the next such line. The patches before the first
//! marker are the variant "patched"; a marker before any patch names that
//! first variant instead (a git branch's series: `kernel::git`).

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, Serialize)]
pub struct Patch {
    pub name: String,
    #[serde(skip)]
    pub path: PathBuf,
    pub sha256: String,
    /// Files the patch modifies, creates or deletes (paths inside the tree).
    #[serde(skip)]
    pub files: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Series {
    pub patches: Vec<Patch>,
    /// The kernels the series builds, in order; each is a prefix of
    /// `patches`. Never empty; the first is "patched" unless named.
    pub variants: Vec<Variant>,
    /// The kernel before any of `patches`.
    pub base: Base,
    /// How many of `patches`, from the first, are a Debian baseline's
    /// (`sources/`: mainline's), not the series': what `own` leaves out.
    pub baseline: usize,
}

/// The kernel built before any patch of a series: the source's tree as
/// it is (`base`), or, for one of Debian's packages the harness keeps a
/// baseline of (`sources/`), the eager kernel: the package's tree with
/// the baseline's patches (7.3's: the lazy mapping reverted).
#[derive(Debug, Clone, Default)]
pub struct Base {
    pub name: BaseName,
    /// Applied to the source's tree to make the base kernel; never
    /// mutated, checked or posted: they are the harness's.
    pub patches: Vec<Patch>,
}

/// What the base kernel is called.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum BaseName {
    /// The source's tree as it is: a developer's tree, branch or tarball.
    #[default]
    Base,
    /// A Debian package's baseline: array maps mapped eagerly, as every
    /// release before the lazy mapping (7.3) had.
    Eager,
}

impl BaseName {
    pub const fn as_str(self) -> &'static str {
        match self {
            BaseName::Base => "base",
            BaseName::Eager => "eager",
        }
    }
}

/// One kernel of the series: the first `patches` patches applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    pub name: String,
    pub patches: usize,
}

/// The variant the patches before the first `[name]` line build.
pub const FIRST_VARIANT: &str = "patched";

/// One meaningful line of a series file.
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    Patch(&'a str),
    /// `[name]`: a variant starts here.
    Variant(&'a str),
}

impl Series {
    /// Reads `dir/series` and every patch it names.
    pub fn load(dir: &Path) -> Result<Series> {
        let series_path = dir.join("series");
        let text = fs::read_to_string(&series_path).with_context(|| {
            format!(
                "reading {}: the series file lists the patches in order",
                series_path.display()
            )
        })?;
        let mut patches = Vec::new();
        // Where each variant ends: its name and how many patches it has.
        let mut ends: Vec<(&str, usize)> = Vec::new();
        let mut current = FIRST_VARIANT;
        for line in parse_series(&text) {
            match line {
                Line::Variant(next) if patches.is_empty() && ends.is_empty() => current = next,
                Line::Variant(next) => {
                    ends.push((current, patches.len()));
                    current = next;
                }
                Line::Patch(name) => patches.push(load_patch(dir, name, &series_path)?),
            }
        }
        if patches.is_empty() {
            bail!("{} names no patches", series_path.display());
        }
        ends.push((current, patches.len()));
        let mut variants = Vec::new();
        for (name, count) in ends {
            variants.push(close_variant(name, count, &variants, &series_path)?);
        }
        Ok(Series {
            patches,
            variants,
            base: Base::default(),
            baseline: 0,
        })
    }

    /// A Debian source's baseline (`sources/debian-X.Y`): the eager base
    /// kernel (the package's tree with `eager.patch`, when there is one)
    /// and the variants its `series` file names (mainline: the lazy
    /// mapping as merged), then, when given, `rest`'s variants after them.
    pub fn baseline(dir: &Path, rest: Option<Series>) -> Result<Series> {
        let eager = dir.join("eager.patch");
        let base_patches = if eager.is_file() {
            vec![load_patch(dir, "eager.patch", &eager)?]
        } else {
            Vec::new()
        };
        let mut series = Series::load(dir)?;
        series.base = Base {
            name: BaseName::Eager,
            patches: base_patches,
        };
        series.baseline = series.patches.len();
        let Some(rest) = rest else {
            return Ok(series);
        };
        let offset = series.patches.len();
        for v in rest.variants {
            if series.variant(&v.name).is_some() {
                bail!(
                    "{}: the variant [{}] is the baseline's too; name it otherwise",
                    dir.join("series").display(),
                    v.name
                );
            }
            series.variants.push(Variant {
                name: v.name,
                patches: v.patches + offset,
            });
        }
        series.patches.extend(rest.patches);
        Ok(series)
    }

    /// Every patch a variant's tree gets, in order: the base's, then the
    /// series' up to the variant (`upto`).
    pub fn applied(&self) -> Vec<Patch> {
        self.base
            .patches
            .iter()
            .chain(&self.patches)
            .cloned()
            .collect()
    }

    /// The base kernel's tree as a series of no variant: its patches.
    pub fn base_only(&self) -> Series {
        Series {
            patches: Vec::new(),
            variants: Vec::new(),
            base: self.base.clone(),
            baseline: 0,
        }
    }

    /// The series' own patches: those after a Debian baseline's, what the
    /// patch checks hold to a maintainer's gates.
    pub fn own(&self) -> &[Patch] {
        &self.patches[self.baseline..]
    }

    /// The variant the series' own patches start from: a Debian
    /// baseline's mainline; None when the series starts at the base.
    pub fn start(&self) -> Option<&Variant> {
        self.variants.iter().find(|v| v.patches == self.baseline)
    }

    /// The variant called `name`, if the series has one.
    pub fn variant(&self, name: &str) -> Option<&Variant> {
        self.variants.iter().find(|v| v.name == name)
    }

    /// The variants' names, in order: for messages.
    pub fn variant_names(&self) -> Vec<&str> {
        self.variants.iter().map(|v| v.name.as_str()).collect()
    }

    /// The series as far as `variant` goes: what its kernel is built from.
    pub fn upto(&self, variant: &Variant) -> Series {
        Series {
            patches: self.patches[..variant.patches].to_vec(),
            variants: vec![variant.clone()],
            base: self.base.clone(),
            baseline: self.baseline.min(variant.patches),
        }
    }

    /// `variant`'s whole series (every patch it has, those after patch
    /// `index` too) as the one variant `name`, with patch `index`'s text
    /// `path`'s instead when `replaced` names one: the kernel of a mutant
    /// of that patch, or, with none replaced, its control's, built the
    /// same way.
    pub fn variant_with(
        &self,
        variant: &Variant,
        replaced: Option<(usize, &Path)>,
        name: &str,
    ) -> Result<Series> {
        let mut patches = self.patches[..variant.patches].to_vec();
        if let Some((index, path)) = replaced {
            let Some(original) = patches.get(index) else {
                bail!(
                    "{}: patch {} is not one of the {} the variant {} has",
                    path.display(),
                    index + 1,
                    variant.patches,
                    variant.name
                );
            };
            let dir = path.parent().unwrap_or(Path::new("."));
            let file = path.file_name().unwrap_or_default().to_string_lossy();
            let mut replacement = load_patch(dir, &file, path)?;
            replacement.name.clone_from(&original.name);
            patches[index] = replacement;
        }
        let label = Path::new("a mutated series");
        let whole = close_variant(name, variant.patches, &[], label)?;
        Ok(Series {
            patches,
            variants: vec![whole],
            base: self.base.clone(),
            baseline: self.baseline.min(variant.patches),
        })
    }

    /// The variant with every patch: what the patch checks look at.
    pub fn whole(&self) -> &Variant {
        self.variants
            .last()
            .expect("a series has at least one variant")
    }

    /// One hash over the names and contents of all patches, the base's
    /// first, in order: editing, adding, removing or reordering a patch
    /// changes it.
    pub fn hash(&self) -> String {
        let mut h = Sha256::new();
        for p in &self.applied() {
            h.update(p.name.as_bytes());
            h.update([0]);
            h.update(p.sha256.as_bytes());
            h.update([0]);
        }
        hex::encode(h.finalize())
    }

    /// Every file the series' own patches touch, sorted and deduplicated.
    pub fn own_touched_files(&self) -> Vec<String> {
        let mut all: Vec<String> = self.own().iter().flat_map(|p| p.files.clone()).collect();
        all.sort();
        all.dedup();
        all
    }

    /// Every file any patch touches (the base's too), sorted and
    /// deduplicated.
    pub fn touched_files(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .applied()
            .iter()
            .flat_map(|p| p.files.clone())
            .collect();
        all.sort();
        all.dedup();
        all
    }
}

/// Reads the patch `name` that `series` names, in `dir`.
fn load_patch(dir: &Path, name: &str, series: &Path) -> Result<Patch> {
    // Absolute, so tools run from elsewhere (git am) find it.
    let path = fs::canonicalize(dir.join(name)).unwrap_or_else(|_| dir.join(name));
    let body = fs::read(&path).with_context(|| {
        format!(
            "reading {} named in {}: add the file or remove its line",
            path.display(),
            series.display()
        )
    })?;
    let files = touched_files(&String::from_utf8_lossy(&body));
    if files.is_empty() {
        bail!(
            "{} contains no diff: regenerate it with git format-patch",
            path.display()
        );
    }
    Ok(Patch {
        name: name.to_string(),
        path,
        sha256: hex::encode(Sha256::digest(&body)),
        files,
    })
}

/// Whether `name` can name a variant: lower-case letters, digits and
/// `-` (a directory and a kernel command-line word), and not a word
/// `--kernel` means otherwise (base, all, both, a debug build's suffix).
pub fn usable_name(name: &str) -> bool {
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    valid && !["base", "eager", "all", "both"].contains(&name) && !name.ends_with("-debug")
}

/// The variant `name` ends after `count` patches; it must add at least one
/// patch, have a name of its own, and be usable as a directory and a
/// kernel command-line word.
fn close_variant(name: &str, count: usize, before: &[Variant], series: &Path) -> Result<Variant> {
    if !usable_name(name) {
        bail!(
            "{}: [{name}] is not a usable variant name: use lower-case letters, digits and '-', \
             not base, eager, all, both or a name ending in -debug",
            series.display()
        );
    }
    if before.iter().any(|v| v.name == name) {
        bail!("{}: the variant [{name}] is named twice", series.display());
    }
    if count == 0 {
        bail!(
            "{}: no patch before the first [name] line: those patches build the kernel \"{FIRST_VARIANT}\"",
            series.display()
        );
    }
    if before.last().map_or(0, |v| v.patches) == count {
        bail!(
            "{}: the variant [{name}] adds no patch: list its patches after the [{name}] line",
            series.display()
        );
    }
    Ok(Variant {
        name: name.to_string(),
        patches: count,
    })
}

/// The lines of a series file: a patch name per line or a `[variant]`
/// line; `#` starts a comment.
pub fn parse_series(text: &str) -> Vec<Line<'_>> {
    text.lines()
        .map(|line| line.split('#').next().unwrap_or("").trim())
        .filter(|line| !line.is_empty())
        .map(
            |line| match line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                Some(name) => Line::Variant(name.trim()),
                None => Line::Patch(line.split_whitespace().next().unwrap_or(line)),
            },
        )
        .collect()
}

/// Paths named by the `---`/`+++` headers of a unified diff, without the
/// a/ b/ prefixes; /dev/null (creation, deletion) is skipped.
pub fn touched_files(diff: &str) -> Vec<String> {
    let mut files: Vec<String> = Vec::new();
    for line in diff.lines() {
        if let Some(rest) = line
            .strip_prefix("--- ")
            .or_else(|| line.strip_prefix("+++ "))
        {
            let path = rest.split('\t').next().unwrap_or(rest).trim();
            if let Some(p) = path.strip_prefix("a/").or_else(|| path.strip_prefix("b/")) {
                files.push(p.to_string());
            }
        } else if let Some(rest) = line.strip_prefix("diff --git ") {
            // Renames and mode changes have no ---/+++ headers.
            if let Some((a, b)) = rest.split_once(" b/") {
                files.extend(a.strip_prefix("a/").map(str::to_string));
                files.push(b.to_string());
            }
        } else if let Some(p) = line
            .strip_prefix("rename from ")
            .or_else(|| line.strip_prefix("rename to "))
            .or_else(|| line.strip_prefix("copy to "))
        {
            files.push(p.trim().to_string());
        }
    }
    files.sort();
    files.dedup();
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of `#define NAME` among the lines a patch adds, if it
    /// has one.
    fn added_define(patch_text: &str, name: &str) -> Option<usize> {
        patch_text.lines().find_map(|l| {
            let rest = l.strip_prefix("+#define ")?.strip_prefix(name)?;
            rest.starts_with(char::is_whitespace)
                .then(|| rest.trim().parse().ok())
                .flatten()
        })
    }

    /// The guest's expectations (`PREFAULT_WINDOW_PAGES`,
    /// `MMAP_POPULATE_PAGES`) and the host's figures take the window's
    /// cap and the populate threshold from the one place the kernel does:
    /// the series' `#define`s.
    #[test]
    fn the_series_defines_what_the_guest_expects() {
        let series = Series::load(&crate::project::root().join("patches")).unwrap();
        let texts: Vec<(String, String)> = series
            .patches
            .iter()
            .map(|p| (p.name.clone(), fs::read_to_string(&p.path).unwrap()))
            .collect();
        for (name, guest, constant) in [
            (
                "ARRAY_MAP_FAULT_WINDOW",
                guest_common::protocol::PREFAULT_WINDOW_PAGES,
                "PREFAULT_WINDOW_PAGES",
            ),
            (
                "ARRAY_MAP_MMAP_POPULATE_PAGES",
                guest_common::protocol::MMAP_POPULATE_PAGES,
                "MMAP_POPULATE_PAGES",
            ),
        ] {
            let defined: Vec<(&str, usize)> = texts
                .iter()
                .filter_map(|(patch, text)| added_define(text, name).map(|n| (patch.as_str(), n)))
                .collect();
            assert_eq!(
                defined.len(),
                1,
                "one patch of the series must #define {name}: {defined:?}"
            );
            assert_eq!(
                defined[0].1, guest,
                "{} defines {name} {}; set {constant} in guest-common/src/protocol/mod.rs to match",
                defined[0].0, defined[0].1
            );
        }
    }

    #[test]
    fn a_define_is_read_from_added_lines_only() {
        let w = "ARRAY_MAP_FAULT_WINDOW";
        assert_eq!(
            added_define("+#define ARRAY_MAP_FAULT_WINDOW\t64\n", w),
            Some(64)
        );
        assert_eq!(
            added_define(" #define ARRAY_MAP_FAULT_WINDOW\t64\n", w),
            None
        );
        assert_eq!(
            added_define("+#define ARRAY_MAP_FAULT_BATCH\t16\n", w),
            None
        );
        assert_eq!(
            added_define("+#define ARRAY_MAP_FAULT_WINDOWS\t16\n", w),
            None
        );
    }

    #[test]
    fn series_skips_comments_and_blank_lines() {
        let text =
            "# order matters\n\n0001-a.patch\n  0002-b.patch  # second\n[more]\n0003-c.patch -p1\n";
        assert_eq!(
            parse_series(text),
            [
                Line::Patch("0001-a.patch"),
                Line::Patch("0002-b.patch"),
                Line::Variant("more"),
                Line::Patch("0003-c.patch")
            ]
        );
    }

    /// A directory with patches one.patch, two.patch, three.patch and the
    /// given series file.
    fn series_dir(series: &str) -> PathBuf {
        let dir = crate::util::tempdir();
        for f in ["one", "two", "three"] {
            let diff = format!("--- a/{f}\n+++ b/{f}\n@@ -1 +1 @@\n-x\n+y\n");
            fs::write(dir.join(format!("{f}.patch")), diff).unwrap();
        }
        fs::write(dir.join("series"), series).unwrap();
        dir
    }

    #[test]
    fn variants_are_prefixes_of_the_series() {
        let dir = series_dir("one.patch\n[window]\ntwo.patch\n[third]\nthree.patch\n");
        let series = Series::load(&dir).unwrap();
        assert_eq!(series.variant_names(), ["patched", "window", "third"]);
        let window = series.variant("window").unwrap();
        let names: Vec<String> = series
            .upto(window)
            .patches
            .into_iter()
            .map(|p| p.name)
            .collect();
        assert_eq!(names, ["one.patch", "two.patch"]);
        assert_eq!(series.whole().name, "third");
        assert_ne!(series.upto(window).hash(), series.hash());
        fs::remove_dir_all(dir).unwrap();
        let dir = series_dir("one.patch\ntwo.patch\n");
        let series = Series::load(&dir).unwrap();
        assert_eq!(
            series.variants,
            [Variant {
                name: "patched".into(),
                patches: 2
            }]
        );
        fs::remove_dir_all(dir).unwrap();
    }

    /// A mutant of the first of a variant's two patches is built with
    /// the second too; with none replaced it is the variant as it is.
    #[test]
    fn a_replaced_patch_keeps_every_patch_of_its_variant() {
        let dir = series_dir("one.patch\n[pair]\ntwo.patch\nthree.patch\n");
        let series = Series::load(&dir).unwrap();
        let pair = series.variant("pair").unwrap();
        let mutated = dir.join("two-mutated.patch");
        fs::write(&mutated, "--- a/two\n+++ b/two\n@@ -1 +1 @@\n-x\n+z\n").unwrap();
        let mutant = series
            .variant_with(pair, Some((1, &mutated)), "mutant")
            .unwrap();
        let names: Vec<&str> = mutant.patches.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["one.patch", "two.patch", "three.patch"]);
        assert_ne!(mutant.patches[1].sha256, series.patches[1].sha256);
        assert_eq!(mutant.patches[2].sha256, series.patches[2].sha256);
        assert_eq!(mutant.whole().name, "mutant");
        assert_eq!(mutant.whole().patches, 3);
        // None replaced: the variant's own patches, under the same name.
        let control = series.variant_with(pair, None, "mutant").unwrap();
        assert_eq!(control.hash(), series.upto(pair).hash());
        assert_eq!(control.whole(), mutant.whole());
        // A patch the variant lacks is no mutant of it.
        let first = series.variant("patched").unwrap();
        let err = format!(
            "{:#}",
            series
                .variant_with(first, Some((1, &mutated)), "mutant")
                .unwrap_err()
        );
        assert!(
            err.contains("patch 2 is not one of the 1 the variant patched has"),
            "{err}"
        );
        fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_baseline_goes_before_the_series_and_is_none_of_its_own() {
        let base = series_dir("[mainline]\none.patch\n");
        fs::write(
            base.join("eager.patch"),
            "--- a/e\n+++ b/e\n@@ -1 +1 @@\n-x\n+y\n",
        )
        .unwrap();
        let rest = series_dir("[direct]\ntwo.patch\n[window]\nthree.patch\n");
        let s = Series::baseline(&base, Some(Series::load(&rest).unwrap())).unwrap();
        assert_eq!(s.base.name, BaseName::Eager);
        assert_eq!(s.variant_names(), ["mainline", "direct", "window"]);
        assert_eq!(s.variant("window").unwrap().patches, 3);
        let applied: Vec<String> = s.applied().into_iter().map(|p| p.name).collect();
        assert_eq!(
            applied,
            ["eager.patch", "one.patch", "two.patch", "three.patch"]
        );
        let own: Vec<&str> = s.own().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(own, ["two.patch", "three.patch"]);
        assert_eq!(s.start().map(|v| v.name.as_str()), Some("mainline"));
        assert_eq!(s.own_touched_files(), ["three", "two"]);
        assert_eq!(s.touched_files(), ["e", "one", "three", "two"]);
        // A variant the baseline has is no name for the series'.
        let clash = series_dir("[mainline]\ntwo.patch\n");
        let err = format!(
            "{:#}",
            Series::baseline(&base, Some(Series::load(&clash).unwrap())).unwrap_err()
        );
        assert!(
            err.contains("the variant [mainline] is the baseline's too"),
            "{err}"
        );
        // Without a baseline the series is its own from its first patch.
        let alone = Series::load(&rest).unwrap();
        assert_eq!((alone.own().len(), alone.start()), (2, None));
        for d in [base, rest, clash] {
            fs::remove_dir_all(d).unwrap();
        }
    }

    #[test]
    fn bad_variants_are_named() {
        for (series, says) in [
            ("one.patch\n[x]\n", "[x] adds no patch"),
            (
                "one.patch\n[x]\ntwo.patch\n[x]\nthree.patch\n",
                "[x] is named twice",
            ),
            (
                "one.patch\n[patched]\ntwo.patch\n",
                "[patched] is named twice",
            ),
            (
                "one.patch\n[base]\ntwo.patch\n",
                "[base] is not a usable variant name",
            ),
            ("one.patch\n[Big One]\ntwo.patch\n", "[Big One] is not"),
            ("one.patch\n[x-debug]\ntwo.patch\n", "[x-debug] is not"),
        ] {
            let dir = series_dir(series);
            let err = format!("{:#}", Series::load(&dir).unwrap_err());
            assert!(err.contains(says), "{series:?}: {err}");
            fs::remove_dir_all(dir).unwrap();
        }
    }

    #[test]
    fn renames_count_both_paths() {
        let diff = "diff --git a/old.c b/new.c\nsimilarity index 100%\nrename from old.c\nrename to new.c\n";
        assert_eq!(touched_files(diff), ["new.c", "old.c"]);
    }

    #[test]
    fn touched_files_from_headers() {
        let diff = "From x\nSubject: y\n---\n a | 1 +\n\ndiff --git a/include/linux/bpf.h b/include/linux/bpf.h\n--- a/include/linux/bpf.h\n+++ b/include/linux/bpf.h\n@@ -1 +1 @@\n-x\n+y\ndiff --git a/new.c b/new.c\n--- /dev/null\n+++ b/new.c\n@@ -0,0 +1 @@\n+z\n";
        assert_eq!(touched_files(diff), ["include/linux/bpf.h", "new.c"]);
    }

    #[test]
    fn the_shipped_series_loads() {
        let series = crate::kernel::project_series().unwrap();
        assert!(!series.patches.is_empty());
        let files = series.touched_files();
        for f in ["kernel/bpf/arraymap.c", "kernel/bpf/syscall.c"] {
            assert!(
                files.iter().any(|x| x == f),
                "series should touch {f}: {files:?}"
            );
        }
        // eager.patch keeps bpf.h as 7.3 has it, so that no kernel after
        // eager recompiles the third of the tree that includes it.
        assert!(
            !files.iter().any(|x| x == "include/linux/bpf.h"),
            "a patch after eager edits bpf.h: {files:?}"
        );
    }

    #[test]
    fn hash_changes_with_content_and_order() {
        let dir = crate::util::tempdir();
        let diff = |f: &str| format!("--- a/{f}\n+++ b/{f}\n@@ -1 +1 @@\n-x\n+y\n");
        fs::write(dir.join("1.patch"), diff("one")).unwrap();
        fs::write(dir.join("2.patch"), diff("two")).unwrap();
        fs::write(dir.join("series"), "1.patch\n2.patch\n").unwrap();
        let h1 = Series::load(&dir).unwrap().hash();
        fs::write(dir.join("series"), "2.patch\n1.patch\n").unwrap();
        let h2 = Series::load(&dir).unwrap().hash();
        fs::write(dir.join("1.patch"), diff("uno")).unwrap();
        let h3 = Series::load(&dir).unwrap().hash();
        assert_ne!(h1, h2);
        assert_ne!(h2, h3);
        fs::write(dir.join("series"), "1.patch\nmissing.patch\n").unwrap();
        let err = format!("{:#}", Series::load(&dir).unwrap_err());
        assert!(err.contains("missing.patch"), "{err}");
        fs::remove_dir_all(dir).unwrap();
    }
}
