//! test_progs on one kernel, in as many boots as it takes: a test that
//! hangs the guest (test_progs 6.12 has no watchdog) or crashes the kernel
//! is reported as crashed, and a fresh boot resumes after it, so one bad
//! test costs one test's result, not the rest of the run. (test_progs's
//! `-n` cannot resume: a number range replaces the name filters rather
//! than narrowing them, so the tests already done are denied instead.)

use std::fs;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use guest_common::request::HostCommand;

use super::runner::Runner;
use super::{maps_verifier_output, parse};
use crate::report::protocol::{Status, TestResult};
use crate::vm::assess;
use crate::vm::failed::VmFailed;
use crate::vm::process::{VmEnd, VmOutcome};
use crate::vm::relay::LinePrefixed;
use crate::vm::session::{BootSpec, GuestRun, Session};
use crate::vm::symbolize;
use crate::vm::targets::Target;

/// Under TCG, as long as test_progs may print nothing: it prints a test's
/// lines when the test ends, and its slowest tests (the verifier's, with
/// hundreds of subtests) take minutes. 3x on debug kernels.
pub const OUTPUT_STALL_SECS: u64 = 600;

/// test_progs's exit status when no test matches its filters
/// (`EXIT_NO_TEST` in test_progs.c).
const EXIT_NO_TEST: i32 = 2;

/// test_progs's tests: all of them in its order (a test's number is its
/// place, from 1), and those the arguments select.
#[derive(Debug, Default)]
pub struct Numbering {
    pub all: Vec<String>,
    pub selected: Vec<String>,
}

/// The tests `runner` selects with `args`, in its order, as the host's
/// run of the same test_progs lists them (`-l` loads nothing into the
/// kernel); none when its filters select nothing.
pub fn list_tests(dir: &Path, runner: Runner, args: &[String]) -> Result<Vec<String>> {
    let out = Command::new(dir.join(runner.name()))
        .arg("-l")
        .args(args)
        .current_dir(dir)
        .output()
        .with_context(|| format!("listing the tests of {}/{}", dir.display(), runner.name()))?;
    // Filters that select nothing: test_progs's EXIT_NO_TEST.
    if out.status.code() == Some(EXIT_NO_TEST) && out.stdout.is_empty() {
        return Ok(Vec::new());
    }
    if !out.status.success() {
        bail!(
            "{} -l {}: {}",
            runner.name(),
            args.join(" "),
            crate::util::output_text(&out)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect())
}

impl Numbering {
    /// Every test, and those `argv` selects (`list_tests`).
    pub fn of(dir: &Path, runner: Runner, argv: &[String]) -> Result<Numbering> {
        Ok(Numbering {
            all: list_tests(dir, runner, &[])?,
            selected: list_tests(dir, runner, argv)?,
        })
    }

    fn number(&self, name: &str) -> Option<usize> {
        self.all.iter().position(|t| t == name).map(|i| i + 1)
    }

    /// The selected tests numbered up to `n`.
    pub fn up_to(&self, n: usize) -> Vec<&str> {
        self.selected
            .iter()
            .filter(|t| self.number(t).is_some_and(|m| m <= n))
            .map(String::as_str)
            .collect()
    }

    /// The first selected test numbered after `last`: the one running when
    /// output stopped after test `last`'s lines.
    pub fn next_after(&self, last: usize) -> Option<(usize, &str)> {
        self.selected
            .iter()
            .filter_map(|t| self.number(t).map(|n| (n, t.as_str())))
            .filter(|(n, _)| *n > last)
            .min_by_key(|(n, _)| *n)
    }
}

/// What the boots of one kernel gave.
pub struct KernelResults {
    pub results: Vec<TestResult>,
    /// A VM failure that ended the run for good (a timeout, or one that
    /// cannot be resumed past).
    pub vm_failure: Option<VmFailed>,
    pub accel: String,
    pub seconds: f64,
    /// test_progs's stderr, last lines.
    pub stderr_tail: Vec<String>,
    pub summary_seen: bool,
    pub status: String,
}

/// One runner on one kernel: where it runs, with what arguments, and (for
/// test_progs) the numbering that lets a run resume after a crash.
pub struct Job<'a> {
    pub runner: Runner,
    pub dir: &'a Path,
    pub argv: &'a [String],
    pub numbering: &'a Numbering,
    pub stall: u64,
    /// test_progs's workers (`-j`); a parallel boot that dies is followed
    /// by serial ones, which can name the test that killed it.
    pub parallel: Option<usize>,
    /// With guests running side by side, what the relayed output's lines
    /// start with.
    pub label: Option<String>,
}

/// What one boot's output says, by runner.
fn parse_output(runner: Runner, stdout: &str) -> parse::Parsed {
    match runner {
        Runner::Maps => maps_verifier_output::parse_maps(stdout),
        Runner::Verifier => maps_verifier_output::parse_verifier(stdout),
        _ => parse::parse(stdout),
    }
}

