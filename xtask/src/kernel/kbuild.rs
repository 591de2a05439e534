//! Running the kernel's make out of tree, incrementally, through ccache,
//! with a log, progress (see progress.rs) and recovery from an interrupted
//! build.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context, Result};

use super::kconfig;
use super::progress::{self, LogCounter, Progress};
use crate::build_orphans::{self, Marker};
use crate::util::{gone_is_none, last_lines, on_path, read_stamp, spawn_tied, write_atomic};

const BUILDING: &str = ".bpflab-building";
const BUILT: &str = ".bpflab-built";
const CONFIGURED: &str = ".bpflab-configured";

pub struct BuildRequest<'a> {
    /// Label for status lines ("patched", "base-debug", ...).
    pub name: &'a str,
    pub tree: &'a Path,
    /// A direct child of `tree`, so kbuild uses relative paths (srctree
    /// "..") and ccache hits across the base and patched trees.
    pub build_dir: PathBuf,
    /// What the fragments are merged onto.
    pub base: kconfig::ConfigBase,
    pub fragments: Vec<kconfig::Fragment>,
    /// Changes whenever the tree's content does.
    pub tree_key: String,
    pub ccache_dir: PathBuf,
    pub jobs: usize,
}

pub struct Built {
    pub bzimage: PathBuf,
    pub vmlinux: PathBuf,
    pub config: PathBuf,
    pub log: PathBuf,
    /// What of the tree's own config this kernel does not have, one line
    /// per option, naming it and its fragment (see `kconfig::Origin`).
    pub config_not_taken: Vec<String>,
}

pub fn build(req: &BuildRequest) -> Result<Built> {
    fs::create_dir_all(&req.build_dir)
        .with_context(|| format!("creating {}", req.build_dir.display()))?;
    recover_interrupted(&req.build_dir)?;
    let adapted = kconfig::adapt(req.tree, &req.fragments, &req.build_dir.join("fragments"))?;
    let fragments = adapted.fragments;
    let left_out: Vec<String> = adapted
        .left_out
        .iter()
        .map(|l| format!("{l}: not an option of this tree"))
        .collect();
    let frag_hash = kconfig::fragments_hash(&fragments)?;
    let config = req.build_dir.join(".config");
    let log = req.build_dir.join("build.log");
    // A tree of another kernel version needs a fresh config too.
    // (The lean kernels' keys predate the base: unchanged, they keep
    // their builds.)
    let base_key = match req.base {
        kconfig::ConfigBase::AllNo => String::new(),
        other => format!("{}\n", other.name()),
    };
    let config_key = format!("{base_key}{frag_hash}\n{}", tree_version(req.tree)?);
    configure_if_changed(req, &fragments, &config_key, &left_out)?;
    let cc = if on_path("ccache") {
        "ccache gcc"
    } else {
        "gcc"
    };
    let stamp = format!(
        "{}\n{base_key}{frag_hash}\n{cc}\n{}\n",
        req.tree_key,
        compiler_version()
    );
    let bzimage = req.build_dir.join("arch/x86/boot/bzImage");
    let vmlinux = req.build_dir.join("vmlinux");
    let mut built = Built {
        bzimage: bzimage.clone(),
        vmlinux: vmlinux.clone(),
        config,
        log: log.clone(),
        config_not_taken: left_out,
    };
    if read_stamp(&req.build_dir.join(BUILT))? == stamp && bzimage.exists() && vmlinux.exists() {
        crate::status!(req.name, "up to date: {}", bzimage.display());
        let lost = kconfig::check_survived(req.tree, &fragments, &built.config)?;
        built.config_not_taken.extend(not_survived(lost));
        return Ok(built);
    }
    let _ = fs::remove_file(req.build_dir.join(BUILT));
    let marker = Marker::new(req.build_dir.join(BUILDING));
    let tag = marker.begin()?;
    let made = run_make(req, cc, &log, &tag);
    // A make that ran to an error wrote only complete files: only a killed
    // one leaves the marker for the next run to clean up after.
    marker.end()?;
    made?;
    // syncconfig may have dropped options make saw differently.
    let lost = kconfig::check_survived(req.tree, &fragments, &built.config)?;
    built.config_not_taken.extend(not_survived(lost));
    write_atomic(&req.build_dir.join(BUILT), stamp.as_bytes())?;
    Ok(built)
}

