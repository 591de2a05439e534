//! What the kernel cache holds, part by part, and what a prune removes.
//! Sizes are of the blocks on disk, and a file with several hard links
//! (the trees are hard-link mirrors of the pristine tree) is counted once,
//! in the first part that holds it, so the parts add up to the total.

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};

/// One part of the cache and the bytes it takes.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub name: String,
    pub path: PathBuf,
    pub bytes: u64,
}

/// The kernel trees of a source directory never pruned: the base kernel
/// and the mutants' kernel, besides the series' variants.
const ALWAYS_KEPT: &[&str] = &["base", "eager", "mutant"];

/// A directory of `sources/<source>/` that holds a kernel: it has a
/// build directory (`_build-default`, `_build-debug`, `_build-bpfci`) or
/// is a tree (a top-level Makefile) other than the pristine one.
fn is_kernel_dir(dir: &Path) -> bool {
    let name = name_of(dir);
    name != "pristine"
        && name != "check"
        && (!build_dirs(dir).is_empty() || dir.join("Makefile").is_file())
}

/// The build directories in a kernel's tree, sorted (as `children` is).
fn build_dirs(tree: &Path) -> Vec<PathBuf> {
    children(tree)
        .into_iter()
        .filter(|p| p.is_dir() && name_of(p).starts_with("_build-"))
        .collect()
}

/// The last component of `path`, as text.
fn name_of(path: &Path) -> String {
    path.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

/// The bytes of all `parts`.
pub fn total(parts: &[Part]) -> u64 {
    parts.iter().map(|p| p.bytes).sum()
}

fn children(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    out.sort();
    out
}

/// Bytes on disk under `path` (the path itself included), each inode
/// counted once across calls that share `seen`; `skip` is left out.
fn disk_bytes(path: &Path, skip: &[PathBuf], seen: &mut HashSet<(u64, u64)>) -> u64 {
    if skip.iter().any(|s| s == path) {
        return 0;
    }
    let Ok(meta) = fs::symlink_metadata(path) else {
        return 0;
    };
    let own = if seen.insert((meta.dev(), meta.ino())) {
        meta.blocks() * 512
    } else {
        0
    };
    if !meta.is_dir() {
        return own;
    }
    own + children(path)
        .iter()
        .map(|c| disk_bytes(c, skip, seen))
        .sum::<u64>()
}

/// The cache by part: each kernel's tree and each of its builds, the
/// other directories of each source (pristine, kselftest, check, ...),
/// then the top-level directories (runs, ccache, mutants, tools, ...).
pub fn parts(cache: &Path) -> Vec<Part> {
    let mut seen = HashSet::new();
    let mut parts = Vec::new();
    // The pristine trees first: the kernels' trees are their hard links.
    let sources = children(&cache.join("sources"));
    for source in &sources {
        let key = name_of(source);
        let pristine = source.join("pristine");
        if pristine.exists() {
            parts.push(part(format!("{key}/pristine"), &pristine, &[], &mut seen));
        }
    }
    for source in &sources {
        let key = name_of(source);
        for dir in children(source) {
            let name = name_of(&dir);
            if name == "pristine" {
                continue;
            }
            if !is_kernel_dir(&dir) {
                parts.push(part(format!("{key}/{name}"), &dir, &[], &mut seen));
                continue;
            }
            let builds = build_dirs(&dir);
            parts.push(part(format!("{key}/{name} tree"), &dir, &builds, &mut seen));
            for b in &builds {
                let flavor = name_of(b);
                let flavor = flavor.trim_start_matches("_build-");
                parts.push(part(
                    format!("{key}/{name} build {flavor}"),
                    b,
                    &[],
                    &mut seen,
                ));
            }
        }
    }
    for dir in children(cache) {
        let name = name_of(&dir);
        if name == "sources" {
            continue;
        }
        parts.push(part(name, &dir, &[], &mut seen));
    }
    parts
}

fn part(name: String, path: &Path, skip: &[PathBuf], seen: &mut HashSet<(u64, u64)>) -> Part {
    Part {
        name,
        bytes: disk_bytes(path, skip, seen),
        path: path.to_path_buf(),
    }
}

/// What `--prune` removes: run directories last changed more than
/// `runs_older_than` before `now`, and kernel trees (with their builds)
/// of names neither the series, base nor the mutants use.
pub fn prune_list(
    cache: &Path,
    kernels: &[&str],
    runs_older_than: Duration,
    now: SystemTime,
) -> Vec<PathBuf> {
    let old_run = |p: &PathBuf| {
        fs::metadata(p)
            .and_then(|m| m.modified())
            .is_ok_and(|t| now.duration_since(t).unwrap_or_default() > runs_older_than)
    };
    let mut out: Vec<PathBuf> = children(&cache.join("runs"))
        .into_iter()
        .filter(old_run)
        .collect();
    for source in children(&cache.join("sources")) {
        out.extend(children(&source).into_iter().filter(|d| {
            let name = name_of(d);
            is_kernel_dir(d) && !kernels.contains(&&*name) && !ALWAYS_KEPT.contains(&&*name)
        }));
    }
    out
}

/// What takes a cache of `total` bytes under `cap`: `stale` (what
/// `prune_list` gave) first, then the other runs, oldest first, `keep`
/// aside. Empty when it is under the cap already.
pub fn cap_list(
    cache: &Path,
    total: u64,
    cap: u64,
    stale: &[PathBuf],
    keep: &Path,
) -> Vec<PathBuf> {
    if total <= cap {
        return Vec::new();
    }
    let mut runs: Vec<(SystemTime, PathBuf)> = children(&cache.join("runs"))
        .into_iter()
        .filter(|p| p != keep && !stale.contains(p))
        .filter_map(|p| Some((fs::metadata(&p).ok()?.modified().ok()?, p)))
        .collect();
    runs.sort();
    let mut seen = HashSet::new();
    let mut left = total;
    let mut out = Vec::new();
    for p in stale
        .iter()
        .cloned()
        .chain(runs.into_iter().map(|(_, p)| p))
    {
        if left <= cap {
            break;
        }
        left = left.saturating_sub(disk_bytes(&p, &[], &mut seen));
        out.push(p);
    }
    out
}

/// A size as `bpflab.toml` and `--cache-cap` give it: `20G`, `512M`,
/// `1T`, or bytes.
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let (num, shift) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 30),
        Some('T' | 't') => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    let n: u64 = num
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .with_context(|| format!("cache cap {text:?}: give a size such as 20G or 512M"))?;
    Ok(n << shift)
}