/// Where a run stands between boots: which tests later boots deny, and
/// whether they run in parallel.
struct Resume<'a> {
    numbering: &'a Numbering,
    /// Tests up to this number are done (or hung).
    done: Option<usize>,
    /// Tests a parallel boot reported.
    reported: Vec<String>,
    parallel: Option<usize>,
}

impl Resume<'_> {
    /// The next boot's arguments.
    fn args(&self, argv: &[String]) -> Vec<String> {
        let mut args = argv.to_vec();
        let mut deny: Vec<String> = self.done.map_or_else(Vec::new, |n| {
            self.numbering
                .up_to(n)
                .into_iter()
                .map(str::to_string)
                .collect()
        });
        deny.extend(self.reported.iter().cloned());
        if !deny.is_empty() {
            args.extend(["-d".to_string(), deny.join(",")]);
        }
        if let Some(n) = self.parallel {
            args.push(format!("-j{n}"));
        }
        args
    }

    /// After a boot the VM failed, whether another boot can go on past
    /// what stopped it: a parallel boot is followed by serial ones, a
    /// serial one resumes after the test that was running (reported as
    /// crashed). False: the failure ends the run.
    fn past(
        &mut self,
        target: &Target,
        all: &mut KernelResults,
        ran: &GuestRun,
        last: usize,
    ) -> bool {
        let Some(failed) = &ran.vm_failure else {
            return false;
        };
        let cause = failed.headline();
        let timed_out = matches!(ran.outcome.end, VmEnd::Timeout);
        // A guest that never booted stopped no test: that is the VM's.
        if all.summary_seen || timed_out || !failed.reached_init {
            return false;
        }
        if self.parallel.take().is_some() {
            eprintln!(
                "== {}: a parallel boot stopped ({cause}); the rest runs serially, to name the test",
                target.name
            );
            self.reported = top_level_names(&all.results);
            return true;
        }
        let Some((n, name)) = self.numbering.next_after(last) else {
            return false;
        };
        eprintln!(
            "== {}: {name} stopped the guest ({cause}); resuming after it",
            target.name
        );
        all.results.push(TestResult::with_lines(
            name,
            Status::Crashed,
            crash_lines(&cause, &ran.outcome),
        ));
        self.done = Some(n);
        true
    }
}

/// Runs `job`'s runner with its `argv` in its `dir` on `target`,
/// resuming after a test that hung or crashed the guest.
pub fn run(session: &mut Session, target: &Target, job: &Job) -> Result<KernelResults> {
    let mut all = KernelResults {
        results: Vec::new(),
        vm_failure: None,
        accel: String::new(),
        seconds: 0.0,
        stderr_tail: Vec::new(),
        summary_seen: false,
        status: "?".into(),
    };
    let mut resume = Resume {
        numbering: job.numbering,
        done: None,
        reported: Vec::new(),
        parallel: job.parallel.filter(|_| job.runner.is_test_progs()),
    };
    let mut consoles = Vec::new();
    for boot in 1.. {
        let args = resume.args(job.argv);
        let (ran, stdout, stderr) = boot_once(session, target, job, &args, boot)?;
        let parsed = parse_output(job.runner, &stdout);
        all.accel = ran.accel.name().into();
        all.seconds += ran.outcome.elapsed.as_secs_f64();
        all.stderr_tail = crate::util::last_lines(&stderr, 8)
            .lines()
            .map(str::to_string)
            .collect();
        all.status = status_of(&ran);
        all.summary_seen = parsed.summary.is_some();
        let last = parse::last_number(&stdout).max(resume.done.unwrap_or(0));
        all.results.extend(parsed.results);
        let mut console = assess::console_check(&ran.outcome, &all.results);
        symbolize::onto_console_check(&mut console, &ran.outcome, target.vmlinux());
        consoles.push(console);
        if ran.vm_failure.is_none() {
            break;
        }
        if !resume.past(target, &mut all, &ran, last) {
            all.vm_failure = ran.vm_failure;
            break;
        }
    }
    // One console check per kernel, whatever the number of boots: the
    // first that failed, else a pass.
    let mut console = consoles
        .iter()
        .find(|c| c.status != Status::Pass)
        .or(consoles.last())
        .cloned()
        .context("no boot ran")?;
    console.name = super::CONSOLE_CHECK.into();
    all.results.push(console);
    Ok(all)
}

/// The tests (not subtests) that have a result, each once.
fn top_level_names(results: &[TestResult]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for r in results {
        let top = r.name.split('/').next().unwrap_or(&r.name).to_string();
        if top != super::CONSOLE_CHECK && !names.contains(&top) {
            names.push(top);
        }
    }
    names
}

/// What a crashed test's KTAP diagnostics and JUnit error carry: the
/// cause, the first splat and what followed it (or the console's last
/// lines), and the boot's own console log.
fn crash_lines(cause: &str, outcome: &VmOutcome) -> Vec<String> {
    let mut parts = vec![cause.to_string()];
    let excerpt: Vec<&String> = match outcome.splat_in_test.split_first() {
        Some((first, after)) => {
            parts.push(format!("first splat: {}", first.trim()));
            after.iter().collect()
        }
        None => outcome.tail.iter().rev().take(8).rev().collect(),
    };
    parts.extend(excerpt.iter().map(|l| l.trim_end().to_string()));
    parts.push(format!("console: {}", outcome.console_log.display()));
    parts.push("the run resumed after it in a new boot".into());
    parts
}

