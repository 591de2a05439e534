//! `cargo xtask fuzz`: the differential fuzzer on every kernel with one
//! seed. Each kernel's guest draws the same operations, checks each
//! against the model of its variant, and sends a shrunk reproducer when
//! the kernel and the model part; the series' kernels must also agree
//! with each other. Exit 0 when nothing diverged, 1 when something did
//! (a reproducer is written), 2 when a VM could not run, 3 on bad input.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context, Result};
use guest_common::protocol::Program;

use crate::cli::FuzzArgs;
use crate::fuzz::records::{self, KernelFuzz};
use crate::fuzz::{self, client, tools, Plan, REPLAY_PATH};
use crate::hostdeps;
use crate::kernel::{self, SourceConfig};
use crate::project::{EXIT_INFRA, EXIT_TESTS_FAILED};
use crate::report::protocol::Outcome;
use crate::vm::guest_image;
use crate::vm::schedule;
use crate::vm::session::{self, GuestRun, Prepared, Session};
use crate::vm::targets::BootConfig;
use crate::vm::targets::Target;

/// What the guest may spend shrinking after its budget, at most (its
/// own limit is `vm-images/map-fuzz`'s), and booting.
const SHRINK_AND_BOOT_SECS: u64 = 420;

pub fn run(args: FuzzArgs) -> Result<ExitCode> {
    let source = args.source.config()?;
    ensure_tools(&source)?;
    let replay = args.replay.as_deref().map(read_replay).transpose()?;
    let plan = Plan {
        seed: args.seed.unwrap_or_else(clock_seed),
        seconds: args.seconds,
        threads: args.threads.get(),
        replay: replay.is_some(),
    };
    if plan.replay && plan.threads > 1 {
        bail!("--replay runs one thread's operations; drop --threads");
    }
    let fuzzed = fuzz_kernels(&source, args.vm.boot(), &plan, replay, args.vms.get())?;
    finish(&fuzzed, &plan)
}

/// The host tools the fuzzer's kernels and its client need.
pub fn ensure_tools(source: &SourceConfig) -> Result<()> {
    let mut deps = hostdeps::kernel_build(source);
    deps.extend_from_slice(hostdeps::BOOT);
    deps.extend_from_slice(hostdeps::FUZZ_CLIENT);
    hostdeps::ensure(&deps).context("checking the host tools for the fuzzer")
}

/// Every kernel of `boot` fuzzed as `plan` says, `vms` at a time, and
/// each one judged.
pub struct Fuzzed {
    pub run_dir: PathBuf,
    pub targets: Vec<Target>,
    runs: Vec<Ran>,
    pub verdicts: Vec<Verdict>,
}

pub fn fuzz_kernels(
    source: &SourceConfig,
    mut boot: BootConfig,
    plan: &Plan,
    replay: Option<String>,
    vms: usize,
) -> Result<Fuzzed> {
    if boot.machine.gdb.is_some() && vms > 1 {
        bail!("--gdb with --vms {vms}: the guests would share one gdb port; use --vms 1");
    }
    // A shrink candidate replays up to the whole run; a gdb session has
    // no time limit but the user's.
    if boot.timeout.is_none() && boot.machine.gdb.is_none() {
        boot.timeout =
            Some(2 * plan.seconds * session::slowdown(boot.debug) + SHRINK_AND_BOOT_SECS);
    }
    let Prepared {
        targets,
        mut session,
    } = session::prepare(source, &boot, "fuzz")?;
    let client =
        kernel::with_pristine(source, |pristine, dir| build_client(source, pristine, dir))?;
    session.extra_files = guest_image::file_entries(
        "/bin/fuzz-client",
        std::fs::read(&client).with_context(|| format!("reading {}", client.display()))?,
        0o755,
    );
    if let Some(text) = replay {
        session.extra_files.extend(guest_image::file_entries(
            REPLAY_PATH,
            text.into_bytes(),
            0o644,
        ));
    }
    // Once, before the guests that boot side by side clone the session.
    session.hermetic_image()?;
    eprintln!(
        "== fuzz: seed {}, {} s per kernel, {} thread(s){}",
        plan.seed,
        plan.seconds,
        plan.threads,
        if plan.replay { ", replaying" } else { "" }
    );
    let runs = schedule::run_keyed(
        &(0..targets.len()).collect::<Vec<_>>(),
        vms,
        |&k| k,
        |&k| {
            let mut s = session.clone();
            fuzz_one(&mut s, &targets[k], plan)
        },
    );
    let verdicts = targets
        .iter()
        .zip(&runs)
        .map(|(t, r)| judge(&session.run_dir, t, plan, r))
        .collect::<Result<Vec<_>>>()?;
    Ok(Fuzzed {
        run_dir: session.run_dir.clone(),
        targets,
        runs,
        verdicts,
    })
}