/// What a trim of the cache did.
pub struct Trimmed {
    pub removed: Vec<PathBuf>,
    pub freed: u64,
    /// The cache's parts after it.
    pub parts: Vec<Part>,
}

/// Trims the cache under its lock: the kernels `kernels` no longer names,
/// runs older than `runs_older_than`, and with a `cap` the oldest other
/// runs until the cache is under it (`keep`, the running one, aside).
pub fn trim(
    cache: &Path,
    kernels: &[&str],
    runs_older_than: Duration,
    cap: Option<u64>,
    keep: &Path,
) -> Result<Trimmed> {
    // Held while removing: a run that builds waits, and none is mid-write.
    let _lock = super::cache::Cache::open(cache)?;
    let mut list = prune_list(cache, kernels, runs_older_than, SystemTime::now());
    // A tree another run holds is in use: it stays.
    list.retain(|p| p != keep && !tree_held(cache, p));
    if let Some(cap) = cap {
        let total = total(&parts(cache));
        let capped = cap_list(cache, total, cap, &list, keep);
        list.extend(
            capped
                .into_iter()
                .filter(|p| !list.contains(p))
                .collect::<Vec<_>>(),
        );
    }
    let freed = prune(&list)?;
    Ok(Trimmed {
        removed: list,
        freed,
        parts: parts(cache),
    })
}

/// Whether `path`, a tree of `cache` (`sources/<source>/<tree>`), is
/// held by a run.
fn tree_held(cache: &Path, path: &Path) -> bool {
    let Ok(rest) = path.strip_prefix(cache.join("sources")) else {
        return false;
    };
    let mut parts = rest.iter().filter_map(|p| p.to_str());
    match (parts.next(), parts.next(), parts.next()) {
        (Some(key), Some(name), None) => super::cache::tree_in_use(cache, key, name),
        _ => false,
    }
}

/// Removes what `prune_list` gave; returns the bytes freed.
pub fn prune(paths: &[PathBuf]) -> Result<u64> {
    let mut seen = HashSet::new();
    let mut freed = 0;
    for p in paths {
        freed += disk_bytes(p, &[], &mut seen);
        fs::remove_dir_all(p).with_context(|| format!("removing {}", p.display()))?;
    }
    Ok(freed)
}

/// The bytes free to an unprivileged writer on the file system of `path`.
pub fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a NUL-terminated path and a statvfs to fill.
    let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
    (rc == 0).then(|| st.f_bavail * st.f_frsize)
}