/// Writes the .config unless the one there was made from `config_key`.
fn configure_if_changed(
    req: &BuildRequest,
    fragments: &[kconfig::Fragment],
    config_key: &str,
    left_out: &[String],
) -> Result<()> {
    let stamp = req.build_dir.join(CONFIGURED);
    if read_stamp(&stamp)? == config_key && req.build_dir.join(".config").exists() {
        return Ok(());
    }
    let started = Instant::now();
    crate::status!(
        req.name,
        "configuring ({} + {})",
        req.base.name(),
        names(fragments)
    );
    let lost = kconfig::configure(
        req.tree,
        &req.build_dir,
        req.base,
        fragments,
        &req.build_dir.join("config.log"),
    )?;
    // As BPF CI's merge_config.sh warns of them: named, not refused.
    for line in left_out.iter().chain(&not_survived(lost)) {
        crate::status!(req.name, "the tree's own config: {line}");
    }
    write_atomic(&stamp, config_key.as_bytes())?;
    crate::status!(req.name, "configured in {:.1?}", started.elapsed());
    Ok(())
}

/// `check_survived`'s report, each line saying what happened.
fn not_survived(lost: Vec<String>) -> Vec<String> {
    lost.into_iter()
        .map(|l| format!("{l}: did not survive olddefconfig"))
        .collect()
}

fn names(fragments: &[kconfig::Fragment]) -> String {
    fragments
        .iter()
        .map(kconfig::Fragment::name)
        .collect::<Vec<_>>()
        .join(" + ")
}

/// "VERSION.PATCHLEVEL.SUBLEVEL" from the head of the tree's Makefile.
fn tree_version(tree: &Path) -> Result<String> {
    let makefile = tree.join("Makefile");
    let head = fs::read_to_string(&makefile)
        .with_context(|| format!("reading the kernel version from {}", makefile.display()))?;
    let field = |name: &str| {
        head.lines()
            .find_map(|l| {
                l.strip_prefix(name)?
                    .trim_start()
                    .strip_prefix('=')
                    .map(str::trim)
            })
            .unwrap_or("?")
            .to_string()
    };
    Ok(format!(
        "{}.{}.{}",
        field("VERSION"),
        field("PATCHLEVEL"),
        field("SUBLEVEL")
    ))
}

fn compiler_version() -> String {
    Command::new("gcc")
        .arg("--version")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
                .to_string()
        })
        .unwrap_or_default()
}

/// A build killed half way may leave truncated objects that look newer
/// than their sources, and make's children still writing more. Stop those,
/// then remove everything written after the interrupted build started:
/// make (with ccache) redoes just that.
fn recover_interrupted(build_dir: &Path) -> Result<()> {
    let marker = Marker::new(build_dir.join(BUILDING));
    let what = format!("build in {}", build_dir.display());
    let Some(interrupted) = marker.recover(&what)? else {
        return Ok(());
    };
    let removed = remove_newer_than(build_dir, interrupted.started).with_context(|| {
        format!(
            "cleaning up after the interrupted build in {}",
            build_dir.display()
        )
    })?;
    crate::status!(
        "build",
        "an earlier build in {} was interrupted: stopped {} process(es) it left running, \
         removed {removed} file(s) it wrote, rebuilding them",
        build_dir.display(),
        interrupted.stopped
    );
    marker.end()
}

fn remove_newer_than(dir: &Path, since: SystemTime) -> Result<usize> {
    let mut removed = 0;
    // Files that vanish under the walk (a compiler's temporaries) are fine.
    let Some(entries) = gone_is_none(fs::read_dir(dir))? else {
        return Ok(0);
    };
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some(ft) = gone_is_none(entry.file_type())? else {
            continue;
        };
        if ft.is_dir() {
            removed += remove_newer_than(&entry.path(), since)?;
        } else if !name.to_string_lossy().starts_with(".bpflab-") && name != ".config" {
            removed += usize::from(remove_if_newer(&entry.path(), since)?);
        }
    }
    Ok(removed)
}