/// One boot of a runner; its output files are `<runner>-<kernel>-<boot>.*`.
fn boot_once(
    session: &mut Session,
    target: &Target,
    job: &Job,
    argv: &[String],
    boot: usize,
) -> Result<(GuestRun, String, String)> {
    let stem = format!("{}-{}-{boot}", job.runner.name(), target.name);
    let out = session.run_dir().join(format!("{stem}.out"));
    let err = session.run_dir().join(format!("{stem}.err"));
    let spec = BootSpec {
        host_command: Some(command(job.dir, job.runner, argv)?),
        output_stall: Some(job.stall),
        tcg_threads: Some(job.runner.tcg_threads()),
    };
    // Live, as test_progs prints it; parsed from the file afterwards.
    let live = || -> Box<dyn std::io::Write + Send> {
        match &job.label {
            Some(label) => Box::new(LinePrefixed::new(label, std::io::stderr())),
            None => Box::new(std::io::stderr()),
        }
    };
    let ran = session.run_command_relayed(target, spec, (&out, &err), live(), live())?;
    let read = |path: &Path| {
        fs::read(path)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .with_context(|| format!("reading the runner's output {}", path.display()))
    };
    let (stdout, stderr) = (read(&out)?, read(&err)?);
    Ok((ran, stdout, stderr))
}

/// test_maps's own knobs, set for every kernel. 7.3's socket storage
/// allocates with kmalloc_nolock(), which gives up (ENOMEM) when a
/// trylock of the slab or the zone finds it held: four threads making
/// 4096 sockets' storage each on four TCG vCPUs met that in 3 of 6 runs
/// of test_sk_storage_map_stress_free (eager twice, adaptive), and
/// test_maps stops at its first failure. One thread meets no contention.
const TEST_MAPS_ENV: &[(&str, &str)] = &[("BPF_SK_STORAGE_MAP_TEST_NR_THREADS", "1")];

/// What the guest runs: test_progs in the kernel's own directory.
fn command(dir: &Path, runner: Runner, argv: &[String]) -> Result<HostCommand> {
    let dir = dir
        .to_str()
        .context("the cache path is not UTF-8; use --cache-dir with a UTF-8 path")?;
    // Line-buffered: test_progs's stdout is a file, and a test's lines
    // must arrive when it ends (the stall limit watches them).
    let mut full: Vec<String> = ["stdbuf", "-oL", "-eL"].map(String::from).to_vec();
    full.push(format!("{dir}/{}", runner.name()));
    full.extend(argv.iter().cloned());
    let mut env = vec![
        (
            "PATH".into(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
        ),
        ("HOME".into(), "/root".into()),
    ];
    if runner == Runner::Maps {
        env.extend(
            TEST_MAPS_ENV
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string())),
        );
    }
    Ok(HostCommand {
        argv: full,
        cwd: dir.to_string(),
        env,
        shell: false,
        stdin: false,
        rows: 0,
        cols: 0,
    })
}

/// test_progs's exit status from the guest's verdict (`?` without one).
fn status_of(ran: &GuestRun) -> String {
    ran.report
        .verdict
        .status()
        .map_or_else(|| "?".to_string(), |s| s.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crash_carries_its_splat_and_its_own_console() {
        let mut o = VmOutcome {
            end: VmEnd::Exited { code: Some(0) },
            console_log: "/r/console-base-2.log".into(),
            tail: (1..=10).map(|i| format!("line {i}")).collect(),
            splats: vec![],
            splat_in_test: vec![],
            splats_before_last_start: 0,
            panic: None,
            boot_secs: Some(1.0),
            elapsed: std::time::Duration::from_secs(3),
            qemu_stderr: vec![],
        };
        let m = crash_lines("the kernel panicked: Fatal exception", &o).join(" | ");
        assert!(
            m.starts_with("the kernel panicked: Fatal exception | line 3 |"),
            "{m}"
        );
        assert!(
            m.contains("line 10 | console: /r/console-base-2.log | the run resumed"),
            "{m}"
        );
        o.splat_in_test = vec!["BUG: unable to handle page fault".into(), "RIP: x".into()];
        let m = crash_lines("the kernel panicked", &o).join(" | ");
        assert!(
            m.starts_with("the kernel panicked | first splat: BUG: unable to handle page fault | RIP: x | console:"),
            "{m}"
        );
    }

    #[test]
    fn the_hung_test_is_the_next_selected_one() {
        let n = Numbering {
            all: ["a", "b", "c", "d", "e"].map(String::from).to_vec(),
            selected: ["a", "c", "e"].map(String::from).to_vec(),
        };
        assert_eq!(n.next_after(0), Some((1, "a")));
        assert_eq!(n.next_after(1), Some((3, "c")));
        assert_eq!(n.next_after(3), Some((5, "e")));
        assert_eq!(n.next_after(5), None);
        assert_eq!(n.up_to(3), ["a", "c"]);
    }
}
