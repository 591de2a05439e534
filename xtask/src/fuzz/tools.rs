//! libbpf and bpftool built from the kernel tree under test, for the
//! skeleton client: a hard-link mirror of the tree (`<source>/fuzz/tree`,
//! never the tree itself), static libbpf installed with its headers, and
//! bpftool, each with its objects outside the mirror. A stamp of the
//! mirror's contents skips the build while nothing changed.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

use crate::kernel::mirror;
use crate::util::{last_lines, read_stamp, spawn_tied, write_atomic};

/// What the client is built with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tools {
    pub libbpf_include: PathBuf,
    pub libbpf_archive: PathBuf,
    pub bpftool: PathBuf,
}

/// The tools' places under `work` (`<source>/fuzz`).
pub fn layout(work: &Path) -> Tools {
    let install = work.join("libbpf-install");
    Tools {
        libbpf_include: install.join("include"),
        libbpf_archive: install.join("lib64/libbpf.a"),
        bpftool: work.join("bpftool/bpftool"),
    }
}

/// make's command lines, as data: libbpf (static, installed), bpftool.
pub fn make_commands(tree: &Path, work: &Path, jobs: usize) -> Vec<Vec<String>> {
    let d = |p: &Path| p.display().to_string();
    vec![
        vec![
            "-C".into(),
            d(&tree.join("tools/lib/bpf")),
            format!("-j{jobs}"),
            "BUILD_STATIC_ONLY=1".into(),
            format!("OUTPUT={}/", d(&work.join("libbpf"))),
            format!("DESTDIR={}", d(&work.join("libbpf-install"))),
            "prefix=".into(),
            "install".into(),
        ],
        vec![
            "-C".into(),
            d(&tree.join("tools/bpf/bpftool")),
            format!("-j{jobs}"),
            format!("OUTPUT={}/", d(&work.join("bpftool"))),
        ],
    ]
}

/// Builds (or finds up to date) libbpf and bpftool from `source` (a
/// pristine tree) in `work`.
pub fn build(source: &Path, work: &Path, jobs: usize) -> Result<Tools> {
    let tree = work.join("tree");
    // make writes only under OUTPUT, but generated headers may land in
    // tools/: left alone by the sync, as the selftests' own are.
    let outputs = |p: &Path| p.starts_with("tools");
    let synced = mirror::sync_for_builds_inside(source, &tree, &outputs)
        .with_context(|| format!("mirroring {} for libbpf and bpftool", source.display()))?;
    let tools = layout(work);
    let stamp_path = work.join(".bpflab-tools-built");
    let stamp = format!("{}\n", synced.fingerprint);
    let built = [&tools.libbpf_archive, &tools.bpftool]
        .iter()
        .all(|p| p.is_file());
    if built && read_stamp(&stamp_path)? == stamp {
        return Ok(tools);
    }
    let _ = fs::remove_file(&stamp_path);
    let log = work.join("tools-build.log");
    crate::status!(
        "fuzz",
        "building libbpf and bpftool from the tree (log: {})",
        log.display()
    );
    for dir in ["libbpf", "bpftool", "libbpf-install"] {
        fs::create_dir_all(work.join(dir))
            .with_context(|| format!("creating {}", work.join(dir).display()))?;
    }
    for args in make_commands(&tree, work, jobs) {
        make(&args, &log)?;
    }
    for p in [&tools.libbpf_archive, &tools.bpftool] {
        if !p.is_file() {
            bail!(
                "make finished but wrote no {}; see {}",
                p.display(),
                log.display()
            );
        }
    }
    write_atomic(&stamp_path, stamp.as_bytes())?;
    Ok(tools)
}

fn make(args: &[String], log: &Path) -> Result<()> {
    let file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("opening {}", log.display()))?;
    let status = spawn_tied(
        Command::new("make")
            .args(args)
            .stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file),
    )
    .context("starting make")?
    .wait()
    .context("waiting for make")?;
    if !status.success() {
        let text = fs::read_to_string(log).unwrap_or_default();
        bail!(
            "make {} failed; see {}:\n{}",
            args.join(" "),
            log.display(),
            last_lines(&text, 15)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libbpf_is_static_and_installed_and_bpftool_builds_outside_the_tree() {
        let cmds = make_commands(Path::new("/c/fuzz/tree"), Path::new("/c/fuzz"), 3);
        assert_eq!(
            cmds[0],
            [
                "-C",
                "/c/fuzz/tree/tools/lib/bpf",
                "-j3",
                "BUILD_STATIC_ONLY=1",
                "OUTPUT=/c/fuzz/libbpf/",
                "DESTDIR=/c/fuzz/libbpf-install",
                "prefix=",
                "install"
            ]
        );
        assert_eq!(
            cmds[1],
            [
                "-C",
                "/c/fuzz/tree/tools/bpf/bpftool",
                "-j3",
                "OUTPUT=/c/fuzz/bpftool/"
            ]
        );
        let t = layout(Path::new("/c/fuzz"));
        assert_eq!(
            t.libbpf_archive,
            Path::new("/c/fuzz/libbpf-install/lib64/libbpf.a")
        );
        assert_eq!(t.bpftool, Path::new("/c/fuzz/bpftool/bpftool"));
    }
}