/// Whether `err` comes of a full disk: an I/O error of that kind in its
/// chain, or the C library's words for it in its text (a make's log).
pub fn is_disk_full(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::StorageFull)
    }) || format!("{err:#}").contains("No space left on device")
}

/// Under this, a disk is full to the tools that failed on it (tar and
/// make print their ENOSPC to the terminal, not into the error).
const NEARLY_FULL: u64 = 64 << 20;

/// `err` as one line naming the cache, its free space and the fix when
/// it comes of a full disk; otherwise `err` as it is. What the failed
/// step left half-written is redone by the next run, as after a kill.
pub fn explain_disk_full(cache: &Path, err: anyhow::Error) -> anyhow::Error {
    let free = free_bytes(cache);
    if !is_disk_full(&err) && free.is_none_or(|f| f >= NEARLY_FULL) {
        return err;
    }
    let what = format!("{err:#}");
    let what = what.lines().next().unwrap_or_default();
    anyhow::anyhow!(
        "the kernel cache {} is out of space ({} free on its disk; {what}): free some with `cargo xtask cache --prune`, or give --cache-dir a larger disk",
        cache.display(),
        free.map_or_else(|| "unknown".to_string(), human),
    )
}

/// `1.4G`, `345M`, `12K`: as `du -h` prints, one decimal under ten.
pub fn human(bytes: u64) -> String {
    let units = ["B", "K", "M", "G", "T"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < units.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 || v >= 10.0 {
        format!("{v:.0}{}", units[i])
    } else {
        format!("{v:.1}{}", units[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tmp(PathBuf);
    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn write(p: &Path, bytes: usize) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, vec![1u8; bytes]).unwrap();
    }

    /// A cache of one source: pristine, base (a hard link of pristine's
    /// file, a default build), an old variant's tree, kselftest; runs
    /// and ccache.
    fn cache(tag: &str) -> Tmp {
        let root = std::env::temp_dir().join(format!("usage-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let src = root.join("sources/linux-1");
        write(&src.join("pristine/Makefile"), 64 << 10);
        fs::create_dir_all(src.join("base")).unwrap();
        fs::hard_link(src.join("pristine/Makefile"), src.join("base/Makefile")).unwrap();
        write(&src.join("base/_build-default/vmlinux"), 128 << 10);
        write(&src.join("gone/Makefile"), 4 << 10);
        write(&src.join("gone/_build-debug/vmlinux"), 32 << 10);
        write(&src.join("kselftest/tree/x"), 8 << 10);
        write(&root.join("runs/vmtest-1/console.log"), 4 << 10);
        write(&root.join("ccache/0/a"), 16 << 10);
        Tmp(root)
    }

    fn bytes_of(parts: &[Part], name: &str) -> u64 {
        parts
            .iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("no part {name} in {parts:?}"))
            .bytes
    }

    #[test]
    fn parts_split_trees_from_builds_and_count_a_hard_link_once() {
        let c = cache("parts");
        let parts = parts(&c.0);
        assert!(bytes_of(&parts, "linux-1/pristine") >= 64 << 10);
        // base's Makefile is pristine's: its tree holds only the directory.
        assert!(bytes_of(&parts, "linux-1/base tree") < 16 << 10);
        assert!(bytes_of(&parts, "linux-1/base build default") >= 128 << 10);
        assert!(bytes_of(&parts, "linux-1/gone build debug") >= 32 << 10);
        assert!(bytes_of(&parts, "linux-1/kselftest") >= 8 << 10);
        assert!(bytes_of(&parts, "runs") >= 4 << 10);
        assert!(bytes_of(&parts, "ccache") >= 16 << 10);
        // Every inode in one part: the parts and the directories walked
        // through (the root, sources, the source) make the whole.
        let sum = total(&parts);
        let dir = |p: PathBuf| fs::metadata(p).unwrap().blocks() * 512;
        let walked = dir(c.0.clone()) + dir(c.0.join("sources")) + dir(c.0.join("sources/linux-1"));
        assert_eq!(sum + walked, disk_bytes(&c.0, &[], &mut HashSet::new()));
    }

    #[test]
    fn prune_takes_old_runs_and_kernels_the_series_does_not_name() {
        let c = cache("prune");
        let later = SystemTime::now() + Duration::from_secs(8 * 86400);
        let list = prune_list(&c.0, &["patched"], Duration::from_secs(7 * 86400), later);
        assert_eq!(
            list,
            [c.0.join("runs/vmtest-1"), c.0.join("sources/linux-1/gone")]
        );
        // A run younger than the limit, and base, stay.
        let now = prune_list(
            &c.0,
            &["gone"],
            Duration::from_secs(7 * 86400),
            SystemTime::now(),
        );
        assert!(now.is_empty(), "{now:?}");
        let freed = prune(&list).unwrap();
        assert!(freed >= 36 << 10, "{freed}");
        assert!(!c.0.join("sources/linux-1/gone").exists());
        assert!(c
            .0
            .join("sources/linux-1/base/_build-default/vmlinux")
            .exists());
    }

    #[test]
    fn a_cap_takes_stale_kernels_then_the_oldest_runs() {
        let c = cache("cap");
        write(&c.0.join("runs/vmtest-2/console.log"), 64 << 10);
        write(&c.0.join("runs/ci-3/ci-times.json"), 4 << 10);
        let old = SystemTime::now() - Duration::from_secs(3600);
        fs::File::open(c.0.join("runs/vmtest-2"))
            .unwrap()
            .set_modified(old)
            .unwrap();
        let total = total(&parts(&c.0));
        let stale = [c.0.join("sources/linux-1/gone")];
        let keep = c.0.join("runs/ci-3");
        assert!(cap_list(&c.0, total, total, &stale, &keep).is_empty());
        // 60K under the total: the stale kernel (44K with its directories)
        // is not enough, and the oldest run goes too.
        let list = cap_list(&c.0, total, total - (60 << 10), &stale, &keep);
        assert_eq!(list, [stale[0].clone(), c.0.join("runs/vmtest-2")]);
        // Nothing is enough: everything but the run being kept goes.
        let list = cap_list(&c.0, total, 1, &stale, &keep);
        assert_eq!(list.len(), 3, "{list:?}");
        assert!(!list.contains(&keep));
    }

    #[test]
    fn a_trim_leaves_a_tree_another_run_holds() {
        let c = cache("held");
        let mut other = super::super::cache::Cache::open(&c.0).unwrap();
        other.release();
        let held = other.lock_tree("linux-1", "gone").unwrap();
        let week = Duration::from_secs(7 * 86400);
        let keep = c.0.join("runs/none");
        let t = trim(&c.0, &["patched"], week, None, &keep).unwrap();
        assert!(t.removed.is_empty(), "{:?}", t.removed);
        assert!(c.0.join("sources/linux-1/gone").exists());
        drop(held);
        let t = trim(&c.0, &["patched"], week, None, &keep).unwrap();
        assert_eq!(t.removed, [c.0.join("sources/linux-1/gone")]);
    }

    #[test]
    fn sizes_parse_or_name_the_fix() {
        assert_eq!(parse_size("20G").unwrap(), 20 << 30);
        assert_eq!(parse_size("512m").unwrap(), 512 << 20);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        let e = parse_size("lots").unwrap_err().to_string();
        assert!(e.contains("give a size such as 20G"), "{e}");
        assert!(parse_size("0G").is_err());
    }

    #[test]
    fn a_full_disk_is_one_line_naming_the_cache_and_the_fix() {
        let io = std::io::Error::from(std::io::ErrorKind::StorageFull);
        let err = anyhow::Error::new(io).context("writing linux/kernel/bpf/arraymap.c");
        let line = explain_disk_full(Path::new("/tmp"), err).to_string();
        assert!(
            line.starts_with("the kernel cache /tmp is out of space ("),
            "{line}"
        );
        assert!(
            line.contains("free on its disk; writing linux/kernel/bpf/arraymap.c: "),
            "{line}"
        );
        assert!(
            line.contains("): free some with `cargo xtask cache --prune`"),
            "{line}"
        );
        assert!(!line.contains('\n'), "{line}");
        // make's failure, with the compiler's words in the log's tail.
        let make =
            anyhow::anyhow!("building the base kernel failed\nfoo.o: No space left on device");
        assert!(is_disk_full(&make));
        let other = anyhow::anyhow!("building the base kernel failed\nerror: expected ';'");
        let kept = explain_disk_full(Path::new("/tmp"), other).to_string();
        assert!(
            kept.starts_with("building the base kernel failed"),
            "{kept}"
        );
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(512), "512B");
        assert_eq!(human(1536), "1.5K");
        assert_eq!(human(345 << 20), "345M");
        assert_eq!(human(3 * (1 << 30) / 2), "1.5G");
    }
}