/// A reproducer the guest can run: every line an operation.
fn read_replay(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--replay {}: reading it", path.display()))?;
    let ops = map_fuzz::op::parse_ops(&text)
        .map_err(|e| anyhow::anyhow!("--replay {}: {e}", path.display()))?;
    if ops.is_empty() {
        bail!("--replay {}: no operation in it", path.display());
    }
    Ok(text)
}

fn clock_seed() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_secs() ^ u64::from(d.subsec_nanos()))
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
struct Ran {
    fuzz: KernelFuzz,
    run: Option<GuestRun>,
    error: Option<String>,
}

fn fuzz_one(session: &mut Session, target: &Target, plan: &Plan) -> Ran {
    let guest = target.guest(Program::Fuzz, plan.guest_args(), None);
    match session.run_guest(target, guest) {
        Err(e) => Ran {
            fuzz: KernelFuzz::default(),
            run: None,
            error: Some(format!("{e:#}")),
        },
        Ok(run) => match records::read(&run.report.fuzz) {
            Ok(fuzz) => Ran {
                fuzz,
                run: Some(run),
                error: None,
            },
            Err(e) => Ran {
                fuzz: KernelFuzz::default(),
                run: Some(run),
                error: Some(format!("{e:#}")),
            },
        },
    }
}

/// How one kernel's fuzzing ended.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    Clean,
    /// The kernel parted from the model (or died mid-run): why, and the
    /// reproducer written.
    Diverged(String, Option<PathBuf>),
    /// The VM could not do its job (boot, setup).
    Infra(String),
    /// The guest's fuzzer broke (an error of the harness, not a finding).
    FuzzerFailed(String),
}

fn finish(fuzzed: &Fuzzed, plan: &Plan) -> Result<ExitCode> {
    let (targets, ran, verdicts) = (&fuzzed.targets, &fuzzed.runs, &fuzzed.verdicts);
    let runs: Vec<(&str, &KernelFuzz)> = targets
        .iter()
        .zip(ran)
        .map(|(t, r)| (t.name.as_str(), &r.fuzz))
        .collect();
    println!("\n{:<18} {:>8} {:>8}  result", "kernel", "ops", "ops/s");
    for ((t, r), v) in targets.iter().zip(ran).zip(verdicts) {
        let rate = r
            .fuzz
            .summary
            .as_ref()
            .map_or("-".to_string(), |s| format!("{:.1}", s.ops_per_sec));
        let result = match v {
            Verdict::Clean => "clean".to_string(),
            Verdict::Diverged(why, Some(p)) => {
                format!("DIVERGED: {why}\n{:>38}reproducer: {}", "", p.display())
            }
            Verdict::Diverged(why, None) => format!("DIVERGED: {why}"),
            Verdict::Infra(why) => format!("VM FAILED: {why}"),
            Verdict::FuzzerFailed(why) => format!("FUZZER FAILED: {why}"),
        };
        println!("{:<18} {:>8} {:>8}  {result}", t.name, r.fuzz.ops, rate);
    }
    let disagree = fuzz::digests_disagree(&runs);
    if let Some((ops, a, b)) = disagree {
        println!(
            "the series' kernels disagree: {a} and {b} saw different returns by operation {ops} (seed {})",
            plan.seed
        );
    }
    println!(
        "seed {}: run it again with --seed {}; consoles and reproducers in {}",
        plan.seed,
        plan.seed,
        fuzzed.run_dir.display()
    );
    // One closing line in the form of vmtest's and kselftest's, a kernel
    // a result: what fresh-root's record and a CI log's reader look for.
    let clean = verdicts
        .iter()
        .filter(|v| matches!(v, Verdict::Clean))
        .count();
    let failed = verdicts.len() - clean + usize::from(disagree.is_some());
    println!(
        "fuzz: {clean} passed, {failed} failed (a kernel each{}, seed {})",
        if disagree.is_some() {
            ", and one the series' kernels disagreeing"
        } else {
            ""
        },
        plan.seed
    );
    let diverged =
        disagree.is_some() || verdicts.iter().any(|v| matches!(v, Verdict::Diverged(..)));
    let infra = verdicts
        .iter()
        .any(|v| matches!(v, Verdict::Infra(_) | Verdict::FuzzerFailed(_)));
    Ok(if diverged {
        ExitCode::from(EXIT_TESTS_FAILED)
    } else if infra {
        ExitCode::from(EXIT_INFRA)
    } else {
        ExitCode::SUCCESS
    })
}

