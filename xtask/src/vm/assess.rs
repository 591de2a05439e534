//! Assessing one guest run, pure: whether the VM did its job (a panic, a
//! timeout, a missing verdict or a program that could not run say it did
//! not, and what arrived is kept), what its kernel said of itself (a
//! panic, a splat: a failure with neither is the host's), and the
//! harness's own console check.

use anyhow::{bail, Result};
use guest_common::protocol::Program;

use super::failed::VmFailed;
use super::process::{Limits, VmEnd, VmOutcome};
use crate::report::protocol::{self, Death, GuestReport, Outcome, Status, TestResult, Verdict};

/// An assessed guest run: its report, and why the VM failed its job if it
/// did (the report then holds what could be kept).
#[derive(Debug)]
pub struct Assessed {
    pub report: GuestReport,
    pub vm_failure: Option<VmFailed>,
}

/// Why the VM did not finish by itself, in order of what explains the
/// most: a panic, then a timeout.
fn vm_death(outcome: &VmOutcome, limits: &Limits) -> Option<String> {
    if let Some(panic) = &outcome.panic {
        return Some(format!("the kernel panicked: {}", panic.trim()));
    }
    match &outcome.end {
        VmEnd::BootTimeout => Some(format!(
            "the guest did not reach /init within {:?}; QEMU was killed",
            limits.boot
        )),
        VmEnd::Timeout => Some(format!(
            "the guest hung: no end within {:?}; QEMU was killed",
            limits.overall
        )),
        VmEnd::Stalled if limits.output.is_some() => Some(format!(
            "the guest hung: the command printed nothing for {:?}; QEMU was killed",
            limits.stall
        )),
        VmEnd::Stalled => Some(format!(
            "the guest hung: no results line for {:?}; QEMU was killed",
            limits.stall
        )),
        VmEnd::KvmFailure(line) => Some(format!("KVM failed: {line}")),
        VmEnd::Exited { .. } | VmEnd::NoPowerOff => None,
    }
}

/// What QEMU itself said, for a run that ended without a verdict.
fn qemu_said(outcome: &VmOutcome) -> String {
    let mut said = String::new();
    if let VmEnd::Exited { code: Some(code) } = outcome.end {
        if code != 0 {
            said = format!("; QEMU exited with status {code}");
        }
    }
    if !outcome.qemu_stderr.is_empty() {
        said += &format!("; QEMU said: {}", outcome.qemu_stderr.join(" / "));
    }
    said
}

/// The report of a VM that did its job, or why it did not.
fn failure_of(
    outcome: &VmOutcome,
    results: Option<&str>,
    limits: &Limits,
    program: Program,
) -> std::result::Result<GuestReport, String> {
    Err(match (vm_death(outcome, limits), results) {
        (Some(death), _) => death,
        (None, None) => format!("QEMU wrote no results file{}", qemu_said(outcome)),
        (None, Some(results)) => match protocol::parse_results(results, program) {
            Ok(report) if report.verdict.outcome == Outcome::Error => format!(
                "the guest could not run its program: {}",
                report.verdict.detail
            ),
            Ok(report) => return Ok(report),
            Err(err) => format!("{err}{}", qemu_said(outcome)),
        },
    })
}

