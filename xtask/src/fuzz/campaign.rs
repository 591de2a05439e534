//! The fuzzer as a suite: every kernel of a run fuzzed with one plan
//! (seed, budget, threads), `vms` guests at a time, the skeleton client
//! built from the pristine tree and put in the image, and each kernel's
//! records judged: clean, not exercised (clean without the allocation
//! failures or racing rounds the plan was to try), diverged (with a
//! reproducer written), the VM's failure, or the fuzzer's.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use guest_common::protocol::Program;

use super::records::{self, Divergence, KernelFuzz};
use super::{client, tools, FuzzParams, ReplayKernel, REPLAY_PATH};
use crate::kernel::choice::Chosen;
use crate::kernel::{self, SourceConfig};
use crate::report::protocol::Outcome;
use crate::vm::failed::VmFailed;
use crate::vm::guest_image;
use crate::vm::schedule;
use crate::vm::session::{self, GuestRun, Prepared, Session, SessionOptions};
use crate::vm::targets::{BootConfig, Provenance, Target};

/// What the guest may spend shrinking after its budget, at most (its
/// own limit is `vm-images/map-fuzz`'s), and booting.
const SHRINK_AND_BOOT_SECS: u64 = 420;

/// Every kernel of `boot` fuzzed as `params` says, `vms` at a time, and
/// each one judged.
pub struct Fuzzed {
    pub run_dir: PathBuf,
    pub targets: Vec<Target>,
    pub runs: Vec<KernelFuzzRun>,
    pub verdicts: Vec<FuzzVerdict>,
}

/// The model's /proc/self/mem reads PROT_NONE mappings (GUP with
/// FOLL_FORCE, a fault of the map's handler from the kernel). 7.3's
/// Kconfig defaults to PROC_MEM_FORCE_PTRACE (6.12's to ALWAYS_FORCE),
/// which forces for an active ptracer only: such a read gave EIO on every
/// 7.3 kernel. The fuzzer's guests take the traditional behaviour back.
const PROC_MEM_FORCE: &str = "proc_mem.force_override=always";

/// How a fuzz run goes, beside which kernels and how they boot: what the
/// guest is told, a reproducer to replay, and guests at once.
pub struct FuzzOptions {
    pub params: FuzzParams,
    /// A reproducer's operations, one a line.
    pub replay: Option<String>,
    pub vms: usize,
}

pub fn fuzz_kernels(
    source: &SourceConfig,
    chosen: &Chosen,
    mut boot: BootConfig,
    options: FuzzOptions,
) -> Result<Fuzzed> {
    let FuzzOptions {
        params,
        replay,
        vms,
    } = options;
    let params = &params;
    if boot.machine.gdb.is_some() && vms > 1 {
        bail!("--gdb with --vms {vms}: the guests would share one gdb port; use --vms 1");
    }
    // A shrink candidate replays up to the whole run; a gdb session has
    // no time limit but the user's.
    if boot.timeout.is_none() && boot.machine.gdb.is_none() {
        boot.timeout =
            Some(2 * params.seconds * session::slowdown(boot.debug) + SHRINK_AND_BOOT_SECS);
    }
    // First, so that the developer's own --append overrides it.
    boot.machine.append.insert(0, PROC_MEM_FORCE.to_string());
    let Prepared { targets, session } =
        session::prepare(source, chosen, &boot, "fuzz", SessionOptions::default())?;
    let client =
        kernel::with_pristine(source, |pristine, dir| build_client(source, pristine, dir))?;
    let mut extra_files = guest_image::file_entries(
        "/bin/fuzz-client",
        std::fs::read(&client).with_context(|| format!("reading {}", client.display()))?,
        0o755,
    );
    if let Some(text) = replay {
        extra_files.extend(guest_image::file_entries(
            REPLAY_PATH,
            text.into_bytes(),
            0o644,
        ));
    }
    let mut session = session.with_extra_files(extra_files);
    // Once, before the guests that boot side by side clone the session.
    session.hermetic_image()?;
    eprintln!(
        "== fuzz: seed {}, {} s per kernel, {} thread(s){}",
        params.seed,
        params.seconds,
        params.threads,
        if params.replay { ", replaying" } else { "" }
    );
    let runs = schedule::run_keyed(
        &(0..targets.len()).collect::<Vec<_>>(),
        vms,
        |&k| k,
        |&k| {
            let mut s = session.clone();
            fuzz_one(&mut s, &targets[k], params)
        },
    );
    let verdicts = targets
        .iter()
        .zip(&runs)
        .map(|(t, r)| verdict_of(session.run_dir(), t, params, r))
        .collect::<Result<Vec<_>>>()?;
    Ok(Fuzzed {
        run_dir: session.run_dir().to_path_buf(),
        targets,
        runs,
        verdicts,
    })
}

