//! The patch series under patches/: the `series` file names the patches in
//! the order they apply, quilt-style.

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
        for name in parse_series(&text) {
            let path = dir.join(name);
            let body = fs::read(&path).with_context(|| {
                format!(
                    "reading {} named in {}: add the file or remove its line",
                    path.display(),
                    series_path.display()
                )
            })?;
            let body_text = String::from_utf8_lossy(&body);
            let files = touched_files(&body_text);
            if files.is_empty() {
                bail!(
                    "{} contains no diff: regenerate it with git format-patch",
                    path.display()
                );
            }
            patches.push(Patch {
                name: name.to_string(),
                path,
                sha256: hex::encode(Sha256::digest(&body)),
                files,
            });
        }
        if patches.is_empty() {
            bail!("{} names no patches", series_path.display());
        }
        Ok(Series { patches })
    }

    /// One hash over the names and contents of all patches, in order:
    /// editing, adding, removing or reordering a patch changes it.
    pub fn hash(&self) -> String {
        let mut h = Sha256::new();
        for p in &self.patches {
            h.update(p.name.as_bytes());
            h.update([0]);
            h.update(p.sha256.as_bytes());
            h.update([0]);
        }
        hex::encode(h.finalize())
    }

    /// Every file any patch touches, sorted and deduplicated.
    pub fn touched_files(&self) -> Vec<String> {
        let mut all: Vec<String> = self.patches.iter().flat_map(|p| p.files.clone()).collect();
        all.sort();
        all.dedup();
        all
    }
}

/// Patch names from a series file: one per line, `#` starts a comment.
pub fn parse_series(text: &str) -> Vec<&str> {
    text.lines()
        .map(|line| line.split('#').next().unwrap_or("").trim())
        .filter(|line| !line.is_empty())
        .map(|line| line.split_whitespace().next().unwrap_or(line))
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

    #[test]
    fn series_skips_comments_and_blank_lines() {
        let text = "# order matters\n\n0001-a.patch\n  0002-b.patch  # second\n0003-c.patch -p1\n";
        assert_eq!(
            parse_series(text),
            ["0001-a.patch", "0002-b.patch", "0003-c.patch"]
        );
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
        let series = Series::load(&crate::project::root().join("patches")).unwrap();
        assert!(!series.patches.is_empty());
        let files = series.touched_files();
        for f in [
            "include/linux/bpf.h",
            "kernel/bpf/arraymap.c",
            "kernel/bpf/syscall.c",
        ] {
            assert!(
                files.iter().any(|x| x == f),
                "series should touch {f}: {files:?}"
            );
        }
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