/// Decides whether the VM did its job. When it did not (a panic, a
/// timeout, a missing verdict, a program that could not run), every
/// result that arrived is kept, the test that was running is marked
/// crashed and the rest not run, as far as the guest announced its plan;
/// a test run with no plan keeps no result, any other run is an error. The
/// failure leads with `lacks`, the option the boot log says the kernel
/// lacks (`boot_log`), if any; a run that did its job never mentions it.
pub fn assess(
    outcome: &VmOutcome,
    results: Option<&str>,
    limits: &Limits,
    program: Program,
    lacks: Option<&str>,
) -> Result<Assessed> {
    let failure = match failure_of(outcome, results, limits, program) {
        Ok(report) => {
            return Ok(Assessed {
                report,
                vm_failure: None,
            })
        }
        Err(failure) => failure,
    };
    let failed = VmFailed::of_run(outcome, failure, lacks);
    let failure = failed.headline();
    let tail = &outcome.tail[outcome.tail.len().saturating_sub(12)..];
    // From the first splat of the running test on, or else the last lines.
    let death = match outcome.splat_in_test.split_first() {
        Some((first, after)) => Death {
            cause: failure.clone(),
            first_splat: Some(first.clone()),
            excerpt: after.to_vec(),
        },
        None => Death {
            cause: failure.clone(),
            first_splat: None,
            excerpt: tail[tail.len().saturating_sub(8)..].to_vec(),
        },
    };
    // A host command has no plan to salvage: the caller gets the outcome
    // (its output files, the console) with the failure.
    if program == Program::Command {
        return Ok(Assessed {
            report: GuestReport {
                results: Vec::new(),
                verdict: Verdict::error(failure),
                bench: Vec::new(),
                fuzz: Vec::new(),
            },
            vm_failure: Some(failed),
        });
    }
    let Ok(transcript) = protocol::read_transcript(results.unwrap_or_default()) else {
        bail!("{failed}");
    };
    // The fuzzer's progress so far says which operations killed it.
    if program == Program::Fuzz {
        return Ok(Assessed {
            report: GuestReport {
                results: Vec::new(),
                verdict: Verdict::error(failure),
                bench: Vec::new(),
                fuzz: transcript.fuzz,
            },
            vm_failure: Some(failed),
        });
    }
    // A test run that died before its plan keeps nothing but the
    // failure, which the caller needs with the outcome: a panic at boot
    // is the kernel's, not the host's.
    let kept = match protocol::salvage(&transcript, &death) {
        Some(kept) => kept,
        None if program == Program::Selftests => Vec::new(),
        None => bail!("{failed}"),
    };
    Ok(Assessed {
        report: GuestReport {
            results: kept,
            verdict: Verdict::error(failure),
            bench: transcript.bench,
            fuzz: transcript.fuzz,
        },
        vm_failure: Some(failed),
    })
}

/// The name of the harness's own T28 check.
pub const CONSOLE_CHECK: &str = "t28_console_clean";

