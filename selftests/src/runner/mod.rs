//! The test runner and the result protocol parsed by the host harness.
//!
//! ```text
//! selftests [--kernel KERNEL] [--results PATH] [--list] [FILTER...]
//! ```
//!
//! Without `--kernel` the binary is in host mode and reports every selected
//! test as skipped. In guest mode each test runs in its own forked process
//! group with a timeout ([`isolate`]); after each test the runner waits
//! until the BPF maps it created are gone ([`settle`]), then scans the new
//! /dev/kmsg records for kernel splats (T28). `options` has the command
//! line.
//!
//! Lines of the results protocol (`guest_common::protocol`) go to
//! `--results`, one write() each, and are echoed to stdout: the plan with
//! every test's name, a start line before each test (so the host can name
//! the test during which the kernel died), and one result per test.

mod isolate;
pub mod model;
mod options;
mod settle;

use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::time::{Duration, Instant};

use guest_common::port;
use guest_common::protocol::{Line, ResultWord, TestLine};

use crate::child;
use crate::kmsg::{find_splats, Kmsg};
pub use model::{Fill, Filled, FAULT_WINDOW, POPULATE_PAGES};
use options::{InjectKind, Options, USAGE};

/// Which kernel the guest booted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    /// Without the lazy mapping (U; 7.3 with it reverted): mmap()
    /// inserts every page eagerly.
    Eager,
    /// With the lazy mapping, 0001 (P; 7.3 as shipped): each page is
    /// faulted in on its own, returned to the core in vmf->page.
    Mainline,
    /// With 0001-0003 (D): each page is faulted in on its own, mapped
    /// by the handler.
    Direct,
    /// With 0001-0004 (W): a fault maps a window that grows while faults
    /// are sequential, up to [`FAULT_WINDOW`] pages.
    Prefault,
    /// With 0001-0005 (A): the same, and mmap() populates a mapping of at
    /// most [`POPULATE_PAGES`] pages whole.
    Adaptive,
}

impl Kernel {
    const ALL: [Kernel; 5] = [
        Kernel::Eager,
        Kernel::Mainline,
        Kernel::Direct,
        Kernel::Prefault,
        Kernel::Adaptive,
    ];

    pub fn from_name(name: &str) -> Option<Kernel> {
        Kernel::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The plan's name of the kernel, which `--kernel` takes.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Eager => "eager",
            Kernel::Mainline => "mainline",
            Kernel::Direct => "direct",
            Kernel::Prefault => "prefault",
            Kernel::Adaptive => "adaptive",
        }
    }

    /// How the kernel fills a mapping ([`model`]).
    pub fn fill(self) -> Fill {
        match self {
            Kernel::Eager => Fill::Eager,
            Kernel::Mainline | Kernel::Direct => Fill::PerPage,
            Kernel::Prefault | Kernel::Adaptive => Fill::Growing,
        }
    }

    /// Whether mmap() inserts every page of a mapping of `pages` pages.
    pub fn populates(self, pages: usize) -> bool {
        match self {
            Kernel::Eager => true,
            Kernel::Adaptive => pages <= POPULATE_PAGES,
            _ => false,
        }
    }

    /// Whether an array map's fault hands the page back to the core in
    /// vmf->page, so that a write fault goes through do_shared_fault(),
    /// which dirties the page and updates the shared anon inode's times
    /// (0001 alone: 0002 maps the page in the handler).
    pub fn array_fault_returns_page(self) -> bool {
        self == Kernel::Mainline
    }

    /// The same for an arena map's fault: eager and mainline (7.3's arena) (0003 maps the
    /// page in the handler, and sets VM_MIXEDMAP on the VMA for it).
    pub fn arena_fault_returns_page(self) -> bool {
        matches!(self, Kernel::Eager | Kernel::Mainline)
    }
}

/// What a test knows about its environment.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    pub kernel: Kernel,
}

impl Ctx {
    /// Pages are inserted by faults, not by mmap() (every variant).
    pub fn is_lazy(&self) -> bool {
        self.kernel != Kernel::Eager
    }

