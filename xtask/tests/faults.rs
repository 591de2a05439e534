//! The harness's own failure paths, each provoked for real: these boot
//! kernels and run builds, so they are ignored by a plain `cargo test` and
//! run by `cargo xtask ci` (`cargo test -p xtask --test faults -- --ignored
//! --test-threads=1`: one guest at a time, as their time limits assume).
//! They need the base and patched kernels built (`cargo xtask build-kernel`).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{run_to_end, wait_with_deadline};

const XTASK: &str = env!("CARGO_BIN_EXE_xtask");
const TESTS_FAILED: i32 = 1;
const VM_FAILED: i32 = 2;
const SETUP_FAILED: i32 = 3;

fn xtask(args: &[&str]) -> Command {
    let mut c = Command::new(XTASK);
    c.args(args).stdin(Stdio::null());
    c
}

/// Runs xtask to the end, or fails the test if it takes over 10 minutes;
/// its stdout and stderr as one text.
fn run(args: &[&str]) -> (i32, String) {
    let r = run_to_end(xtask(args), Duration::from_secs(600));
    (r.code, format!("{}{}", r.stdout, r.stderr))
}

/// The manifest of the already-built kernels.
fn manifest() -> serde_json::Value {
    let out = xtask(&["build-kernel", "--json"])
        .output()
        .expect("build-kernel --json");
    assert!(
        out.status.success(),
        "build-kernel failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("manifest JSON")
}

fn kernel_path(m: &serde_json::Value, name: &str, field: &str) -> PathBuf {
    let k = m["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == name)
        .unwrap();
    PathBuf::from(k[field].as_str().unwrap())
}

/// Every process: its pid and /proc directory.
fn processes() -> impl Iterator<Item = (u32, PathBuf)> {
    fs::read_dir("/proc").unwrap().flatten().filter_map(|e| {
        Some((
            e.file_name().to_string_lossy().parse::<u32>().ok()?,
            e.path(),
        ))
    })
}

/// PIDs of QEMU processes whose command line mentions `needle`.
fn qemu_pids(needle: &str) -> Vec<u32> {
    processes()
        .filter(|(_, dir)| {
            let cmd = fs::read(dir.join("cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            cmd.starts_with("qemu-system-x86_64") && cmd.contains(needle)
        })
        .map(|(pid, _)| pid)
        .collect()
}

/// Children of `parent` whose command name (comm) satisfies `name`.
fn children_named(parent: u32, name: impl Fn(&str) -> bool) -> Vec<u32> {
    processes()
        .filter(|(_, dir)| {
            let stat = fs::read_to_string(dir.join("stat")).unwrap_or_default();
            // The field after the ")" that closes the command name is the state, then the ppid.
            let after = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
            let ppid = after
                .split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u32>().ok());
            ppid == Some(parent)
                && name(
                    fs::read_to_string(dir.join("comm"))
                        .unwrap_or_default()
                        .trim(),
                )
        })
        .map(|(pid, _)| pid)
        .collect()
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn guest_panic_is_a_vm_failure() {
    let (code, text) = run(&["vmtest", "--kernel", "mainline", "--inject", "panic"]);
    assert_eq!(code, VM_FAILED, "{text}");
    assert!(text.contains("the kernel panicked"), "{text}");
    assert!(
        text.contains("sysrq"),
        "the message should quote the panic line: {text}"
    );
}

/// The run's report directory, from the `reports: DIR (...)` line.
fn reports_dir(text: &str) -> PathBuf {
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("reports: "))
        .unwrap_or_else(|| panic!("no reports line in: {text}"));
    PathBuf::from(line.split(" (").next().unwrap())
}

/// The counts of the closing line (the one line made only of `N word`
/// parts, starting with `N passed`), by word ("passed", "crashed", ...).
fn closing_counts(text: &str) -> Vec<(String, usize)> {
    let parse = |line: &str| -> Option<Vec<(String, usize)>> {
        line.split(", ")
            .map(|part| {
                let (n, word) = part.split_once(' ')?;
                Some((word.to_string(), n.parse().ok()?))
            })
            .collect()
    };
    text.lines()
        .filter(|l| l.contains(" passed, "))
        .find_map(parse)
        .unwrap_or_else(|| panic!("no closing line in: {text}"))
}

fn count(counts: &[(String, usize)], word: &str) -> usize {
    counts.iter().find(|(w, _)| w == word).map_or(0, |c| c.1)
}

/// The tests in plan order, as the selftests binary the xtask packed into
/// the guest image lists them.
fn plan() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let bin = root.join("target/guest/x86_64-unknown-linux-gnu/release/selftests");
    let out = Command::new(&bin)
        .arg("--list")
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The planned tests, and where `culprit` stands among them.
fn plan_and_position(culprit: &str) -> (Vec<String>, usize) {
    let plan = plan();
    let at = plan
        .iter()
        .position(|t| t == culprit)
        .unwrap_or_else(|| panic!("{culprit} is not in the plan"));
    (plan, at)
}

/// A report file of the run, e.g. `mainline.ktap`.
fn report_file(text: &str, name: &str) -> String {
    fs::read_to_string(reports_dir(text).join(name)).unwrap()
}

/// Checks the KTAP of a run that died during `culprit`: every test before
/// it kept its result, the culprit failed with `why`, the rest not run.
fn assert_died_during(ktap: &str, culprit: &str, why: &str) {
    let (plan, at) = plan_and_position(culprit);
    for (i, name) in plan.iter().enumerate() {
        let n = i + 1;
        let want = match i.cmp(&at) {
            std::cmp::Ordering::Less => format!("ok {n} {name}"),
            std::cmp::Ordering::Equal => format!("not ok {n} {name}"),
            std::cmp::Ordering::Greater => {
                format!("ok {n} {name} # SKIP not run: the guest died during {culprit}")
            }
        };
        assert!(
            ktap.lines().any(|l| l == want),
            "no line {want:?} in:\n{ktap}"
        );
    }
    assert!(
        ktap.contains(why),
        "the crashed test should say {why:?}:\n{ktap}"
    );
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn kernel_crash_mid_plan_keeps_every_result() {
    let culprit = "t11_split_middle_page";
    let (code, text) = run(&[
        "vmtest",
        "--kernel",
        "mainline",
        "--inject",
        &format!("crash:{culprit}"),
    ]);
    assert_eq!(code, VM_FAILED, "{text}");
    assert!(
        text.contains(&format!("CRASH {culprit}: the kernel panicked")),
        "{text}"
    );
    let ktap = report_file(&text, "mainline.ktap");
    assert_died_during(&ktap, culprit, "Kernel panic - not syncing");
    let (plan, before) = plan_and_position(culprit);
    let c = closing_counts(&text);
    // The tests before it, and the console check: the panic is the
    // crashed test's failure, not the console check's too.
    assert_eq!(count(&c, "passed"), before + 1, "{text}");
    assert_eq!(count(&c, "crashed"), 1, "{text}");
    assert_eq!(count(&c, "not run"), plan.len() - before - 1, "{text}");
    assert_eq!(count(&c, "failed"), 0, "{text}");
    let junit = report_file(&text, "junit.xml");
    assert!(junit.contains("errors=\"1\""), "{junit}");
    assert_eq!(junit.matches("<testcase ").count(), plan.len() + 1);
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn guest_that_stops_responding_mid_plan_is_handled_like_a_crash() {
    let culprit = "t05_prog_and_mapping_coherent";
    let (code, text) = run(&[
        "vmtest",
        "--kernel",
        "mainline",
        "--accel",
        "tcg",
        "--inject",
        &format!("freeze:{culprit}"),
        // The default is 120 s; a wedged guest is the same at 15 (the
        // tests before the culprit take a second or less).
        "--stall",
        "15",
    ]);
    assert_eq!(code, VM_FAILED, "{text}");
    let ktap = report_file(&text, "mainline.ktap");
    // Ended by the stall limit, well before the overall timeout.
    assert_died_during(&ktap, culprit, "the guest hung: no results line for 15s");
    assert_eq!(count(&closing_counts(&text), "crashed"), 1, "{text}");
    assert!(
        qemu_pids(&format!("freeze:{culprit}")).is_empty(),
        "QEMU left running"
    );
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn a_hanging_test_costs_its_own_timeout_and_fail_fast_stops_the_run() {
    let culprit = "t04_syscall_and_mapping_coherent";
    let (code, text) = run(&[
        "vmtest",
        "--kernel",
        "mainline",
        "--fail-fast",
        "--inject",
        &format!("stall:{culprit}"),
    ]);
    assert_eq!(code, TESTS_FAILED, "{text}");
    assert!(
        text.contains(&format!("FAIL {culprit}: timeout: killed after")),
        "{text}"
    );
    let (plan, at) = plan_and_position(culprit);
    let c = closing_counts(&text);
    assert_eq!(
        count(&c, "passed"),
        at + 1,
        "the tests before and the console check: {text}"
    );
    assert_eq!(count(&c, "failed"), 1, "{text}");
    assert_eq!(count(&c, "not run"), plan.len() - at - 1, "{text}");
    let ktap = report_file(&text, "mainline.ktap");
    assert!(
        ktap.contains("# SKIP the runner stopped after 1 failure(s)"),
        "{ktap}"
    );
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn hung_guest_is_killed_at_the_timeout() {
    let (code, text) = run(&[
        "vmtest",
        "--kernel",
        "mainline",
        "--inject",
        "hang",
        // Boot and T03 take a few seconds, under load ten.
        "--timeout",
        "20",
        "--",
        "t03",
    ]);
    assert_eq!(code, VM_FAILED, "{text}");
    assert!(text.contains("the guest hung"), "{text}");
    assert!(text.contains("last console lines"), "{text}");
    assert!(
        qemu_pids("bpflab.inject=hang").is_empty(),
        "QEMU left running"
    );
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn kernel_warning_fails_a_passing_run() {
    let (code, text) = run(&[
        "vmtest", "--kernel", "mainline", "--inject", "warn", "--", "t03",
    ]);
    assert_eq!(code, TESTS_FAILED, "{text}");
    assert!(text.contains("FAIL t28_console_clean"), "{text}");
    assert!(text.contains("WARNING"), "{text}");
    // Symbolized under it: file:line in the call trace.
    assert!(
        text.contains("direct_entry (drivers/misc/lkdtm/core.c:"),
        "{text}"
    );
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn failing_test_gives_exit_code_1() {
    // The mainline kernel told it is the eager one: the laziness test must
    // see a lazy mapping where it expects an eager one, and fail.
    let m = manifest();
    let bz = kernel_path(&m, "mainline", "bzimage");
    let (code, text) = run(&[
        "vmtest",
        "--kernel",
        bz.to_str().unwrap(),
        "--claim",
        "eager",
        "--",
        "t01",
    ]);
    assert_eq!(code, TESTS_FAILED, "{text}");
    assert!(text.contains("FAIL t01"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.contains(" passed, ") && !l.contains(" 0 failed")),
        "{text}"
    );
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn qemu_killed_mid_run_is_a_vm_failure_and_leaves_nothing_running() {
    // TCG only: under `auto` the first QEMU may be a KVM attempt that
    // exits by itself on machines where KVM cannot run the kernel.
    let mut child = xtask(&[
        "vmtest",
        "--kernel",
        "mainline",
        "--accel",
        "tcg",
        "--inject",
        "hang",
        "--timeout",
        "300",
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let start = Instant::now();
    let qemu = loop {
        let kids = children_named(child.id(), |c| c.starts_with("qemu-system"));
        if let Some(p) = kids.first() {
            break *p;
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "QEMU never started"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    // Let the guest get going, then kill QEMU from outside.
    std::thread::sleep(Duration::from_secs(3));
    sigkill(qemu);
    let code = wait_with_deadline(&mut child, Duration::from_secs(60));
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(code, VM_FAILED, "{text}");
    assert!(text.contains("the VM could not do its job"), "{text}");
    assert!(
        !Path::new(&format!("/proc/{qemu}")).exists(),
        "QEMU was not reaped"
    );
}

/// SIGKILL, as `kill -KILL` would send it (procps is not a dependency).
fn sigkill(pid: u32) {
    // SAFETY: kill has no memory effects; a wrong pid is only an error.
    let rc = unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    assert_eq!(
        rc,
        0,
        "kill -KILL {pid}: {}",
        std::io::Error::last_os_error()
    );
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn console_flood_keeps_a_bounded_log_and_still_reports() {
    // The guest writes 6 MiB after its tests; the log is capped at 2 MiB.
    let out = xtask(&[
        "vmtest", "--kernel", "mainline", "--inject", "flood", "--", "t03",
    ])
    .env("BPFLAB_CONSOLE_CAP_MIB", "2")
    .output()
    .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("passed, 0 failed"), "{text}");
    let log = text
        .lines()
        .find_map(|l| l.split("console: ").nth(1))
        .map(|s| PathBuf::from(s.trim_end_matches(')')))
        .expect("console log path in the output");
    let size = fs::metadata(&log).unwrap().len();
    assert!(size <= (2 << 20) + 4096, "console log is {size} bytes");
    let tail = fs::read_to_string(&log).unwrap();
    assert!(
        tail.contains("console log capped at 2 MiB"),
        "no truncation note in {}",
        log.display()
    );
}

#[test]
#[ignore = "needs a built xtask only; run by cargo xtask ci"]
fn missing_qemu_is_reported_before_any_long_step() {
    let start = Instant::now();
    let out = Command::new(XTASK)
        .args(["vmtest"])
        .env("PATH", "/nonexistent")
        .env("BPFLAB_NO_INSTALL", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(SETUP_FAILED), "{text}");
    assert!(text.contains("qemu-system-x86_64"), "{text}");
    let hint = text
        .split_once("apt-get install ")
        .map_or("", |(_, rest)| rest.split('`').next().unwrap_or(""));
    assert!(
        hint.split_whitespace().any(|p| p == "qemu-system-x86"),
        "the install line names QEMU's package: {text}"
    );
    assert_eq!(
        text.lines().filter(|l| l.starts_with("error:")).count(),
        1,
        "{text}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "took {:?}",
        start.elapsed()
    );
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("xtask-faults-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

/// The one source directory in a cache.
fn only_source(cache: &Path) -> PathBuf {
    fs::read_dir(cache.join("sources"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
}

/// The error line of a failed run, which must have exactly one.
fn the_error_line(out: &str) -> &str {
    let err: Vec<&str> = out.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(err.len(), 1, "one error line: {out}");
    err[0]
}

#[test]
#[ignore = "unpacks the kernel source: run by cargo xtask ci"]
fn patch_that_does_not_apply_is_named_and_nothing_is_applied() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let t = tempdir("badpatch");
    let patches = t.join("patches");
    fs::create_dir_all(&patches).unwrap();
    for e in fs::read_dir(root.join("patches")).unwrap().flatten() {
        fs::copy(e.path(), patches.join(e.file_name())).unwrap();
    }
    let name = "0002-bpf-Map-the-faulting-page-of-an-mmap-able-array-map-directly.patch";
    let p = patches.join(name);
    // Corrupt a context line of the arraymap.c hunk: that hunk cannot apply.
    let original = fs::read_to_string(&p).unwrap();
    let text = original.replacen(
        " static bool array_map_meta_equal(const struct bpf_map *meta0,",
        " static bool array_map_meta_equal_renamed(const struct bpf_map *meta0,",
        1,
    );
    assert_ne!(
        text, original,
        "the context line to corrupt is gone from {name}; update this test"
    );
    fs::write(&p, text).unwrap();
    let cache = t.join("cache");
    let (code, out) = run(&[
        "build-kernel",
        "--kernel",
        "direct",
        "--patches",
        patches.to_str().unwrap(),
        "--cache-dir",
        cache.to_str().unwrap(),
    ]);
    assert_eq!(code, SETUP_FAILED, "{out}");
    let err = [the_error_line(&out)];
    assert!(err[0].contains(name), "{out}");
    assert!(err[0].contains("kernel/bpf/arraymap.c"), "{out}");
    // Nothing half-applied: every file the series and the baseline touch
    // is pristine (the baseline's patches go in the same one apply).
    let src = only_source(&cache);
    for f in [
        "include/linux/bpf.h",
        "kernel/bpf/arraymap.c",
        "kernel/bpf/syscall.c",
        "kernel/bpf/arena.c",
    ] {
        let a = fs::read(src.join("pristine").join(f)).unwrap();
        let b = fs::read(src.join("direct").join(f)).unwrap();
        assert!(
            a == b,
            "{f} in the patched tree differs from pristine after a failed apply"
        );
    }
    fs::remove_dir_all(t).unwrap();
}

/// Makes the base kernel, and only it, need a small rebuild (one object and
/// the link): removes one object from its build directory, and the stamp
/// that lets the harness skip make. (The trees share their sources' inodes:
/// touching a source would make every kernel stale.)
fn make_base_stale() {
    let m = manifest();
    let vmlinux = kernel_path(&m, "eager", "vmlinux");
    assert!(
        vmlinux.starts_with(m["cache_dir"].as_str().unwrap()),
        "only the cache's own build may be touched"
    );
    let build_dir = vmlinux.parent().unwrap();
    let _ = fs::remove_file(build_dir.join("kernel/bpf/ringbuf.o"));
    fs::remove_file(build_dir.join(".bpflab-built")).unwrap();
}

#[test]
#[ignore = "rebuilds part of a kernel: run by cargo xtask ci"]
fn build_killed_half_way_recovers_on_the_next_run() {
    make_base_stale();
    let mut child = xtask(&["build-kernel", "--kernel", "eager"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until make is running, then kill the whole run.
    let start = Instant::now();
    loop {
        let makes = children_named(child.id(), |c| c == "make");
        if !makes.is_empty() && start.elapsed() > Duration::from_secs(5) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "make never started"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    for kid in children_named(child.id(), |_| true) {
        sigkill(kid);
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // The sub-make and its compilers outlive make: the next run stops them
    // before it cleans up, rather than share the build directory with them.
    let (code, text) = run(&["build-kernel", "--kernel", "eager"]);
    assert_eq!(code, 0, "{text}");
    let stopped = text
        .split_once("was interrupted: stopped ")
        .and_then(|(_, rest)| rest.split_once(' '))
        .and_then(|(n, _)| n.parse::<usize>().ok())
        .unwrap_or_else(|| panic!("the next run should notice and say what it stopped: {text}"));
    assert!(
        stopped >= 1,
        "the orphaned sub-make was not stopped: {text}"
    );
    let (code, text) = run(&["build-kernel", "--kernel", "eager"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("up to date"), "{text}");
}

/// The patches a kernel of the manifest carries, by name.
fn patches_of(m: &serde_json::Value, name: &str) -> Vec<String> {
    let k = m["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["name"] == name)
        .unwrap_or_else(|| panic!("no kernel {name} in the manifest: {m}"));
    k["patches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
#[ignore = "needs the kernels built: run by cargo xtask ci"]
fn each_variant_has_its_own_tree_and_switching_rebuilds_nothing() {
    // Built by CI's build step; this run only makes sure.
    let (code, text) = run(&["build-kernel", "--kernel", "all"]);
    assert_eq!(code, 0, "{text}");
    for word in ["prefault", "mainline", "prefault", "eager,mainline"] {
        let (code, text) = run(&["build-kernel", "--kernel", word]);
        assert_eq!(code, 0, "{text}");
        assert!(
            !text.contains("applying") && !text.contains("make O="),
            "--kernel {word} after the others re-applied or rebuilt something: {text}"
        );
    }
    let m = manifest();
    assert_eq!(patches_of(&m, "eager"), ["eager.patch"]);
    // mainline is the package as shipped: the baseline's revert and its
    // re-apply give back every file they touch as it is in the tarball.
    // eager differs in the seed's code only: its bpf.h is the tarball's,
    // so that mainline's build from eager's compiles two files.
    let src = Path::new(m["source"]["pristine"].as_str().unwrap())
        .parent()
        .unwrap();
    for (f, eager_differs) in [
        ("include/linux/bpf.h", false),
        ("kernel/bpf/arraymap.c", true),
        ("kernel/bpf/syscall.c", true),
    ] {
        let shipped = fs::read(src.join("pristine").join(f)).unwrap();
        assert!(
            shipped == fs::read(src.join("mainline").join(f)).unwrap(),
            "mainline's {f}"
        );
        assert_eq!(
            shipped != fs::read(src.join("eager").join(f)).unwrap(),
            eager_differs,
            "eager's {f}: differs from the tarball's"
        );
    }
    for (variant, patches) in variants_of_the_series() {
        assert_eq!(patches_of(&m, &variant), patches, "kernel {variant}");
    }
    let (code, text) = run(&["build-kernel", "--kernel", "window"]);
    assert_eq!(code, SETUP_FAILED, "{text}");
    assert!(
        text.contains("--kernel window: not one of eager, mainline, direct, prefault, adaptive"),
        "{text}"
    );
}

/// Each variant of the default source's series (the 7.3 baseline's, then
/// patches/series) with the patches it is built from, eager's first, read
/// the plain way: a `[name]` line starts a variant that has every patch
/// above it and those below it.
fn variants_of_the_series() -> Vec<(String, Vec<String>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    let text = read("sources/debian-7.3/series") + &read("patches/series");
    let mut variants = vec![("eager".to_string(), vec!["eager.patch".to_string()])];
    for line in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let so_far = variants.last().unwrap().1.clone();
        match line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            Some(name) => variants.push((name.to_string(), so_far)),
            None => variants.last_mut().unwrap().1.push(line.to_string()),
        }
    }
    assert!(
        variants.len() >= 3,
        "patches/series names no variant after mainline"
    );
    variants.remove(0);
    variants
}

#[test]
#[ignore = "rebuilds part of a kernel: run by cargo xtask ci"]
fn two_runs_at_once_wait_for_each_other_and_both_succeed() {
    make_base_stale();
    let spawn = || {
        xtask(&["build-kernel", "--kernel", "eager"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let first = spawn();
    std::thread::sleep(Duration::from_secs(2));
    let second = spawn();
    let a = first.wait_with_output().unwrap();
    let b = second.wait_with_output().unwrap();
    let (ta, tb) = (
        String::from_utf8_lossy(&a.stderr),
        String::from_utf8_lossy(&b.stderr),
    );
    assert!(a.status.success(), "{ta}");
    assert!(b.status.success(), "{tb}");
    assert!(
        tb.contains("waiting for the lock"),
        "the second run should wait: {tb}"
    );
    assert!(
        tb.contains("up to date"),
        "the second run should find the first one's build: {tb}"
    );
}

/// A patch with no mail header (so `git am` refuses it) that adds (`+`)
/// or takes out (`-`) `line` at the top of array_map_mmap().
fn array_map_mmap_patch(sign: char, line: &str) -> String {
    let (before, after) = if sign == '+' { (6, 7) } else { (7, 6) };
    format!(
        "diff --git a/kernel/bpf/arraymap.c b/kernel/bpf/arraymap.c\n\
         --- a/kernel/bpf/arraymap.c\n\
         +++ b/kernel/bpf/arraymap.c\n\
         @@ -609,{before} +609,{after} @@\n \
         static int array_map_mmap(struct bpf_map *map, struct vm_area_struct *vma)\n \
         {{\n \
         \tstruct bpf_array *array = container_of(map, struct bpf_array, map);\n\
         {sign}\t{line}\n \n \
         \tif (!(map->map_flags & BPF_F_MMAPABLE))\n \
         \t\treturn -EINVAL;\n"
    )
}

/// The series' first patch, and a fresh directory for a series of the
/// test's own.
const FIRST: &str = "0002-bpf-Map-the-faulting-page-of-an-mmap-able-array-map-directly.patch";

fn series_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bpflab-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
#[ignore = "prepares kernel trees: run by cargo xtask ci"]
fn a_series_that_fails_the_maintainer_gates_is_named_gate_by_gate() {
    let dir = series_dir("bad-series");
    let project = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let first = FIRST;
    let good = fs::read_to_string(project.join("patches").join(first)).unwrap();
    // No Signed-off-by: checkpatch's error.
    let unsigned: String = good
        .lines()
        .filter(|l| !l.starts_with("Signed-off-by:"))
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(dir.join(first), unsigned).unwrap();
    let unused = array_map_mmap_patch('+', "int bpflab_unused;");
    fs::write(dir.join("0003-unused.patch"), unused).unwrap();
    fs::write(dir.join("series"), format!("{first}\n0003-unused.patch\n")).unwrap();
    let (code, text) = run(&["check-patches", "--patches", dir.to_str().unwrap()]);
    fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, TESTS_FAILED, "{text}");
    assert!(
        text.contains(&format!("--strict {first}: total: 1 errors")),
        "{text}"
    );
    assert!(text.contains("Missing Signed-off-by"), "{text}");
    assert!(text.contains("git am does not apply the series"), "{text}");
    assert!(
        text.contains("new: kernel/bpf/arraymap.c: warning: unused variable 'bpflab_unused'"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "patch checks failed: checkpatch --strict {first}, git am, W=1 + sparse"
        )),
        "{text}"
    );
}

/// A variant of three patches whose middle one does not build and whose
/// last mends it: the series builds, and `--each` names the middle one
/// alone.
#[test]
#[ignore = "prepares kernel trees and builds objects: run by cargo xtask ci"]
fn a_patch_that_breaks_the_build_is_named_though_the_next_fixes_it() {
    let dir = series_dir("each-patch");
    let project = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let first = FIRST;
    fs::copy(project.join("patches").join(first), dir.join(first)).unwrap();
    // An undeclared name, then taken out again.
    let breaks = array_map_mmap_patch('+', "bpflab_undeclared = 1;");
    fs::write(dir.join("0003-breaks.patch"), breaks).unwrap();
    let mends = array_map_mmap_patch('-', "bpflab_undeclared = 1;");
    fs::write(dir.join("0004-mends.patch"), mends).unwrap();
    let series = format!("[whole]\n{first}\n0003-breaks.patch\n0004-mends.patch\n");
    fs::write(dir.join("series"), series).unwrap();
    let (code, text) = run(&[
        "check-patches",
        "--each",
        "--patches",
        dir.to_str().unwrap(),
    ]);
    fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, TESTS_FAILED, "{text}");
    // The whole series builds clean: only --each sees the break.
    assert!(text.contains(" 0 new"), "{text}");
    assert!(
        text.contains(&format!("{first}: builds with W=1 and sparse, nothing new")),
        "{text}"
    );
    assert!(text.contains("0003-breaks.patch: does not build"), "{text}");
    assert!(text.contains("bpflab_undeclared"), "{text}");
    assert!(
        text.contains("0004-mends.patch: builds with W=1 and sparse, nothing new"),
        "{text}"
    );
    assert!(
        text.contains("0003-breaks.patch on its own (does not build)"),
        "{text}"
    );
    assert!(!text.contains("0004-mends.patch on its own"), "{text}");
}

/// Changes to the BPF tree's own tests: the mmap test holds the base
/// kernel's behaviour (a fresh read-only mapping of a map is resident at
/// once), and global_data never ends.
const EAGER_MMAP_TEST_PATCH: &str = "\
diff --git a/tools/testing/selftests/bpf/prog_tests/global_data.c b/tools/testing/selftests/bpf/prog_tests/global_data.c
--- a/tools/testing/selftests/bpf/prog_tests/global_data.c
+++ b/tools/testing/selftests/bpf/prog_tests/global_data.c
@@ -140,6 +140,8 @@
 \t\t.repeat = 1,
 \t);
 
+\t/* Hangs: the harness must take it for hung and go on after it. */
+\tpause();
 \terr = bpf_prog_test_load(file, BPF_PROG_TYPE_SCHED_CLS, &obj, &prog_fd);
 \tif (!ASSERT_OK(err, \"load program\"))
 \t\treturn;
diff --git a/tools/testing/selftests/bpf/prog_tests/mmap.c b/tools/testing/selftests/bpf/prog_tests/mmap.c
--- a/tools/testing/selftests/bpf/prog_tests/mmap.c
+++ b/tools/testing/selftests/bpf/prog_tests/mmap.c
@@ -28,6 +28,7 @@
 \tstruct map_data *map_data;
 \tstruct test_mmap *skel;
 \t__u64 val = 0;
+\tunsigned char resident = 0;
 
 \tskel = test_mmap__open();
 \tif (CHECK(!skel, \"skel_open\", \"skeleton open failed\\n\"))
@@ -61,6 +62,11 @@
 \ttmp1 = mmap(NULL, page_size, PROT_READ, MAP_SHARED, rdmap_fd, 0);
 \tif (CHECK(tmp1 == MAP_FAILED, \"rdonly_read_mmap\", \"failed: %d\\n\", errno))
 \t\tgoto cleanup;
+\t/* Fails where mmap() leaves the pages to be faulted in later. */
+\terr = mincore(tmp1, page_size, &resident);
+\tif (CHECK(err || !(resident & 1), \"populated_at_mmap\",
+\t\t  \"err %d resident %d\\n\", err, resident))
+\t\tgoto cleanup;
 
 \t/* get map's ID */
 \tmemset(&map_info, 0, map_info_sz);
";

/// A new test of the BPF tree's, for 0001's feature: a fresh read-only
/// mapping of a map has no page resident. It fails on base (eager) and
/// passes on patched.
const LAZY_MMAP_TEST_PATCH: &str = "\
diff --git a/tools/testing/selftests/bpf/prog_tests/lazy_mmap.c b/tools/testing/selftests/bpf/prog_tests/lazy_mmap.c
new file mode 100644
--- /dev/null
+++ b/tools/testing/selftests/bpf/prog_tests/lazy_mmap.c
@@ -0,0 +1,29 @@
+// SPDX-License-Identifier: GPL-2.0
+#include <test_progs.h>
+#include <sys/mman.h>
+#include \"test_mmap.skel.h\"
+
+void test_lazy_mmap(void)
+{
+\tconst size_t page_size = sysconf(_SC_PAGE_SIZE);
+\tunsigned char resident = 1;
+\tstruct test_mmap *skel;
+\tvoid *p;
+
+\tskel = test_mmap__open();
+\tif (!ASSERT_OK_PTR(skel, \"open\"))
+\t\treturn;
+\tif (!ASSERT_OK(bpf_map__set_max_entries(skel->maps.rdonly_map, page_size), \"rdonly\") ||
+\t    !ASSERT_OK(bpf_map__set_max_entries(skel->maps.data_map, 4 * (page_size / 8)), \"data\") ||
+\t    !ASSERT_OK(test_mmap__load(skel), \"load\"))
+\t\tgoto out;
+\tp = mmap(NULL, page_size, PROT_READ, MAP_SHARED,
+\t\t bpf_map__fd(skel->maps.rdonly_map), 0);
+\tif (ASSERT_NEQ(p, MAP_FAILED, \"mmap\")) {
+\t\tASSERT_OK(mincore(p, page_size, &resident), \"mincore\");
+\t\tASSERT_EQ(resident & 1, 0, \"resident_at_mmap\");
+\t\tmunmap(p, page_size);
+\t}
+out:
+\ttest_mmap__destroy(skel);
+}
";

/// A new test of the BPF tree's that passes on base (eager) and skips
/// where a fresh mapping has no page resident: on patched.
const LAZY_SKIP_TEST_PATCH: &str = "\
diff --git a/tools/testing/selftests/bpf/prog_tests/lazy_skip.c b/tools/testing/selftests/bpf/prog_tests/lazy_skip.c
new file mode 100644
--- /dev/null
+++ b/tools/testing/selftests/bpf/prog_tests/lazy_skip.c
@@ -0,0 +1,25 @@
+// SPDX-License-Identifier: GPL-2.0
+#include <test_progs.h>
+#include <sys/mman.h>
+
+void test_lazy_skip(void)
+{
+\tconst size_t page_size = sysconf(_SC_PAGE_SIZE);
+\tLIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_MMAPABLE);
+\tunsigned char resident = 0;
+\tvoid *p;
+\tint fd;
+
+\tfd = bpf_map_create(BPF_MAP_TYPE_ARRAY, \"lazy_skip\", 4, 8, page_size / 8, &opts);
+\tif (!ASSERT_GE(fd, 0, \"map_create\"))
+\t\treturn;
+\tp = mmap(NULL, page_size, PROT_READ, MAP_SHARED, fd, 0);
+\tif (ASSERT_NEQ(p, MAP_FAILED, \"mmap\")) {
+\t\tASSERT_OK(mincore(p, page_size, &resident), \"mincore\");
+\t\tmunmap(p, page_size);
+\t\t/* Skips where the pages come in lazily. */
+\t\tif (!(resident & 1))
+\t\t\ttest__skip();
+\t}
+\tclose(fd);
+}
";

/// On mainline (the lazy mapping, merged): a change to upstream's mmap
/// test that expects eager pages, a new test that expects lazy ones, and
/// one that skips where they are; the variant is `patched`.
fn eager_mmap_test_series() -> PathBuf {
    series_of(
        "eager-mmap-series",
        &[
            ("0002-eager-mmap-test.patch", EAGER_MMAP_TEST_PATCH),
            ("0003-lazy-mmap-test.patch", LAZY_MMAP_TEST_PATCH),
            ("0004-lazy-skip-test.patch", LAZY_SKIP_TEST_PATCH),
        ],
        false,
    )
}

/// A series in a temporary directory, on the default source's mainline:
/// `more` (file name, text), each a patch of its own, in order; with
/// `direct`, after the project's 0002 and 0003 as the variant `direct`
/// (the plan then holds it to direct's side).
fn series_of(name: &str, more: &[(&str, &str)], direct: bool) -> PathBuf {
    let dir = tempdir(name);
    let project = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut series = String::new();
    if direct {
        series += "[direct]\n";
        for first in [
            "0002-bpf-Map-the-faulting-page-of-an-mmap-able-array-map-directly.patch",
            "0003-bpf-Map-arena-pages-directly-in-the-fault-handler.patch",
        ] {
            fs::copy(project.join("patches").join(first), dir.join(first)).unwrap();
            series += &format!("{first}\n");
        }
    }
    for (file, text) in more {
        fs::write(dir.join(file), text).unwrap();
        series += &format!("{file}\n");
    }
    fs::write(dir.join("series"), series).unwrap();
    dir
}

#[test]
#[ignore = "boots kernels: run by cargo xtask ci"]
fn a_bpf_selftest_that_fails_only_on_patched_is_a_regression_and_a_hang_costs_one_test() {
    let dir = eager_mmap_test_series();
    let (code, text) = run(&[
        "kselftest",
        "--patches",
        dir.to_str().unwrap(),
        "-t",
        "mmap,global_data,lazy_mmap",
        "--kernel",
        "eager,patched",
        "--runner",
        "test_progs",
        "--stall",
        "30",
        // Both kernels at once, as ci runs them.
        "--vms",
        "2",
    ]);
    assert_eq!(code, TESTS_FAILED, "{text}");
    let tree_line = text
        .lines()
        .find(|l| l.contains("the series changes "))
        .unwrap_or_else(|| panic!("kselftest did not say the series changes tools/: {text}"));
    assert!(
        tree_line.contains("prog_tests/mmap.c") && tree_line.contains("prog_tests/global_data.c"),
        "{tree_line}"
    );
    assert!(text.contains("FAIL:populated_at_mmap"), "{text}");
    assert_eq!(
        table_row("test_progs:mmap", &text),
        ["test_progs:mmap", "ok", "FAIL"],
        "{text}"
    );
    assert!(
        text.contains(
            "REGRESSION: 1 test(s) fail only on a variant of the series: test_progs:mmap\n"
        ),
        "{text}"
    );
    // The hang: crashed on both kernels, each run resumed after it.
    for kernel in ["eager", "patched"] {
        assert!(
            text.contains(&format!(
                "== {kernel}: global_data stopped the guest (the guest hung: the command printed nothing for 30s"
            )),
            "{text}"
        );
    }
    assert_eq!(
        table_row("test_progs:global_data", &text),
        ["test_progs:global_data", "CRASH", "CRASH"],
        "{text}"
    );
    assert!(
        text.contains(
            "not a regression: 1 test(s) fail on base too (the environment or base): test_progs:global_data\n"
        ),
        "{text}"
    );
    // The test after it ran in the resumed boot, and passed on both
    // (-t shows every row).
    assert_eq!(
        table_row("test_progs:global_data_init", &text),
        ["test_progs:global_data_init", "ok", "ok"],
        "{text}"
    );
    assert!(text.contains("global_data_init:OK"), "{text}");
    assert_every_named_test_held(&text);
    new_tests_are_held_to_their_variant(&dir);
    fs::remove_dir_all(&dir).unwrap();
}

/// A test -t names is held on every kernel: failing on base too is no
/// excuse, and neither is a new test's failing on base without --new-on.
fn assert_every_named_test_held(text: &str) {
    let held = text
        .lines()
        .find(|l| l.starts_with("FAIL: the tests run must pass on every kernel"))
        .unwrap_or_else(|| panic!("no held line: {text}"));
    for broken in [
        "test_progs:global_data is CRASH on eager",
        "test_progs:lazy_mmap is FAIL on eager",
        "test_progs:mmap is FAIL on patched",
    ] {
        assert!(held.contains(broken), "{broken}: {held}");
    }
    assert!(!held.contains("lazy_mmap is FAIL on patched"), "{held}");
}

/// The table's row of a test: its name and its status on each kernel.
fn table_row(name: &str, text: &str) -> Vec<String> {
    let line = text
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no {name} row in the table: {text}"));
    line.split_whitespace().map(String::from).collect()
}

/// With `--new-on`, a new test must fail on base and pass on patched (it
/// does: the run passes); a `-t` name no test has is bad input.
fn new_tests_are_held_to_their_variant(dir: &Path) {
    // With --new-on, the new test must fail on base and pass on patched:
    // it does, and the run passes.
    let (code, text) = kselftest_named(dir, "lazy_mmap", &["--new-on", "patched"]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(
        table_row("test_progs:lazy_mmap", &text),
        ["test_progs:lazy_mmap", "FAIL", "ok"],
        "{text}"
    );
    // A name no test has is bad input, said before a boot.
    let (code, text) = kselftest_named(dir, "no_such_test", &[]);
    assert_eq!(code, SETUP_FAILED, "{text}");
    assert!(
        text.contains("-t no_such_test: no test of test_progs matches it"),
        "{text}"
    );
    assert!(!text.contains("booting"), "{text}");
    // A test that passes on base and skips on patched is not held.
    let (code, text) = kselftest_named(dir, "lazy_skip", &[]);
    assert_eq!(code, TESTS_FAILED, "{text}");
    assert_eq!(
        table_row("test_progs:lazy_skip", &text),
        ["test_progs:lazy_skip", "ok", "skip"],
        "{text}"
    );
    assert!(
        text.contains("test_progs:lazy_skip skips on patched, where eager runs it"),
        "{text}"
    );
}

/// `kselftest -t TESTS` on the series in `dir`, test_progs alone, both
/// kernels at once, with `more` arguments.
fn kselftest_named(dir: &Path, tests: &str, more: &[&str]) -> (i32, String) {
    let dir = dir.to_str().unwrap();
    let mut args = vec![
        "kselftest",
        "--patches",
        dir,
        "-t",
        tests,
        "--kernel",
        "eager,patched",
    ];
    args.extend(more);
    args.extend(["--runner", "test_progs", "--vms", "2"]);
    run(&args)
}

#[test]
#[ignore = "boots kernels: run by cargo xtask ci"]
fn mutants_on_a_host_that_cannot_boot_guests_fail_at_the_control() {
    use std::os::unix::fs::PermissionsExt;
    // A QEMU that is there and cannot start a guest.
    let bin = tempdir("broken-qemu");
    let qemu = bin.join("qemu-system-x86_64");
    fs::write(
        &qemu,
        "#!/bin/sh\necho 'qemu-system-x86_64: planted failure: cannot start' >&2\nexit 1\n",
    )
    .unwrap();
    fs::set_permissions(&qemu, fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let mut command = xtask(&["mutants", "--filter", "0001.28.flag3", "--fresh"]);
    command.env("PATH", path).env("BPFLAB_NO_INSTALL", "1");
    let r = run_to_end(command, Duration::from_secs(600));
    fs::remove_dir_all(&bin).unwrap();
    let text = format!("{}{}", r.stdout, r.stderr);
    assert_ne!(r.code, 0, "{text}");
    assert!(
        text.contains("the control failed: the judge on the unmutated mainline kernel gave \"ERROR: no panic or splat of the kernel's, so not the mutant's: the VM could not do its job: "),
        "{text}"
    );
    // No mutant was judged, so none was counted killed.
    assert!(!text.contains("[1/1]"), "{text}");
    assert!(!text.contains("killed"), "{text}");
}

/// A line whose comparison, swapped, stops the build: a static_assert.
const UNBUILDABLE_MUTANT_PATCH: &str = "\
diff --git a/kernel/bpf/arraymap.c b/kernel/bpf/arraymap.c
--- a/kernel/bpf/arraymap.c
+++ b/kernel/bpf/arraymap.c
@@ -1467,3 +1467,6 @@
 \t.map_mem_usage = array_map_mem_usage,
 \t.map_btf_id = &array_map_btf_ids[0],
 };
+
+static const int bpflab_fault_probe = 4;
+static_assert(sizeof(bpflab_fault_probe) == 4);
";

#[test]
#[ignore = "builds and boots kernels: run by cargo xtask ci"]
fn a_mutant_that_does_not_build_fails_the_run_unjudged() {
    let dir = series_of(
        "unbuildable-mutant",
        &[("0006-probe.patch", UNBUILDABLE_MUTANT_PATCH)],
        true,
    );
    let (code, text) = run(&[
        "mutants",
        "--patches",
        dir.to_str().unwrap(),
        "--filter",
        "0006.10.cmp1",
        "--fresh",
    ]);
    fs::remove_dir_all(&dir).unwrap();
    assert_eq!(code, TESTS_FAILED, "{text}");
    assert!(
        text.contains("[control] direct unmutated: every test passed"),
        "{text}"
    );
    assert!(text.contains("did not build 0006.10.cmp1: "), "{text}");
    assert!(
        text.contains("mutants: 0 of 0 killed, 0 survived, 1 not judged"),
        "{text}"
    );
    assert!(text.contains("FAIL: 1 mutant(s) not judged"), "{text}");
}

/// `mutants --sample-file` on a file of the one `line`, with `--fresh`
/// (judged here, not taken from the ledger): its exit code, its output
/// and the file's path (removed by then, as the output names it).
fn run_sample_line(name: &str, line: &str) -> (i32, String, PathBuf) {
    let dir = tempdir(name);
    let file = dir.join("SAMPLE");
    fs::write(&file, line).unwrap();
    let (code, text) = run(&[
        "mutants",
        "--sample-file",
        file.to_str().unwrap(),
        "--fresh",
    ]);
    fs::remove_dir_all(&dir).unwrap();
    (code, text, file)
}

/// A sample line whose named test no longer kills its mutant fails the
/// run by name: CI_SAMPLE's first single-killer line, put down to
/// another test.
#[test]
#[ignore = "builds and boots kernels: run by cargo xtask ci"]
fn a_sample_line_whose_test_does_not_kill_its_mutant_fails_the_run() {
    let project = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let ci_sample = fs::read_to_string(project.join("mutants/CI_SAMPLE")).unwrap();
    let (id, digest, killer) = ci_sample
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|w| w.len() > 3 && !w[2].contains('/'))
        .map(|w| (w[0].to_string(), w[1].to_string(), w[2].to_string()))
        .expect("a CI_SAMPLE line with one killer");
    let other = if killer == "T01" { "T04" } else { "T01" };
    let line = format!("{id}  {digest}  {other}  said to fall to {other}\n");
    let (code, text, file) = run_sample_line("stale-sample", &line);
    assert_eq!(code, TESTS_FAILED, "{text}");
    // The line's test first, alone, then the whole plan, after its
    // control.
    assert!(
        text.contains(&format!("[control] mainline unmutated: {other} passed")),
        "{text}"
    );
    assert!(
        text.contains(&format!("[judge] {other} did not kill it: the whole plan")),
        "{text}"
    );
    assert!(
        text.contains("[control] mainline unmutated: every test passed"),
        "{text}"
    );
    assert!(text.contains("mutants: 1 of 1 killed"), "{text}");
    let miss = format!("FAIL: {}: {id} was killed by {killer} (", file.display());
    assert!(text.contains(&miss), "{miss}: {text}");
    assert!(text.contains(&format!("its line names {other}")), "{text}");
}

/// A mutant of the first of a variant's two patches is held only by what
/// it changes: 0002's every-fault-fails mutant (array maps' faults), held
/// to `direct` (0002 and 0003), in a sample line that puts it down to
/// T22 (the arena's VmFlags, 0003's change). Built without 0003, T22
/// killed every mutant of 0002 and the line held; built as direct is,
/// T22 passes on it, the whole plan kills it with a test of array maps,
/// and the line fails the run.
#[test]
#[ignore = "builds and boots kernels: run by cargo xtask ci"]
fn a_mutant_of_a_variants_first_patch_is_held_only_by_what_it_changes() {
    let id = "0002.36.return2";
    // Its digest as CI_SAMPLE has it, so that the line is read and judged.
    let project = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let ci_sample = fs::read_to_string(project.join("mutants/CI_SAMPLE")).unwrap();
    let digest = ci_sample
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|w| w.first() == Some(&id))
        .map(|w| w[1].to_string())
        .expect("CI_SAMPLE names 0002.36.return2");
    let line = format!("{id}  {digest}  T22  said to fall to 0003's arena test\n");
    let (code, text, file) = run_sample_line("first-of-two", &line);
    assert_eq!(code, TESTS_FAILED, "{text}");
    // The control, built as the mutant is, passes T22 and then the whole
    // plan: the mutants' kernel of direct has 0003.
    for passed in ["T22 passed", "every test passed"] {
        let line = format!("[control] direct unmutated: {passed}");
        assert!(text.contains(&line), "{line}: {text}");
    }
    assert!(
        text.contains("[judge] T22 did not kill it: the whole plan"),
        "{text}"
    );
    assert!(text.contains("mutants: 1 of 1 killed"), "{text}");
    let miss = format!("FAIL: {}: {id} was killed by ", file.display());
    let killer = text
        .split(&miss)
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{miss}: {text}"));
    // Its killer is no test of 0003's arena.
    assert!(!["T22", "T33", "T39"].contains(&killer), "{killer}: {text}");
    assert!(text.contains("its line names T22"), "{text}");
}

/// A tmpfs of `size` mounted on `dir`, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Tmpfs {
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .unwrap()
            .success();
        assert!(
            ok,
            "mounting a tmpfs on {} (this test needs root)",
            dir.display()
        );
        Tmpfs(dir.to_path_buf())
    }

    fn resize(&self, size: &str) {
        let ok = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(&self.0)
            .status()
            .unwrap()
            .success();
        assert!(ok, "resizing the tmpfs on {}", self.0.display());
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazily: a git the patch checks left running in the background
        // (its auto gc) may hold it a moment longer.
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
#[ignore = "mounts a tmpfs and unpacks the kernel source twice: run by cargo xtask ci"]
fn a_full_cache_is_one_line_and_the_next_run_with_space_recovers() {
    let t = tempdir("fullcache");
    let cache = t.join("cache");
    fs::create_dir_all(&cache).unwrap();
    // Room for Debian's indexes, the package and its tarball (about 400
    // MB at their peak), not for the source unpacked (1.8 GB), which
    // fills it while it unpacks.
    let fs_ = Tmpfs::mount(&cache, "900m");
    let dir = cache.to_str().unwrap();
    let (code, out) = run(&["build-kernel", "--kernel", "eager", "--cache-dir", dir]);
    assert_eq!(code, SETUP_FAILED, "{out}");
    let err = [the_error_line(&out)];
    let want = format!("error: the kernel cache {dir} is out of space (");
    assert!(err[0].starts_with(&want), "{out}");
    assert!(err[0].contains("free on its disk"), "{out}");
    assert!(err[0].contains("`cargo xtask cache --prune`"), "{out}");
    assert_eq!(
        err[0].matches("is out of space").count(),
        1,
        "said once: {out}"
    );
    let src = only_source(&cache);
    assert!(
        !src.join("pristine").exists(),
        "a half-unpacked tree was put in place as complete"
    );
    // With space, the next run redoes the tree, without --fresh, and the
    // patch checks (a mirror, the series applied, objects built) pass on it.
    fs_.resize("6g");
    let (code, out) = run(&["check-patches", "--cache-dir", dir]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("removing a half-unpacked tree left by an interrupted run"),
        "{out}"
    );
    drop(fs_);
    fs::remove_dir_all(t).unwrap();
}
