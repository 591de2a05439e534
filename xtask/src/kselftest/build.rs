//! Building the BPF tree's own selftests: `test_progs` from
//! `tools/testing/selftests/bpf` of a kernel tree, with one LLVM
//! (`llvm.rs`) and the BTF of one of our kernels; and the test modules (`bpf_testmod.ko`, ...)
//! once per kernel, because a module's BTF is split against its own
//! kernel's.
//!
//! make runs in a hard-link mirror of the tree (`<source>/kselftest/tree`)
//! and writes its outputs next to the sources, as upstream builds it (the
//! Makefile's dependencies on generated skeletons only hold that way: with
//! an OUTPUT elsewhere every make rebuilds some 250 objects). The mirror
//! keeps those outputs across syncs, and what cannot be built against this
//! kernel's BTF can be left out of it (`unbuildable.rs`) without touching
//! the tree the kernel is built from.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::llvm::Llvm;
use super::runner::Runner;
use super::unbuildable::{self, LeftOut};
use crate::build_orphans::{self, Marker};
use crate::kernel::mirror;
use crate::util::{gone_is_none, last_lines, read_stamp, spawn_tied, write_atomic};

/// The test modules test_progs loads, each a directory of the selftests.
pub const TEST_MODULES: &[&str] = &[
    "bpf_testmod",
    "bpf_test_no_cfi",
    "bpf_test_modorder_x",
    "bpf_test_modorder_y",
];

pub const SELFTESTS_DIR: &str = "tools/testing/selftests/bpf";
/// The mirror make builds in, in a work directory.
pub const TREE: &str = "tree";
/// The file in a work directory that names the tree its mirror is of.
pub const MIRRORED_FROM: &str = "mirrored-from";

/// What a sync of the mirror keeps when the source lacks it: make's
/// outputs, all inside the selftests directory; not a test source the
/// Makefile globs, which a series added and the tree now synced lacks
/// (kept, make would build that test into test_progs again).
pub fn is_output(rel: &Path) -> bool {
    rel.starts_with(SELFTESTS_DIR) && !is_globbed_test_source(rel)
}

/// A `.c` right inside one of the directories whose tests the selftests'
/// Makefile finds by wildcard.
fn is_globbed_test_source(rel: &Path) -> bool {
    let Ok(inside) = rel.strip_prefix(SELFTESTS_DIR) else {
        return false;
    };
    let parts: Vec<&str> = inside.iter().filter_map(|p| p.to_str()).collect();
    matches!(
        parts[..],
        [dir, file] if ["prog_tests", "progs", "map_tests", "verifier"].contains(&dir)
            && file.ends_with(".c")
    )
}

/// A kernel we built: its source tree, its build directory and vmlinux.
#[derive(Debug, Clone)]
pub struct KernelTree {
    pub name: String,
    pub tree: PathBuf,
    pub build_dir: PathBuf,
    pub vmlinux: PathBuf,
}

impl KernelTree {
    /// From the vmlinux of a cache build: `<tree>/_build-*/vmlinux`.
    pub fn from_vmlinux(name: &str, vmlinux: &Path) -> Result<KernelTree> {
        let build_dir = vmlinux
            .parent()
            .with_context(|| format!("{} has no build directory", vmlinux.display()))?;
        let tree = build_dir
            .parent()
            .with_context(|| format!("{} has no tree", build_dir.display()))?;
        Ok(KernelTree {
            name: name.to_string(),
            tree: tree.to_path_buf(),
            build_dir: build_dir.to_path_buf(),
            vmlinux: vmlinux.to_path_buf(),
        })
    }
}

/// 7.3's libarena (the arena library test_progs links) is compiled with
/// the Makefile's BPF_CFLAGS and CLANG_CFLAGS and no `-mcpu`: it takes
/// 32-bit atomics and signed division, which clang 19's default cpu (v1)
/// refuses ("unsupported atomic operation", "unsupported signed
/// division"). `-mcpu=v4` in CLANG_CFLAGS (make expands the reference)
/// reaches it; the test_progs flavors pass their own `-mcpu` after it,
/// and the last one wins, so they build as before.
const CLANG_CFLAGS: &str = "CLANG_CFLAGS=$(CLANG_SYS_INCLUDES) -mcpu=v4";