    /// The expectation for the kernel we run on, where the lazy kernels
    /// must agree: `lazy` on every variant, `eager` on eager.
    pub fn pick<T>(&self, lazy: T, eager: T) -> T {
        if self.is_lazy() {
            lazy
        } else {
            eager
        }
    }

    /// Whether mmap() inserts every page of a mapping of `pages` pages:
    /// on eager, and on adaptive up to [`POPULATE_PAGES`].
    pub fn populates(&self, pages: usize) -> bool {
        self.kernel.populates(pages)
    }

    /// What a fresh mapping of `pages` pages shows before any access:
    /// `populated` where mmap() inserted every page, `lazy` elsewhere.
    pub fn pick_at_mmap<T>(&self, pages: usize, lazy: T, populated: T) -> T {
        if self.populates(pages) {
            populated
        } else {
            lazy
        }
    }

    /// The map pages present in a mapping of map pages `vma` (first page
    /// offset .. end) after user space touched the map pages `touched`
    /// through it, in this order, starting untouched ([`model`]). Sorted.
    pub fn present_after(&self, vma: std::ops::Range<usize>, touched: &[usize]) -> Vec<usize> {
        Filled::new(self.kernel, vma).touch(touched).pages()
    }

    /// The same, in a mapping whose map pages `present` are mapped already.
    pub fn present_after_from(
        &self,
        vma: std::ops::Range<usize>,
        present: &[usize],
        touched: &[usize],
    ) -> Vec<usize> {
        Filled::with_present(self.kernel, vma, present)
            .touch(touched)
            .pages()
    }

    /// The faults user space takes to touch `touched` as `present_after`.
    pub fn faults_after(&self, vma: std::ops::Range<usize>, touched: &[usize]) -> u64 {
        Filled::new(self.kernel, vma).touch(touched).faults as u64
    }

    /// How many bytes of the mapping `present_after` makes resident.
    pub fn rss_after(&self, vma: std::ops::Range<usize>, touched: &[usize]) -> u64 {
        (self.present_after(vma, touched).len() * 4096) as u64
    }
}

impl fmt::Display for Ctx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.kernel {
            Kernel::Mainline => "mainline kernel",
            Kernel::Direct => "direct kernel",
            Kernel::Prefault => "prefault kernel",
            Kernel::Adaptive => "adaptive kernel",
            Kernel::Eager => "eager kernel",
        })
    }
}

/// A test's reason for not running (only for missing environment).
#[derive(Debug)]
pub struct Skip(pub String);

impl Skip {
    pub fn new(reason: impl Into<String>) -> Skip {
        Skip(reason.into())
    }
}

pub type TestFn = fn(&Ctx) -> Result<(), Skip>;

#[derive(Clone, Copy)]
pub struct Test {
    pub name: &'static str,
    pub func: TestFn,
    pub timeout: Duration,
}

/// Most tests take 0.02-0.1 s under TCG (up to 1.2 s on the debug kernel,
/// where the host asks for 3x): a fault that never completes costs this
/// much, not a minute. Slower tests set their own.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