/// libbpf and bpftool from the tree, then the client.
fn build_client(source: &SourceConfig, pristine: &Path, dir: &Path) -> Result<PathBuf> {
    let work = dir.join("fuzz");
    let t = tools::build(pristine, &work, source.jobs)?;
    client::build(&client::ClientPaths {
        clang: PathBuf::from(client::CLANG),
        bpftool: t.bpftool,
        libbpf_include: t.libbpf_include,
        libbpf_archive: t.libbpf_archive,
        source_dir: crate::project::root().join("vm-images/map-fuzz/client"),
        out_dir: work.join("client"),
    })
}

/// One kernel's fuzzing: its records, or why its VM could not run.
pub struct KernelFuzzRun {
    pub fuzz: KernelFuzz,
    run: Option<GuestRun>,
    error: Option<String>,
}

fn fuzz_one(session: &mut Session, target: &Target, params: &FuzzParams) -> KernelFuzzRun {
    let guest = target.guest(Program::Fuzz, params.guest_args(), None);
    match session.run_guest(target, guest) {
        Err(e) => KernelFuzzRun {
            fuzz: KernelFuzz::default(),
            run: None,
            error: Some(format!("{e:#}")),
        },
        Ok(run) => match records::read(&run.report.fuzz) {
            Ok(fuzz) => KernelFuzzRun {
                fuzz,
                run: Some(run),
                error: None,
            },
            Err(e) => KernelFuzzRun {
                fuzz: KernelFuzz::default(),
                run: Some(run),
                error: Some(format!("{e:#}")),
            },
        },
    }
}

/// The signature of a divergence found by racing threads.
pub const RACE_SIGNATURE: &str = "threads";

/// How one kernel's fuzzing ended.
#[derive(Debug, PartialEq)]
pub enum FuzzVerdict {
    Clean,
    /// Clean, without what the plan was to try (`KernelFuzz::unexercised`,
    /// joined): a pass that proved nothing of it fails the run.
    NotExercised(String),
    /// The kernel parted from the model (or died mid-run): why, and the
    /// reproducer written.
    Diverged(String, Option<PathBuf>),
    /// The VM could not do its job (boot, setup); a panic of its kernel
    /// makes it the kernel's failure, not the host's.
    Infra(VmFailed),
    /// The guest's fuzzer broke (an error of the harness, not a finding).
    FuzzerFailed(String),
}

/// A racing round that broke: its reproducer is the shortest run of last
/// rounds that broke the same check again when the guest replayed it,
/// or, when none did, the last rounds as they ran (said in the verdict).
fn race_verdict(
    run_dir: &Path,
    (name, kernel): (&str, &ReplayKernel),
    params: &FuzzParams,
    d: &Divergence,
) -> Result<FuzzVerdict> {
    let mut what = format!("racing {}: {}", d.op, d.what);
    let rounds = match (&d.shrunk, &d.ops) {
        (Some(shrunk), _) => shrunk,
        (None, Some(last)) if !params.replay => {
            what.push_str(&match d.shrink_runs {
                0 => " (not replayed: the reproducer holds its last rounds as they ran)".to_string(),
                n => format!(
                    " (it did not break again in {n} replays of its last rounds: the reproducer holds them as they ran)"
                ),
            });
            last
        }
        _ => return Ok(FuzzVerdict::Diverged(what, None)),
    };
    let path = super::reproducer_path(run_dir, name, params.seed);
    std::fs::write(&path, super::reproducer(kernel, params.seed, &what, rounds))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(FuzzVerdict::Diverged(what, Some(path)))
}

/// What boots `t` again: its name for a kernel of the series, or for a
/// bzImage given by path that path (not the run's copy of it) and the
/// model it was held to (`--claim`).
fn replay_kernel(t: &Target) -> ReplayKernel {
    match &t.provenance {
        Provenance::Image(path) => ReplayKernel {
            word: path.display().to_string(),
            claim: Some(t.plays.name().to_string()),
        },
        Provenance::Built { .. } | Provenance::Bundle => ReplayKernel {
            word: t.name.clone(),
            claim: None,
        },
    }
}