/// make's command line for test_progs, as data. `KDIR` and
/// `KBUILD_OUTPUT` name the kernel the in-tree test modules are built
/// against (test_progs's build needs them; each kernel gets its own later).
pub fn test_progs_args(
    selftests: &Path,
    btf: &KernelTree,
    runners: &[Runner],
    jobs: usize,
) -> Vec<String> {
    let mut args = vec![
        "-C".into(),
        selftests.display().to_string(),
        format!("-j{jobs}"),
        // Everything that can be built is, so that one pass finds every
        // program this kernel's BTF cannot compile.
        "-k".into(),
        format!("VMLINUX_BTF={}", btf.vmlinux.display()),
        format!("KDIR={}", btf.tree.display()),
        format!("KBUILD_OUTPUT={}", btf.build_dir.display()),
        CLANG_CFLAGS.into(),
    ];
    args.extend(runners.iter().map(|r| r.name().to_string()));
    args
}

/// How the selftests' makes run: their jobs, and the LLVM first on PATH.
#[derive(Debug, Clone, Copy)]
pub struct MakeOptions {
    pub jobs: usize,
    pub llvm: Llvm,
}

/// make's PATH, as data: the LLVM's bin first, where the Makefile finds
/// clang, llc and llvm-strip by their plain names (and clang its ld.lld),
/// then the `inherited` one.
pub fn make_path(llvm: Llvm, inherited: Option<OsString>) -> OsString {
    let mut path = llvm.bin().into_os_string();
    path.push(":");
    path.push(inherited.unwrap_or_else(|| "/usr/bin:/bin".into()));
    path
}

/// make's command line for one test module against one kernel.
pub fn module_args(kernel: &KernelTree, module_dir: &Path, jobs: usize) -> Vec<String> {
    vec![
        "-C".into(),
        kernel.tree.display().to_string(),
        format!("O={}", kernel.build_dir.display()),
        format!("M={}", module_dir.display()),
        format!("-j{jobs}"),
        "modules".into(),
    ]
}

/// test_progs built: the directory that holds it, its BPF objects and
/// helpers, and what was left out of it.
pub struct TestProgs {
    pub out: PathBuf,
    pub left_out: LeftOut,
}

/// How many times make runs, each leaving out what the last could not
/// build: the first finds the programs, a second the tests that load them.
const MAKE_PASSES: usize = 4;

/// Builds test_progs (or finds it up to date) from a mirror of `source`.
pub fn test_progs(
    work: &Path,
    source: &Path,
    (btf, runners): (&KernelTree, &[Runner]),
    make_options: MakeOptions,
) -> Result<TestProgs> {
    if !source.join(SELFTESTS_DIR).join("Makefile").is_file() {
        bail!(
            "{} has no BPF selftests ({SELFTESTS_DIR}/Makefile); use a full kernel tree",
            source.display()
        );
    }
    let tree = work.join(TREE);
    mirror::sync_for_builds_inside(source, &tree, &is_output)
        .with_context(|| format!("mirroring {} for the selftests", source.display()))?;
    write_atomic(
        &work.join(MIRRORED_FROM),
        source.display().to_string().as_bytes(),
    )?;
    let selftests = tree.join(SELFTESTS_DIR);
    let out = selftests.clone();
    let btf_id = identity(&btf.vmlinux)?;
    // The stamp reads the sources where none is ever removed.
    let original = source.join(SELFTESTS_DIR);
    // What failed against this BTF fails again while its source is the
    // same; anything new that fails is found by the passes below.
    let mut left = match load_left_out(work)? {
        Some(l) if l.stamp == stamp(&btf_id, &original, &l)? => l,
        _ => LeftOut::default(),
    };
    let args = test_progs_args(&selftests, btf, runners, make_options.jobs);
    let log = work.join("build.log");
    let llvm = make_options.llvm;
    crate::status!(
        "kselftest",
        "make {} with {} first on PATH (log: {})",
        args.join(" "),
        llvm.bin().display(),
        log.display()
    );
    let started = Instant::now();
    for pass in 1..=MAKE_PASSES {
        remove_left_out(&selftests, &left)?;
        let Err(err) = make(&args, llvm, &log) else {
            break;
        };
        let text = fs::read_to_string(&log)
            .with_context(|| format!("reading make's log {}", log.display()))?;
        if pass == MAKE_PASSES || !leave_out_failures(&selftests, &text, &mut left)? {
            return Err(err.context("building test_progs"));
        }
        left.stamp = stamp(&btf_id, &original, &left)?;
        save_left_out(work, &left)?;
    }
    if let Some(r) = runners.iter().find(|r| !out.join(r.name()).is_file()) {
        bail!(
            "make finished but wrote no {}; see {}",
            r.name(),
            log.display()
        );
    }
    crate::status!("kselftest", "test_progs ready in {:.0?}", started.elapsed());
    Ok(TestProgs {
        out,
        left_out: left,
    })
}