/// The harness's own T28 check: a clean console, as one more result.
/// When a test crashed, the splats from its start on are already its
/// failure: only the ones before count here, so one crash is not counted
/// twice.
pub fn console_check(outcome: &VmOutcome, results: &[TestResult]) -> TestResult {
    let crashed = results.iter().any(|r| r.status == Status::Crashed);
    let splats = if crashed {
        &outcome.splats[..outcome.splats_before_last_start]
    } else {
        &outcome.splats[..]
    };
    TestResult {
        name: CONSOLE_CHECK.into(),
        status: if splats.is_empty() {
            Status::Pass
        } else {
            Status::Fail
        },
        millis: 0,
        message: match splats.first() {
            None => String::new(),
            Some(first) => format!(
                "kernel reported {} problem line(s) on the console, first: {} (see {})",
                splats.len(),
                first.trim(),
                outcome.console_log.display()
            ),
        },
        detail: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vm::failed::{kernel_sign, KernelSign};
    use crate::vm::qemu::Accel;
    use crate::vm::session::limits;
    use std::time::Duration;

    fn outcome(end: VmEnd) -> VmOutcome {
        VmOutcome {
            end,
            console_log: "/tmp/console.log".into(),
            tail: vec!["[    1.0] Run /init as init process".into()],
            splats: vec![],
            splat_in_test: vec![],
            splats_before_last_start: 0,
            panic: None,
            boot_secs: Some(1.5),
            elapsed: Duration::from_secs(3),
            qemu_stderr: vec![],
        }
    }

    fn lim() -> Limits {
        limits(Accel::Tcg, false, None, None)
    }

    const OK: &str = "BPFLAB-PLAN 1\nBPFLAB-RESULT t01_a pass 3\nBPFLAB-VERDICT pass exit=0\n";
    const CUT: &str = "BPFLAB-PLAN 3 t01_a t02_b t03_c\nBPFLAB-START t01_a\nBPFLAB-RESULT t01_a pass 3\nBPFLAB-START t02_b\n";

    /// Why a test run failed, where it kept no result.
    fn err(o: &VmOutcome, text: &str) -> String {
        failed(o, Some(text), None)
    }

    fn failed(o: &VmOutcome, text: Option<&str>, lacks: Option<&str>) -> String {
        let j = assess(o, text, &lim(), Program::Selftests, lacks).unwrap();
        assert!(j.report.results.is_empty(), "{:?}", j.report.results);
        j.vm_failure.expect("a VM failure").to_string()
    }

    fn statuses(j: &Assessed) -> Vec<Status> {
        j.report.results.iter().map(|r| r.status).collect()
    }

    #[test]
    fn a_clean_run_is_assessed_complete() {
        let o = outcome(VmEnd::Exited { code: Some(0) });
        let j = assess(&o, Some(OK), &lim(), Program::Selftests, None).unwrap();
        assert_eq!(j.report.results.len(), 1);
        assert!(j.vm_failure.is_none());
        assert_eq!(console_check(&o, &j.report.results).status, Status::Pass);
    }

    #[test]
    fn a_panic_mid_run_keeps_results_and_names_the_test() {
        let mut o = outcome(VmEnd::Exited { code: Some(0) });
        o.panic = Some("[    2.000000] Kernel panic - not syncing: sysrq triggered crash".into());
        o.splat_in_test = vec![
            "[    1.900000] BUG: unable to handle page fault".into(),
            "[    1.900001] Call Trace:".into(),
        ];
        let j = assess(&o, Some(CUT), &lim(), Program::Selftests, None).unwrap();
        let failed = j.vm_failure.as_ref().unwrap();
        assert!(failed.panicked() && failed.reached_init, "{failed:?}");
        let why = failed.to_string();
        assert!(why.contains("panicked") && why.contains("sysrq"), "{why}");
        assert_eq!(
            statuses(&j),
            [Status::Pass, Status::Crashed, Status::NotRun]
        );
        let crashed = &j.report.results[1];
        assert!(
            crashed
                .message
                .starts_with("the kernel panicked: [    2.000000] Kernel panic"),
            "{crashed:?}"
        );
        assert!(
            crashed.detail[0].starts_with("first splat: [    1.900000] BUG: unable"),
            "{crashed:?}"
        );
        // Before any plan there is nothing to keep, but the failure and
        // its outcome go to the caller: a panic at boot is the kernel's.
        assert!(err(&o, "").starts_with("the kernel panicked"));
        assert_eq!(kernel_sign(&o), KernelSign::Panicked);
        // A program without a plan (the benchmark) has nothing to keep.
        let bench = assess(&o, Some(""), &lim(), Program::Bench, None).unwrap_err();
        assert!(format!("{bench:#}").contains("panicked"));
    }

    #[test]
    fn the_kernels_sign_is_its_panic_or_first_splat_else_nothing() {
        let mut o = outcome(VmEnd::Stalled);
        assert_eq!(kernel_sign(&o), KernelSign::Nothing);
        o.splats = vec!["[    3.0] watchdog: BUG: soft lockup - CPU#0 stuck ".into()];
        assert_eq!(
            kernel_sign(&o),
            KernelSign::Splat("[    3.0] watchdog: BUG: soft lockup - CPU#0 stuck".into())
        );
        o.panic = Some("[    4.0] Kernel panic - not syncing: softlockup: hung tasks".into());
        assert_eq!(kernel_sign(&o), KernelSign::Panicked);
    }

    #[test]
    fn a_crash_is_not_counted_again_by_the_console_check() {
        let mut o = outcome(VmEnd::Exited { code: Some(0) });
        o.splats = vec![
            "[    1.000000] WARNING: CPU: 0 PID: 9 at x".into(),
            "[    2.000000] Kernel panic - not syncing: dumptest".into(),
        ];
        o.splats_before_last_start = 1;
        o.panic = Some(o.splats[1].clone());
        let j = assess(&o, Some(CUT), &lim(), Program::Selftests, None).unwrap();
        let c = console_check(&o, &j.report.results);
        assert_eq!(c.status, Status::Fail, "the earlier WARNING still counts");
        assert!(
            c.message.starts_with("kernel reported 1 problem line(s)"),
            "{}",
            c.message
        );
        o.splats_before_last_start = 0;
        assert_eq!(console_check(&o, &j.report.results).status, Status::Pass);
        // Without a crash every splat counts.
        assert!(console_check(&o, &[]).message.contains("2 problem line(s)"));
    }

    #[test]
    fn a_hang_mid_run_is_handled_like_a_crash() {
        let j = assess(
            &outcome(VmEnd::Timeout),
            Some(CUT),
            &lim(),
            Program::Selftests,
            None,
        )
        .unwrap();
        assert!(j
            .vm_failure
            .as_ref()
            .unwrap()
            .to_string()
            .contains("the guest hung"));
        assert_eq!(
            statuses(&j),
            [Status::Pass, Status::Crashed, Status::NotRun]
        );
        assert!(j.report.results[2].message.contains("during t02_b"));
    }

    #[test]
    fn a_guest_that_stops_reporting_is_hung() {
        let j = assess(
            &outcome(VmEnd::Stalled),
            Some(CUT),
            &lim(),
            Program::Selftests,
            None,
        )
        .unwrap();
        let why = j.vm_failure.unwrap().to_string();
        assert!(
            why.contains("the guest hung: no results line for 120s"),
            "{why}"
        );
        assert_eq!(j.report.results[1].status, Status::Crashed);
    }

    #[test]
    fn timeouts_and_missing_verdicts_are_vm_failures() {
        assert!(err(&outcome(VmEnd::BootTimeout), "").contains("did not reach /init"));
        let o = outcome(VmEnd::Exited { code: Some(0) });
        assert!(err(&o, "").contains("no verdict"));
        let j = assess(
            &o,
            Some("BPFLAB-PLAN 1 t01_a\n"),
            &lim(),
            Program::Selftests,
            None,
        )
        .unwrap();
        assert!(j.vm_failure.unwrap().to_string().contains("no verdict"));
        assert_eq!(j.report.results[0].status, Status::NotRun);
        let e = err(&o, "BPFLAB-VERDICT error exec /bin/selftests: ENOENT\n");
        assert!(e.contains("could not run its program"), "{e}");
        let malformed = assess(
            &o,
            Some("BPFLAB-PLAN 1\nBPFLAB-RESULT t01 maybe 1\n"),
            &lim(),
            Program::Selftests,
            None,
        );
        assert!(format!("{:#}", malformed.unwrap_err()).contains("malformed"));
        let never = failed(&o, None, None);
        assert!(never.starts_with("QEMU wrote no results file"), "{never}");
    }

    const LACKS: &str = "the kernel /tmp/bzImage has no proc (CONFIG_PROC_FS): /init could not mount /proc; build it in (kconfig/qemu.config has it), or see docs/USAGE.md#a-bzimage-of-your-own";

    #[test]
    fn a_missing_option_leads_the_failure() {
        let o = outcome(VmEnd::Exited { code: Some(0) });
        let verdict = "BPFLAB-VERDICT error mount proc on /proc: ENODEV\n";
        let e = failed(&o, Some(verdict), Some(LACKS));
        let first = e.lines().next().unwrap();
        assert!(
            first.starts_with(&format!(
                "{LACKS}; the guest could not run its program: mount proc"
            )),
            "{e}"
        );
        // Kept results carry it too, as the crashed test's cause.
        let j = assess(&o, Some(CUT), &lim(), Program::Selftests, Some(LACKS)).unwrap();
        assert!(j.vm_failure.unwrap().to_string().starts_with(LACKS));
        assert!(j.report.results[1].message.starts_with(LACKS));
    }

    /// A run that did its job keeps its verdict, whatever the boot log
    /// said: a test's failure is never a missing option.
    #[test]
    fn a_run_that_did_its_job_never_names_a_missing_option() {
        let o = outcome(VmEnd::Exited { code: Some(0) });
        let failed = "BPFLAB-PLAN 1\nBPFLAB-RESULT t01_a fail 3\nBPFLAB-VERDICT fail exit=1\n";
        let j = assess(&o, Some(failed), &lim(), Program::Selftests, Some(LACKS)).unwrap();
        assert!(j.vm_failure.is_none());
        assert_eq!(statuses(&j), [Status::Fail]);
        assert!(!format!("{:?}", j.report).contains("CONFIG_"));
    }

    #[test]
    fn splats_fail_the_console_check() {
        let mut o = outcome(VmEnd::Exited { code: Some(0) });
        o.splats = vec!["[    5.000000] WARNING: CPU: 0 PID: 1 at lkdtm".into()];
        let c = console_check(&o, &[]);
        assert_eq!(c.status, Status::Fail);
        assert!(c.message.contains("WARNING"), "{}", c.message);
    }
}