/// One kernel's verdict from its records, and its reproducer written.
fn verdict_of(
    run_dir: &Path,
    t: &Target,
    params: &FuzzParams,
    r: &KernelFuzzRun,
) -> Result<FuzzVerdict> {
    let run = r.run.as_ref();
    let write = |what: &str, ops: &[String]| -> Result<Option<PathBuf>> {
        // A --threads run's operations interleaved as the scheduler chose:
        // no list of them reproduces it; its seed and --threads do.
        if params.threads > 1 {
            return Ok(None);
        }
        let path = super::reproducer_path(run_dir, &t.name, params.seed);
        std::fs::write(
            &path,
            super::reproducer(&replay_kernel(t), params.seed, what, ops),
        )
        .with_context(|| format!("writing {}", path.display()))?;
        Ok(Some(path))
    };
    let drawn = |count: usize| {
        let f = &r.fuzz;
        super::regenerate(params.seed, count, nodes(run), f.client, f.inject)
    };
    if let Some(d) = &r.fuzz.divergence {
        if d.signature == RACE_SIGNATURE {
            return race_verdict(run_dir, (&t.name, &replay_kernel(t)), params, d);
        }
        let what = format!("at operation {} ({}): {}", d.step, d.op, d.what);
        let ops = d
            .shrunk
            .clone()
            .or_else(|| d.ops.clone())
            .unwrap_or_else(|| drawn(d.step + 1));
        let path = if params.replay && d.shrunk.is_none() {
            None
        } else {
            write(&what, &ops)?
        };
        return Ok(FuzzVerdict::Diverged(what, path));
    }
    if let Some(why) = &r.error {
        return Ok(match run {
            // The guest ran, and what it said cannot be read.
            Some(_) => FuzzVerdict::FuzzerFailed(why.clone()),
            None => FuzzVerdict::Infra(VmFailed::of_host(why.clone())),
        });
    }
    let run = run.expect("no error: a run");
    if let Some(why) = &run.vm_failure {
        if run.report.fuzz.is_empty() {
            return Ok(FuzzVerdict::Infra(why.clone()));
        }
        // The kernel died mid-run: what the guest drew up to its next
        // progress report holds the operation that killed it.
        let what = format!("the kernel died after {} operations: {why}", r.fuzz.ops);
        let ops = drawn(r.fuzz.ops + map_fuzz::run::PROGRESS);
        let path = if params.replay {
            None
        } else {
            write(&what, &ops)?
        };
        return Ok(FuzzVerdict::Diverged(what, path));
    }
    Ok(exercised(ended(run, &r.fuzz), &r.fuzz, params))
}

/// A clean verdict, held to what `params` asked for: short of any of it,
/// not exercised.
fn exercised(verdict: FuzzVerdict, fuzz: &KernelFuzz, params: &FuzzParams) -> FuzzVerdict {
    let missing = fuzz.unexercised(params.planned());
    match verdict {
        FuzzVerdict::Clean if !missing.is_empty() => {
            FuzzVerdict::NotExercised(missing.join(" and "))
        }
        v => v,
    }
}

/// A guest that finished: a splat on its console, a fuzzer that did not
/// report its end, or clean.
fn ended(run: &GuestRun, fuzz: &KernelFuzz) -> FuzzVerdict {
    let console = run.outcome.console_log.display();
    if let Some(first) = run.outcome.splats.first() {
        return FuzzVerdict::Diverged(
            format!("the console shows {} (console: {console})", first.trim()),
            None,
        );
    }
    if run.report.verdict.outcome != Outcome::Pass || fuzz.summary.is_none() {
        return FuzzVerdict::FuzzerFailed(format!(
            "the fuzzer ended with {} and no summary (console: {console})",
            run.report.verdict.detail
        ));
    }
    FuzzVerdict::Clean
}