const LEFT_OUT: &str = "left-out.json";

/// The BTF's identity and the contents of the left-out programs.
fn stamp(btf_id: &str, selftests: &Path, left: &LeftOut) -> Result<String> {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(btf_id.as_bytes());
    for (prog, _) in &left.progs {
        let path = selftests.join("progs").join(format!("{prog}.c"));
        h.update(prog.as_bytes());
        // A program that is gone hashes apart from an empty one.
        match gone_is_none(fs::read(&path))
            .with_context(|| format!("reading {}", path.display()))?
        {
            Some(text) => h.update(text),
            None => h.update(b"\0gone"),
        }
    }
    Ok(hex::encode(h.finalize()))
}

/// Writes what was left out into `dir`.
pub fn save_left_out(dir: &Path, left: &LeftOut) -> Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    write_atomic(&dir.join(LEFT_OUT), &serde_json::to_vec_pretty(left)?)
}

/// What the last build left out, if it recorded anything.
pub fn load_left_out(work: &Path) -> Result<Option<LeftOut>> {
    let path = work.join(LEFT_OUT);
    let Some(bytes) =
        gone_is_none(fs::read(&path)).with_context(|| format!("reading {}", path.display()))?
    else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .with_context(|| format!("{} is corrupt; remove it and run again", path.display()))
}

/// Which file, how big, how old: a rebuilt vmlinux is another BTF.
fn identity(path: &Path) -> Result<String> {
    use std::os::unix::fs::MetadataExt;
    let m = fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(format!(
        "{} {} {}.{}",
        path.display(),
        m.size(),
        m.mtime(),
        m.mtime_nsec()
    ))
}

/// Adds what make could not build to `left`; false if it found nothing
/// to leave out (the failure is another kind, and is the user's to see).
fn leave_out_failures(selftests: &Path, log: &str, left: &mut LeftOut) -> Result<bool> {
    let (progs, tests) = unbuildable::failures(log);
    let makefile = fs::read_to_string(selftests.join("Makefile"))?;
    let sources = test_sources(selftests)?;
    let mut found = false;
    for (prog, why) in progs {
        if left.progs.iter().any(|(p, _)| *p == prog) {
            continue;
        }
        left.tests
            .extend(unbuildable::tests_using(&prog, &makefile, &sources));
        crate::status!("kselftest", "leaving out {prog}.bpf.o: {why}");
        left.progs.push((prog, why));
        found = true;
    }
    for (test, why) in tests {
        if left.tests.insert(test.clone()) {
            crate::status!("kselftest", "leaving out prog_tests/{test}.c: {why}");
            left.test_errors.push((test, why));
            found = true;
        }
    }
    Ok(found)
}

/// Every `prog_tests/NAME.c` as (NAME, text).
fn test_sources(selftests: &Path) -> Result<Vec<(String, String)>> {
    let dir = selftests.join("prog_tests");
    let mut out = Vec::new();
    for entry in fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if let (Some(name), Some("c")) = (
            path.file_stem().and_then(|s| s.to_str()),
            path.extension().and_then(|s| s.to_str()),
        ) {
            out.push((name.to_string(), fs::read_to_string(&path)?));
        }
    }
    Ok(out)
}

/// Removes the left-out sources from the mirror (links only: the tree
/// they mirror keeps them).
fn remove_left_out(selftests: &Path, left: &LeftOut) -> Result<()> {
    let progs = left.progs.iter().map(|(p, _)| format!("progs/{p}.c"));
    let tests = left.tests.iter().map(|t| format!("prog_tests/{t}.c"));
    for rel in progs.chain(tests) {
        let path = selftests.join(rel);
        if path.exists() {
            fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
        }
    }
    drop_stale_test_list(selftests)
}