/// Removes `path` if it was modified at or after `since`; false when it is
/// older or already gone.
fn remove_if_newer(path: &Path, since: SystemTime) -> io::Result<bool> {
    match gone_is_none(fs::symlink_metadata(path))? {
        Some(meta) if meta.modified()? >= since => {
            Ok(gone_is_none(fs::remove_file(path))?.is_some())
        }
        _ => Ok(false),
    }
}

/// The make command line, as data.
pub fn make_args(build_dir_name: &str, jobs: usize, cc: &str) -> Vec<String> {
    vec![
        format!("O={build_dir_name}"),
        format!("-j{jobs}"),
        format!("CC={cc}"),
        "KBUILD_BUILD_USER=bpflab".into(),
        "KBUILD_BUILD_HOST=bpflab".into(),
        "bzImage".into(),
        // Module.symvers and modules.order, which out-of-tree modules
        // (the selftests' bpf_testmod.ko) are built against.
        "modules".into(),
        // vmlinux-gdb.py and the lx-* helpers, for `--gdb` (only the
        // symlink without CONFIG_GDB_SCRIPTS).
        "scripts_gdb".into(),
    ]
}

fn run_make(req: &BuildRequest, cc: &str, log: &Path, tag: &str) -> Result<()> {
    let dir_name = req
        .build_dir
        .file_name()
        .context("build directory has no name")?
        .to_string_lossy()
        .into_owned();
    let args = make_args(&dir_name, req.jobs, cc);
    crate::status!(req.name, "make {} (log: {})", args.join(" "), log.display());
    let log_file = fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let started = Instant::now();
    // make dies with the harness (see spawn_tied).
    let mut child = spawn_tied(
        Command::new("make")
            .args(&args)
            .current_dir(req.tree)
            .env("CCACHE_DIR", &req.ccache_dir)
            .env("CCACHE_MAXSIZE", "5G")
            // With debug info (BTF needs it) ccache hashes the working
            // directory, which differs between the base and patched trees:
            // without this, patched would miss every object base built.
            .env("CCACHE_NOHASHDIR", "true")
            .env(build_orphans::TAG_VAR, tag)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file),
    )
    .context("starting make")?;
    let mut counter = LogCounter::new(log);
    let mut progress = Progress::start(req.name, progress::reference(&req.build_dir));
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        std::thread::sleep(Duration::from_millis(500));
        progress.update(counter.poll());
    };
    progress.finish();
    let text = fs::read_to_string(log).unwrap_or_default();
    if !status.success() {
        let errors = first_errors(&text, 3);
        let (first, rest) = match errors.split_first() {
            Some((first, rest)) => (format!(": {first}"), rest.to_vec()),
            None => (String::new(), vec![last_lines(&text, 25)]),
        };
        let rest: String = rest.iter().map(|r| format!("{r}\n")).collect();
        bail!(
            "building the {} kernel failed ({status}){first}\n{rest}full log: {}",
            req.name,
            log.display(),
        );
    }
    let counted = counter.poll();
    progress::record(&req.build_dir, counted)?;
    progress::record_time(&req.build_dir, started.elapsed(), counted)?;
    crate::status!(req.name, "built in {:.0?}", started.elapsed());
    Ok(())
}