fn judge(run_dir: &Path, t: &Target, plan: &Plan, r: &Ran) -> Result<Verdict> {
    let run = r.run.as_ref();
    let write = |what: &str, ops: &[String]| -> Result<Option<PathBuf>> {
        // A --threads run's operations interleaved as the scheduler chose:
        // no list of them reproduces it; its seed and --threads do.
        if plan.threads > 1 {
            return Ok(None);
        }
        let path = fuzz::reproducer_path(run_dir, &t.name, plan.seed);
        std::fs::write(&path, fuzz::reproducer(&t.name, plan.seed, what, ops))
            .with_context(|| format!("writing {}", path.display()))?;
        Ok(Some(path))
    };
    let drawn = |count: usize| fuzz::regenerate(plan.seed, count, nodes(run), r.fuzz.client);
    if let Some(d) = &r.fuzz.divergence {
        let what = format!("at operation {} ({}): {}", d.step, d.op, d.what);
        let ops = d
            .shrunk
            .clone()
            .or_else(|| d.ops.clone())
            .unwrap_or_else(|| drawn(d.step + 1));
        let path = if plan.replay && d.shrunk.is_none() {
            None
        } else {
            write(&what, &ops)?
        };
        return Ok(Verdict::Diverged(what, path));
    }
    if let Some(why) = &r.error {
        return Ok(match run {
            // The guest ran, and what it said cannot be read.
            Some(_) => Verdict::FuzzerFailed(why.clone()),
            None => Verdict::Infra(why.clone()),
        });
    }
    let run = run.expect("no error: a run");
    if let Some(why) = &run.vm_failure {
        if run.report.fuzz.is_empty() {
            return Ok(Verdict::Infra(why.clone()));
        }
        // The kernel died mid-run: what the guest drew up to its next
        // progress report holds the operation that killed it.
        let what = format!("the kernel died after {} operations: {why}", r.fuzz.ops);
        let ops = drawn(r.fuzz.ops + map_fuzz::run::PROGRESS);
        let path = if plan.replay {
            None
        } else {
            write(&what, &ops)?
        };
        return Ok(Verdict::Diverged(what, path));
    }
    Ok(ended(run, &r.fuzz))
}

/// A guest that finished: a splat on its console, a fuzzer that did not
/// report its end, or clean.
fn ended(run: &GuestRun, fuzz: &KernelFuzz) -> Verdict {
    let console = run.outcome.console_log.display();
    if let Some(first) = run.outcome.splats.first() {
        return Verdict::Diverged(
            format!("the console shows {} (console: {console})", first.trim()),
            None,
        );
    }
    if run.report.verdict.outcome != Outcome::Pass || fuzz.summary.is_none() {
        return Verdict::FuzzerFailed(format!(
            "the fuzzer ended with {} and no summary (console: {console})",
            run.report.verdict.detail
        ));
    }
    Verdict::Clean
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