/// make does not remake the generated list of tests when a source goes
/// (or comes back), and a test_progs listing a test it lacks refuses to
/// start: a list that no longer matches the sources is removed.
fn drop_stale_test_list(selftests: &Path) -> Result<()> {
    let list = selftests.join("prog_tests/tests.h");
    let Some(text) = gone_is_none(fs::read_to_string(&list))
        .with_context(|| format!("reading {}", list.display()))?
    else {
        return Ok(());
    };
    let mut want: Vec<String> = test_sources(selftests)?
        .iter()
        .flat_map(|(_, text)| unbuildable::defined_tests(text))
        .collect();
    let mut listed = unbuildable::listed_tests(&text);
    // As sets: the Makefile's `sort` follows the locale.
    want.sort();
    listed.sort();
    if listed != want {
        fs::remove_file(&list).with_context(|| format!("removing {}", list.display()))?;
    }
    Ok(())
}

/// Builds the test modules against `kernel`, in copies of their sources of
/// its own under `work/modules/<kernel>/`; returns the .ko files.
pub fn modules(
    work: &Path,
    source: &Path,
    kernel: &KernelTree,
    make_options: MakeOptions,
) -> Result<Vec<PathBuf>> {
    let started = Instant::now();
    let mut built = Vec::new();
    for module in TEST_MODULES {
        let src = source.join(SELFTESTS_DIR).join(module);
        if !src.is_dir() {
            continue;
        }
        let dir = work.join("modules").join(&kernel.name).join(module);
        copy_changed(&src, &dir)?;
        // kbuild does not relink an out-of-tree module when vmlinux
        // changes, and a module whose BTF was split against another
        // vmlinux is refused at load ("failed to validate module BTF").
        let stamp = dir.join(".bpflab-vmlinux");
        let vmlinux = identity(&kernel.vmlinux)?;
        if read_stamp(&stamp)? != vmlinux {
            let _ = fs::remove_file(dir.join(format!("{module}.ko")));
        }
        let log = dir.join("build.log");
        let args = module_args(kernel, &dir, make_options.jobs);
        make(&args, make_options.llvm, &log)
            .with_context(|| format!("building {module}.ko for the {} kernel", kernel.name))?;
        let ko = dir.join(format!("{module}.ko"));
        if !ko.is_file() {
            bail!("make wrote no {}; see {}", ko.display(), log.display());
        }
        write_atomic(&stamp, vmlinux.as_bytes())?;
        built.push(ko);
    }
    crate::status!(
        &kernel.name,
        "{} test module(s) built in {:.0?}",
        built.len(),
        started.elapsed()
    );
    Ok(built)
}