impl Test {
    pub const fn new(name: &'static str, func: TestFn) -> Test {
        Test {
            name,
            func,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    pub const fn with_timeout(mut self, secs: u64) -> Test {
        self.timeout = Duration::from_secs(secs);
        self
    }
}

const HOST_SKIP: &str = "guest-only: run cargo xtask vmtest";

/// The tests whose name contains any of `filters` (all if none), in plan
/// order.
pub fn selected(filters: &[String]) -> Vec<Test> {
    crate::tests::ALL
        .iter()
        .filter(|t| filters.is_empty() || filters.iter().any(|f| t.name.contains(f.as_str())))
        .copied()
        .collect()
}

/// Where result lines go besides stdout.
struct ResultSink {
    file: Option<File>,
}

impl ResultSink {
    fn open(path: Option<&str>) -> io::Result<ResultSink> {
        let Some(path) = path else {
            return Ok(ResultSink { file: None });
        };
        let regular = std::fs::metadata(path).map(|m| m.is_file()).unwrap_or(true);
        let file = port::open(path, regular)?;
        // Raw mode is best effort here: a cooked port still gets the lines.
        let _ = port::set_raw(&file);
        Ok(ResultSink { file: Some(file) })
    }

    fn emit(&mut self, line: &Line) {
        let start = matches!(line, Line::Start(_));
        let line = line.to_string();
        if let Some(f) = &self.file {
            if let Err(e) = port::write_line(f, &format!("{line}\n")) {
                eprintln!("[selftests] writing results: {e}");
            }
            // The next test may kill the kernel: its START line must be out.
            port::drain(f);
        }
        println!("{line}");
        let _ = io::stdout().flush();
        // On the console too, before the test's own kernel messages: the
        // host counts a splat after it as the test's.
        if start {
            port::drain_stdout();
        }
    }
}

/// Makes a message fit on one protocol line.
pub fn one_line(msg: &str) -> String {
    let joined = msg
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join(guest_common::protocol::LINE_BREAK);
    let clean: String = joined
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    const MAX: usize = 3000;
    if clean.len() <= MAX {
        clean
    } else {
        let mut end = MAX;
        while !clean.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &clean[..end])
    }
}

#[derive(Debug)]
enum Outcome {
    Pass,
    Skip(String),
    Fail(String),
}

/// `BPFLAB-PLAN <n> <names...>`: the host lists what was never reached
/// if the guest dies.
fn plan_line(tests: &[Test]) -> Line {
    Line::Plan {
        count: tests.len(),
        names: tests.iter().map(|t| t.name.to_string()).collect(),
    }
}

fn result_line(name: &str, word: ResultWord, ms: u128, msg: &str) -> Line {
    Line::Result(TestLine {
        name: name.to_string(),
        word,
        millis: u64::try_from(ms).unwrap_or(u64::MAX),
        message: one_line(msg),
    })
}

/// Host mode: report each selected test as skipped. Returns their number.
pub fn run_host(filters: &[String], results: Option<&str>) -> io::Result<usize> {
    let tests = selected(filters);
    let mut sink = ResultSink::open(results)?;
    sink.emit(&plan_line(&tests));
    for t in &tests {
        sink.emit(&result_line(t.name, ResultWord::Skip, 0, HOST_SKIP));
    }
    Ok(tests.len())
}

/// The whole command line; returns the exit code.
pub fn main_with_args(args: &[String]) -> i32 {
    let opts = match options::parse_args(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("selftests: {e}\n{USAGE}");
            return 2;
        }
    };
    if opts.help {
        println!("{USAGE}");
        return 0;
    }
    if opts.list {
        for t in selected(&opts.filters) {
            println!("{}", t.name);
        }
        return 0;
    }
    let Some(kernel) = opts.kernel else {
        return match run_host(&opts.filters, opts.results.as_deref()) {
            Ok(_) => 0,
            Err(e) => {
                eprintln!("selftests: cannot open results file: {e}");
                2
            }
        };
    };
    let mut sink = match ResultSink::open(opts.results.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("selftests: cannot open results file: {e}");
            return 2;
        }
    };
    GuestRun::new(Ctx { kernel }, &opts).run(&selected(&opts.filters), &mut sink)
}

/// One pass over the selected tests in the guest.
struct GuestRun<'a> {
    ctx: Ctx,
    opts: &'a Options,
    kmsg: Option<Kmsg>,
    passed: usize,
    failed: usize,
    skipped: usize,
    not_run: usize,
    /// Why the remaining tests are not run, once the runner stopped.
    stopped: Option<String>,
}