/// The first `n` errors of a make log, each its compiler's or linker's
/// line with the lines of context that follow it (the source line and
/// caret of gcc): what a build failure shows first, since with parallel
/// jobs the log's tail is other objects' output.
fn first_errors(log: &str, n: usize) -> Vec<String> {
    let lines: Vec<&str> = log.lines().collect();
    let is_error = |l: &str| {
        l.contains(": error: ")
            || l.contains(": fatal error: ")
            || l.contains("undefined reference to")
            || l.starts_with("ERROR: ")
    };
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if found.len() == n {
            break;
        }
        if !is_error(line) {
            continue;
        }
        // gcc's context: the source line and its caret, indented with '|'.
        let context = lines[i + 1..]
            .iter()
            .take(3)
            .take_while(|l| {
                l.trim_start()
                    .starts_with(|c: char| c.is_ascii_digit() || c == '|')
            })
            .copied();
        found.push(
            std::iter::once(*line)
                .chain(context)
                .collect::<Vec<_>>()
                .join("\n"),
        );
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_build_leads_with_its_compilers_first_errors() {
        let log = "  CC      kernel/bpf/syscall.o
kernel/bpf/arraymap.c: In function 'array_map_fill':
kernel/bpf/arraymap.c:739:15: error: implicit declaration of function 'pte_offset_map_nolock' [-Werror=implicit-function-declaration]
  739 |         pte = pte_offset_map_nolock(mm, pmd, addr, &ptl);
      |               ^~~~~~~~~~~~~~~~~~~~~
  CC      mm/memory.o
kernel/bpf/arraymap.c:801:1: error: expected ';' before '}' token
make[4]: *** [scripts/Makefile.build:229: kernel/bpf/arraymap.o] Error 1
ld: vmlinux.o: in function `f': undefined reference to `g'
";
        let errors = first_errors(log, 2);
        assert_eq!(errors.len(), 2);
        assert!(errors[0].starts_with("kernel/bpf/arraymap.c:739:15: error: implicit declaration"));
        assert!(
            errors[0].ends_with("^~~~~~~~~~~~~~~~~~~~~"),
            "{}",
            errors[0]
        );
        assert_eq!(
            errors[1],
            "kernel/bpf/arraymap.c:801:1: error: expected ';' before '}' token"
        );
        assert_eq!(first_errors(log, 5).len(), 3);
        assert!(first_errors("make: *** [Makefile] Error 2\n", 3).is_empty());
    }

    #[test]
    fn make_args_are_out_of_tree_and_parallel() {
        let args = make_args("_build-default", 3, "ccache gcc");
        assert_eq!(args[0], "O=_build-default");
        assert_eq!(args[1], "-j3");
        assert_eq!(args[2], "CC=ccache gcc");
        assert!(args.ends_with(&["bzImage".into(), "modules".into(), "scripts_gdb".into()]));
    }

    #[test]
    fn interrupted_build_output_is_removed() {
        let t = crate::util::tempdir();
        fs::create_dir_all(t.join("kernel/bpf")).unwrap();
        fs::write(t.join("kernel/bpf/old.o"), "complete").unwrap();
        fs::write(t.join(".config"), "CONFIG_X=y").unwrap();
        let old = SystemTime::now() - Duration::from_secs(3600);
        for f in ["kernel/bpf/old.o", ".config"] {
            fs::File::options()
                .write(true)
                .open(t.join(f))
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
        fs::write(t.join(BUILDING), "").unwrap();
        fs::write(t.join("kernel/bpf/half.o"), "trunc").unwrap();
        recover_interrupted(&t).unwrap();
        assert!(t.join("kernel/bpf/old.o").exists());
        assert!(t.join(".config").exists());
        assert!(!t.join("kernel/bpf/half.o").exists());
        assert!(!t.join(BUILDING).exists());
        fs::remove_dir_all(t).unwrap();
    }

    #[test]
    fn a_file_gone_before_its_removal_is_not_an_error() {
        let t = crate::util::tempdir();
        let since = SystemTime::now() - Duration::from_secs(60);
        assert!(!remove_if_newer(&t.join("vanished.o.d"), since).unwrap());
        fs::write(t.join("new.o"), "").unwrap();
        assert!(remove_if_newer(&t.join("new.o"), since).unwrap());
        assert_eq!(
            remove_newer_than(&t.join("vanished-dir"), since).unwrap(),
            0
        );
        fs::remove_dir_all(t).unwrap();
    }
}