/// The guest's NUMA nodes, as its start record said (2 by default).
fn nodes(run: Option<&GuestRun>) -> u32 {
    run.and_then(|r| {
        r.report
            .fuzz
            .iter()
            .find_map(|p| match serde_json::from_str::<records::Record>(p) {
                Ok(records::Record::Start { nodes, .. }) => Some(nodes),
                _ => None,
            })
    })
    .unwrap_or(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raced(shrunk: Option<&[&str]>, shrink_runs: usize) -> Divergence {
        let lines = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        Divergence {
            seed: Some(5),
            step: 40,
            op: "4 threads".to_string(),
            signature: RACE_SIGNATURE.to_string(),
            what: "presence check: round 9 (t0: load v0 @3.0; t1: load v0 @3.1): ...".to_string(),
            ops: Some(lines(&[
                "threads 4",
                "round t0: load v0 @1.0; t1: load v0 @1.1",
                "round t0: load v0 @3.0; t1: load v0 @3.1",
            ])),
            shrunk: shrunk.map(lines),
            shrink_runs,
        }
    }

    fn params(replay: bool) -> FuzzParams {
        FuzzParams {
            seed: 5,
            seconds: 60,
            threads: 1,
            race_seconds: 15,
            replay,
        }
    }

    /// The file written, and the verdict's words.
    fn verdict(d: &Divergence, replay: bool) -> (Option<String>, String) {
        let dir = crate::util::tempdir();
        let prefault = ReplayKernel {
            word: "prefault".into(),
            claim: None,
        };
        match race_verdict(&dir, ("prefault", &prefault), &params(replay), d).unwrap() {
            FuzzVerdict::Diverged(what, path) => {
                (path.map(|p| std::fs::read_to_string(p).unwrap()), what)
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_broken_round_writes_the_rounds_that_broke_it_again() {
        let shrunk = ["threads 4", "round t0: load v0 @3.0; t1: load v0 @3.1"];
        let (file, what) = verdict(&raced(Some(&shrunk), 1), false);
        let file = file.expect("a reproducer");
        assert!(
            file.ends_with("threads 4\nround t0: load v0 @3.0; t1: load v0 @3.1\n"),
            "{file}"
        );
        let script = map_fuzz::threads::script::Script::parse(&file)
            .unwrap()
            .unwrap();
        assert_eq!(script.rounds.len(), 1);
        assert!(
            what.starts_with("racing 4 threads: presence check"),
            "{what}"
        );

        let (file, what) = verdict(&raced(None, 6), false);
        assert_eq!(
            file.unwrap()
                .lines()
                .filter(|l| l.starts_with("round "))
                .count(),
            2,
            "the last rounds as they ran"
        );
        assert!(what.contains("did not break again in 6 replays"), "{what}");
        let (_, what) = verdict(&raced(None, 0), false);
        assert!(what.contains("not replayed"), "{what}");

        let (file, _) = verdict(&raced(None, 0), true);
        assert_eq!(
            file, None,
            "a replay's failure writes no reproducer of itself"
        );
    }

    /// On a mixed run (`--kernel base,./m.bzImage --claim prefault`) the
    /// built kernels lock the cache, and every target, the by-path one
    /// too, boots from a copy in the run's directory: the replay line
    /// still names the path `--kernel` was given, which it takes again.
    #[test]
    fn a_bzimage_of_its_own_is_replayed_by_its_path_and_claim() {
        let target = |name: &str, bzimage: &str, claim: &str, provenance| Target {
            name: name.to_string(),
            bzimage: PathBuf::from(bzimage),
            flavor: kernel::Flavor::from_name(claim),
            plays: kernel::Flavor::from_name(claim),
            debug: false,
            provenance,
        };
        let given = Provenance::Image("./m.bzImage".into());
        let alone = target("m.bzImage", "./m.bzImage", "prefault", given.clone());
        let by_path = ReplayKernel {
            word: "./m.bzImage".into(),
            claim: Some("prefault".into()),
        };
        assert_eq!(replay_kernel(&alone), by_path);
        let copied = target(
            "m.bzImage",
            "/tmp/runs/m.bzImage.bzImage",
            "prefault",
            given,
        );
        assert_eq!(replay_kernel(&copied), by_path);
        let built = target(
            "prefault",
            "/tmp/runs/prefault.bzImage",
            "prefault",
            Provenance::Built {
                vmlinux: "/cache/prefault/vmlinux".into(),
            },
        );
        assert_eq!(
            replay_kernel(&built),
            ReplayKernel {
                word: "prefault".into(),
                claim: None
            }
        );
        let text = super::super::reproducer(&replay_kernel(&copied), 7, "what", &[]);
        assert!(
            text.starts_with("# bpflab fuzz reproducer: kernel ./m.bzImage, seed 7\n"),
            "{text}"
        );
        assert!(
            text.contains("--kernel ./m.bzImage --claim prefault --replay"),
            "{text}"
        );
    }

    /// A clean run that fired no allocation failure, or raced no round,
    /// where its kernel and plan have them, is not called clean.
    #[test]
    fn a_clean_run_short_of_what_it_was_to_try_is_not_exercised() {
        let summary = |counts: &str| {
            format!(
                r#"{{"kind":"summary","ops":9,"executed":9,"secs":1.0,"ops_per_sec":9.0,"counts":{counts},"diverged":false}}"#
            )
        };
        let start = r#"{"kind":"start","seed":5,"seconds":60,"threads":1,"nodes":2,"client":false,"inject":true}"#;
        let fuzz = |counts: &str| records::read(&[start.to_string(), summary(counts)]).unwrap();
        let idle = fuzz(r#"{"fail_alloc":4}"#);
        assert_eq!(
            exercised(FuzzVerdict::Clean, &idle, &params(false)),
            FuzzVerdict::NotExercised(
                "no allocation failure fired in an operation's path and no racing round".into()
            )
        );
        let busy = fuzz(r#"{"fail_alloc":4,"fail_alloc fired":1,"race rounds (4 threads)":7}"#);
        assert_eq!(
            exercised(FuzzVerdict::Clean, &busy, &params(false)),
            FuzzVerdict::Clean
        );
        assert_eq!(
            exercised(FuzzVerdict::Clean, &idle, &params(true)),
            FuzzVerdict::Clean,
            "a replay owes nothing"
        );
        let diverged = || FuzzVerdict::Diverged("x".into(), None);
        assert_eq!(exercised(diverged(), &idle, &params(false)), diverged());
    }
}