impl<'a> GuestRun<'a> {
    fn new(ctx: Ctx, opts: &'a Options) -> GuestRun<'a> {
        child::install_panic_hook();
        // Orphaned grandchildren of a test are reparented to us and reaped.
        // SAFETY: plain prctl.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        let kmsg = Kmsg::open_at_end()
            .inspect_err(|e| {
                println!("[selftests] warning: cannot read /dev/kmsg ({e}); per-test dmesg checks disabled")
            })
            .ok();
        GuestRun {
            ctx,
            opts,
            kmsg,
            passed: 0,
            failed: 0,
            skipped: 0,
            not_run: 0,
            stopped: None,
        }
    }

    fn run(mut self, tests: &[Test], sink: &mut ResultSink) -> i32 {
        let ctx = self.ctx;
        println!("[selftests] running {} tests on the {ctx}", tests.len());
        sink.emit(&plan_line(tests));
        for t in tests {
            if let Some(why) = &self.stopped {
                self.not_run += 1;
                sink.emit(&result_line(t.name, ResultWord::NotRun, 0, why));
                continue;
            }
            sink.emit(&Line::Start(t.name.to_string()));
            let start = Instant::now();
            let outcome = self.run_one(t);
            self.record(t, outcome, start.elapsed().as_millis(), sink);
        }
        println!(
            "[selftests] {} passed, {} failed, {} skipped, {} not run on the {ctx}",
            self.passed, self.failed, self.skipped, self.not_run
        );
        i32::from(self.failed > 0)
    }

    fn injection(&self, t: &Test) -> Option<InjectKind> {
        let inject = self.opts.inject.as_ref()?;
        (inject.test == t.name).then_some(inject.kind)
    }

    fn scaled(&self, d: Duration) -> Duration {
        d * self.opts.timeout_scale
    }

    /// Runs `t`, waits for its maps to go, and judges its kernel messages.
    fn run_one(&mut self, t: &Test) -> Outcome {
        let inject = self.injection(t);
        if inject == Some(InjectKind::Freeze) {
            println!(
                "[selftests] inject=freeze: the runner stops responding in {}",
                t.name
            );
            loop {
                std::thread::sleep(Duration::from_secs(3600));
            }
        }
        let before = settle::live_maps().unwrap_or_default();
        let mut outcome = isolate::run_isolated(t, &self.ctx, self.scaled(t.timeout), inject);
        let gone = settle::await_maps_gone(
            &before,
            settle::live_maps,
            self.scaled(settle::MAP_GONE_TIMEOUT),
        );
        match gone {
            Ok(_) => std::thread::sleep(self.scaled(settle::FREE_GRACE)),
            Err(msg) => outcome = add_failure(outcome, msg),
        }
        // Per-test half of T28: anything the kernel reported meanwhile.
        if let Some(k) = self.kmsg.as_mut() {
            let splats = find_splats(&k.read_new());
            if !splats.is_empty() {
                let shown: Vec<_> = splats.iter().take(5).cloned().collect();
                let report = format!("kernel splat in dmesg: {}", shown.join("\n"));
                outcome = add_failure(outcome, report);
            }
        }
        outcome
    }

    fn record(&mut self, t: &Test, outcome: Outcome, ms: u128, sink: &mut ResultSink) {
        match outcome {
            Outcome::Pass => {
                self.passed += 1;
                sink.emit(&result_line(t.name, ResultWord::Pass, ms, ""));
                println!("[selftests] {} ok ({ms} ms)", t.name);
            }
            Outcome::Skip(reason) => {
                self.skipped += 1;
                sink.emit(&result_line(t.name, ResultWord::Skip, 0, &reason));
                println!("[selftests] {} skipped: {}", t.name, one_line(&reason));
            }
            Outcome::Fail(msg) => {
                self.failed += 1;
                sink.emit(&result_line(t.name, ResultWord::Fail, ms, &msg));
                println!(
                    "[selftests] {} FAILED ({ms} ms): {}",
                    t.name,
                    one_line(&msg)
                );
                if let Some(max) = self.opts.max_failures.filter(|m| self.failed >= *m) {
                    self.stopped = Some(format!(
                        "the runner stopped after {max} failure(s) (--max-failures {max} / --fail-fast)"
                    ));
                }
            }
        }
    }
}

/// A failure found after the test body: it fails the test either way.
fn add_failure(outcome: Outcome, msg: String) -> Outcome {
    match outcome {
        Outcome::Fail(m) => Outcome::Fail(format!("{m} | {msg}")),
        _ => Outcome::Fail(msg),
    }
}

#[cfg(test)]
mod unit {
    use super::options::args;
    use super::*;