/// A directory the runners run in on one kernel: links to everything in
/// `out` but the modules, and that kernel's own modules (test_progs loads
/// them from its working directory). A test_progs flavor changes into its
/// own subdirectory (`no_alu32/`, `cpuv4/`), made the same way.
pub fn run_dir(runs_in: &Path, out: &Path, kernel: &str, modules: &[PathBuf]) -> Result<PathBuf> {
    let dir = runs_in.join("run").join(kernel);
    if dir.exists() {
        fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let flavors: Vec<&str> = Runner::ALL.iter().filter_map(|r| r.flavor_dir()).collect();
    link_with_modules(out, &dir, modules, &flavors)?;
    for flavor in flavors {
        if out.join(flavor).is_dir() {
            link_with_modules(&out.join(flavor), &dir.join(flavor), modules, &[])?;
        }
    }
    Ok(dir)
}

/// `dst` made of links to `src`'s entries, but for `modules` (copied in)
/// and the subdirectories `own` (left to the caller).
fn link_with_modules(src: &Path, dst: &Path, modules: &[PathBuf], own: &[&str]) -> Result<()> {
    fs::create_dir_all(dst).with_context(|| format!("creating {}", dst.display()))?;
    let names: Vec<_> = modules.iter().filter_map(|m| m.file_name()).collect();
    for entry in fs::read_dir(src).with_context(|| format!("reading {}", src.display()))? {
        let entry = entry?;
        let name = entry.file_name();
        if names.contains(&name.as_os_str()) || own.iter().any(|o| name == *o) {
            continue;
        }
        std::os::unix::fs::symlink(entry.path(), dst.join(&name)).with_context(|| {
            format!("linking {} into {}", entry.path().display(), dst.display())
        })?;
    }
    for m in modules {
        let name = m.file_name().context("a module without a name")?;
        fs::copy(m, dst.join(name)).with_context(|| format!("copying {}", m.display()))?;
    }
    Ok(())
}

/// Copies the files of `src` into `dst`, leaving alone those already the
/// same: an unchanged source keeps its mtime, and kbuild its objects.
fn copy_changed(src: &Path, dst: &Path) -> Result<()> {
    fs::create_dir_all(dst).with_context(|| format!("creating {}", dst.display()))?;
    for entry in fs::read_dir(src).with_context(|| format!("reading {}", src.display()))? {
        let entry = entry?;
        if !entry.file_type()?.is_file() {
            continue;
        }
        let to = dst.join(entry.file_name());
        let new = fs::read(entry.path())?;
        if fs::read(&to).ok().as_deref() != Some(new.as_slice()) {
            fs::write(&to, new).with_context(|| format!("writing {}", to.display()))?;
        }
    }
    Ok(())
}

/// make with `llvm` first on PATH, its output in `log`; a failure
/// carries the log's last lines.
fn make(args: &[String], llvm: Llvm, log: &Path) -> Result<()> {
    // Its marker sits beside its log: each make of ours logs into a
    // directory of its own.
    let marker = Marker::new(log.with_file_name(".bpflab-building"));
    let what = format!("make logging to {}", log.display());
    if let Some(interrupted) = marker.recover(&what)? {
        crate::status!(
            "kselftest",
            "the last {what} was interrupted: stopped {} process(es) it left running",
            interrupted.stopped
        );
    }
    let file = fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let stdout = file.try_clone()?;
    let path = make_path(llvm, std::env::var_os("PATH"));
    let tag = marker.begin()?;
    let spawned = spawn_tied(
        Command::new("make")
            .args(args)
            .env("PATH", path)
            .env(build_orphans::TAG_VAR, &tag)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(file),
    );
    // A make that never started left nothing to recover from.
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            marker.end()?;
            return Err(e).context("starting make");
        }
    };
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    marker.end()?;
    if !status.success() {
        let text = fs::read_to_string(log).unwrap_or_default();
        bail!(
            "make {status}; full log: {}\n{}",
            log.display(),
            last_lines(&text, 20)
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel() -> KernelTree {
        KernelTree::from_vmlinux("patched", Path::new("/c/s/patched/_build-default/vmlinux"))
            .unwrap()
    }

    #[test]
    fn what_was_left_out_is_read_back_or_refused() {
        let t = crate::util::tempdir();
        assert!(load_left_out(&t).unwrap().is_none());
        fs::write(t.join(LEFT_OUT), "{").unwrap();
        let err = format!("{:#}", load_left_out(&t).unwrap_err());
        assert!(err.contains("is corrupt; remove it"), "{err}");
        let id = "vmlinux 1 2.3";
        let left = LeftOut::default();
        assert_ne!(
            stamp(id, &t, &left).unwrap(),
            stamp("vmlinux 1 2.4", &t, &left).unwrap()
        );
        fs::remove_dir_all(t).unwrap();
    }

    #[test]
    fn a_kernel_s_tree_and_build_come_from_its_vmlinux() {
        let k = kernel();
        assert_eq!(k.tree, Path::new("/c/s/patched"));
        assert_eq!(k.build_dir, Path::new("/c/s/patched/_build-default"));
    }

    #[test]
    fn a_test_source_the_tree_lacks_is_no_output_to_keep() {
        let at = |p: &str| Path::new(SELFTESTS_DIR).join(p);
        assert!(!is_output(&at("prog_tests/array_mmap_lazy.c")));
        assert!(!is_output(&at("progs/array_mmap_lazy.c")));
        assert!(is_output(&at("array_mmap_lazy.skel.h")));
        assert!(is_output(&at("prog_tests/tests.h")));
        assert!(is_output(&at("test_kmods/bpf_testmod.mod.c")));
        assert!(is_output(&at("disasm.c")));
        assert!(!is_output(Path::new("kernel/bpf/arraymap.c")));
    }

    #[test]
    fn test_progs_is_built_out_of_tree_against_one_kernel_s_btf() {
        let runners = [Runner::TestProgs, Runner::CpuV4, Runner::Maps];
        let args = test_progs_args(Path::new("/t/sel"), &kernel(), &runners, 3);
        assert_eq!(args[..4], ["-C", "/t/sel", "-j3", "-k"]);
        assert!(!args.iter().any(|a| a.starts_with("OUTPUT=")), "{args:?}");
        for want in [
            "VMLINUX_BTF=/c/s/patched/_build-default/vmlinux",
            "KDIR=/c/s/patched",
            "KBUILD_OUTPUT=/c/s/patched/_build-default",
            "CLANG_CFLAGS=$(CLANG_SYS_INCLUDES) -mcpu=v4",
        ] {
            assert!(args.contains(&want.to_string()), "{want} in {args:?}");
        }
        assert_eq!(
            args[args.len() - 3..],
            ["test_progs", "test_progs-cpuv4", "test_maps"]
        );
    }

    #[test]
    fn make_finds_the_chosen_llvm_first_on_path() {
        let path = make_path(Llvm(18), Some("/usr/local/bin:/usr/bin".into()));
        assert_eq!(path, "/usr/lib/llvm-18/bin:/usr/local/bin:/usr/bin");
        let path = make_path(Llvm(19), None);
        assert_eq!(path, "/usr/lib/llvm-19/bin:/usr/bin:/bin");
    }

    #[test]
    fn a_module_is_built_against_its_kernel_s_tree_and_build() {
        let args = module_args(&kernel(), Path::new("/w/modules/patched/bpf_testmod"), 2);
        assert_eq!(
            args,
            [
                "-C",
                "/c/s/patched",
                "O=/c/s/patched/_build-default",
                "M=/w/modules/patched/bpf_testmod",
                "-j2",
                "modules"
            ]
        );
    }

    #[test]
    fn the_run_dir_has_the_kernel_s_own_modules() {
        let t = crate::util::tempdir();
        let out = t.join("out");
        fs::create_dir_all(out.join("no_alu32")).unwrap();
        fs::write(out.join("test_progs"), "elf").unwrap();
        fs::write(out.join("bpf_testmod.ko"), "base's").unwrap();
        fs::write(out.join("no_alu32/bpf_testmod.ko"), "base's").unwrap();
        fs::write(out.join("no_alu32/x.bpf.o"), "bpf").unwrap();
        let own = t.join("bpf_testmod.ko");
        fs::write(&own, "patched's").unwrap();
        let dir = run_dir(&t, &out, "patched", std::slice::from_ref(&own)).unwrap();
        assert_eq!(
            fs::read_to_string(dir.join("bpf_testmod.ko")).unwrap(),
            "patched's"
        );
        assert_eq!(
            fs::read_link(dir.join("test_progs")).unwrap(),
            out.join("test_progs")
        );
        // A flavor's own directory, where it loads the modules from too.
        assert!(!dir.join("no_alu32").is_symlink());
        assert_eq!(
            fs::read_to_string(dir.join("no_alu32/bpf_testmod.ko")).unwrap(),
            "patched's"
        );
        assert!(dir.join("no_alu32/x.bpf.o").is_symlink());
        // Made afresh each run: nothing of an earlier run's is left.
        fs::write(dir.join("stale"), "").unwrap();
        let dir = run_dir(&t, &out, "patched", &[own]).unwrap();
        assert!(!dir.join("stale").exists());
    }

    #[test]
    fn unchanged_sources_keep_their_copies() {
        let t = crate::util::tempdir();
        let (src, dst) = (t.join("src"), t.join("dst"));
        fs::create_dir_all(&src).unwrap();
        fs::write(src.join("m.c"), "int x;").unwrap();
        copy_changed(&src, &dst).unwrap();
        let before = fs::metadata(dst.join("m.c")).unwrap().modified().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        copy_changed(&src, &dst).unwrap();
        assert_eq!(
            fs::metadata(dst.join("m.c")).unwrap().modified().unwrap(),
            before
        );
        fs::write(src.join("m.c"), "int y;").unwrap();
        copy_changed(&src, &dst).unwrap();
        assert_eq!(fs::read_to_string(dst.join("m.c")).unwrap(), "int y;");
    }
}