    #[test]
    fn every_plan_kernel_has_expectations() {
        for name in guest_common::protocol::PLAN_KERNELS {
            assert_eq!(Kernel::from_name(name).map(Kernel::name), Some(name));
        }
        assert_eq!(Kernel::from_name("other"), None);
    }

    #[test]
    fn rss_follows_the_model() {
        let on = |kernel| Ctx { kernel };
        for kernel in [Kernel::Prefault, Kernel::Adaptive] {
            // 0 alone, 1 next to it maps 1..3, 2047 alone.
            assert_eq!(on(kernel).rss_after(0..2048, &[0, 1, 2047]), 4 * 4096);
        }
        assert_eq!(on(Kernel::Adaptive).rss_after(0..16, &[]), 16 * 4096);
        assert_eq!(on(Kernel::Prefault).rss_after(0..16, &[]), 0);
    }

    #[test]
    fn bad_options_exit_2() {
        assert_eq!(main_with_args(&args(&["--nope"])), 2);
    }

    #[test]
    fn registry_is_in_plan_order_and_complete() {
        let names: Vec<&str> = crate::tests::ALL.iter().map(|t| t.name).collect();
        let ids: Vec<u32> = names
            .iter()
            .map(|n| {
                assert!(
                    n.starts_with('t') && n.as_bytes()[3] == b'_',
                    "bad test name {n}"
                );
                n[1..3].parse().unwrap()
            })
            .collect();
        assert!(
            ids.windows(2).all(|w| w[0] <= w[1]),
            "tests not in plan order: {names:?}"
        );
        let mut dedup = names.clone();
        dedup.sort();
        dedup.dedup();
        assert_eq!(dedup.len(), names.len(), "duplicate test names");
        assert!(names.contains(&"t14_dontneed_then_touch"));
    }

    #[test]
    fn filters_select_by_substring() {
        assert_eq!(selected(&[]).len(), crate::tests::ALL.len());
        let s = selected(&args(&["t14_", "t01_"]));
        assert!(s
            .iter()
            .all(|t| t.name.starts_with("t14_") || t.name.starts_with("t01_")));
        assert!(s.len() >= 2);
        assert!(selected(&args(&["no-such-test"])).is_empty());
    }

    #[test]
    fn messages_fit_one_line() {
        assert_eq!(one_line("a\nb\r\n\n  c  \n"), "a | b |   c");
        assert_eq!(one_line("tab\there"), "tab here");
        assert!(one_line(&"x".repeat(5000)).len() < 3100);
    }

    #[test]
    fn host_mode_reports_skips_to_the_results_file() {
        let path = std::env::temp_dir().join(format!("selftests-host-{}.txt", std::process::id()));
        let p = path.to_str().unwrap().to_string();
        assert_eq!(main_with_args(&args(&["--results", &p, "t01_"])), 0);
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        let lines: Vec<&str> = text.lines().collect();
        let names: Vec<&str> = lines[1..]
            .iter()
            .map(|l| l.split(' ').nth(1).unwrap())
            .collect();
        assert_eq!(
            lines[0],
            format!("BPFLAB-PLAN {} {}", lines.len() - 1, names.join(" "))
        );
        assert!(lines[1].starts_with("BPFLAB-RESULT t01_"));
        assert!(lines[1].ends_with(&format!(" skip 0 {HOST_SKIP}")));
    }

    #[test]
    fn ctx_picks_the_side() {
        let p = Ctx {
            kernel: Kernel::Mainline,
        };
        let b = Ctx {
            kernel: Kernel::Eager,
        };
        assert_eq!((p.pick(0, 1), b.pick(0, 1)), (0, 1));
        assert_eq!(p.to_string(), "mainline kernel");
    }
}
