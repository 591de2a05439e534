//! The guest's fuzzer. `/init` starts it with `--kernel K --results
//! /dev/ttyS1` and the host's words (seed, seconds, threads, a
//! reproducer to replay); it reports `BPFLAB-FUZZ` JSON records (start,
//! progress, a divergence with its shrunk reproducer, the summary) and
//! exits 0 when the kernel never differed from the model, 1 when it did.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use map_fuzz::op::{parse_ops, Op};
use map_fuzz::report::Report;
use map_fuzz::run::{self, Outcome, Settings, Source};
use map_fuzz::threads::script::Script;
use map_fuzz::threads::{Rounds, ThreadsOutcome};
use map_fuzz::{shrink, threads};
use selftests::runner::Kernel;

const USAGE: &str = "usage: fuzz --kernel K [--results PATH] [--seed S] [--seconds N] [--threads T]
            [--race-seconds N] [--race-threads T] [--replay FILE] [--client PATH] [--no-shrink]";

/// Where /init's image keeps the skeleton client.
const CLIENT: &str = "/bin/fuzz-client";

/// The longest a divergence is shrunk for: the host's time limit leaves
/// room for it after the fuzzing budget.
const SHRINK_BUDGET: Duration = Duration::from_secs(240);

/// How long a racing round's shrinking replays each run of last rounds:
/// a race need not recur on the first try.
const RACE_REPLAY: Duration = Duration::from_secs(20);

/// How often a long silent phase says it is alive: well inside the
/// host's stall limit (120 s under TCG).
const HEARTBEAT: Duration = Duration::from_secs(20);

/// The most threads `--threads` takes.
const MAX_THREADS: u64 = threads::MAX_THREADS as u64;

#[derive(Debug)]
struct Options {
    kernel: Kernel,
    results: Option<String>,
    seed: u64,
    seconds: u64,
    threads: usize,
    /// Of `seconds` with one thread, how many go to rounds of
    /// `race_threads` threads after the operations (`threads`).
    race_seconds: u64,
    race_threads: usize,
    replay: Option<PathBuf>,
    client: Option<PathBuf>,
    shrink: bool,
    /// Internal: replay quietly and print the divergence's signature
    /// (what shrinking asks of each candidate).
    check: bool,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        kernel: Kernel::Mainline,
        results: None,
        seed: 1,
        seconds: 60,
        threads: 1,
        race_seconds: 0,
        race_threads: 4,
        replay: None,
        client: Path::new(CLIENT).exists().then(|| PathBuf::from(CLIENT)),
        shrink: true,
        check: false,
    };
    let mut kernel = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{a} needs a value"));
        let number = |v: String| {
            v.parse::<u64>()
                .map_err(|_| format!("{a} {v:?}: not a number"))
        };
        match a.as_str() {
            "--kernel" => kernel = Some(value()?),
            "--results" => o.results = Some(value()?),
            "--seed" => o.seed = number(value()?)?,
            "--seconds" => o.seconds = number(value()?)?,
            "--threads" => o.threads = number(value()?)?.clamp(1, MAX_THREADS) as usize,
            "--race-seconds" => o.race_seconds = number(value()?)?,
            "--race-threads" => o.race_threads = number(value()?)?.clamp(2, MAX_THREADS) as usize,
            "--replay" => o.replay = Some(PathBuf::from(value()?)),
            "--client" => o.client = Some(PathBuf::from(value()?)),
            "--no-client" => o.client = None,
            "--no-shrink" => o.shrink = false,
            "--check-replay" => {
                o.replay = Some(PathBuf::from(value()?));
                o.check = true;
            }
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    let name = kernel.ok_or(format!("--kernel is required\n{USAGE}"))?;
    o.kernel = Kernel::from_name(&name).ok_or(format!("unknown kernel {name:?}"))?;
    Ok(o)
}

/// NUMA nodes online.
fn nodes() -> u32 {
    std::fs::read_to_string("/sys/devices/system/node/online")
        .ok()
        .and_then(|t| selftests::proc::parse_node_list(&t))
        .map_or(1, |n| n.len() as u32)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let o = match parse(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("fuzz: {e}");
            return ExitCode::from(2);
        }
    };
    match fuzz_with(&o) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("fuzz: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs as `o` says; whether the kernel kept to the model.
fn fuzz_with(o: &Options) -> Result<bool, String> {
    let settings = Settings {
        kernel: o.kernel,
        nodes: nodes(),
        client: o.client.clone(),
        inject: map_fuzz::exec::inject::Injector::available(),
    };
    let replay = match &o.replay {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("reading {}: {e}", path.display()))?;
            let at = |e: String| format!("{}: {e}", path.display());
            if let Some(script) = Script::parse(&text).map_err(at)? {
                return replay_rounds(o, &settings, script);
            }
            Some(parse_ops(&text).map_err(|e| at(e.to_string()))?)
        }
        None => None,
    };
    if o.check {
        let ops = replay.expect("--check-replay names a file");
        let out =
            run::run(&settings, Source::Replay(ops), &mut |_, _| {}).map_err(|e| e.to_string())?;
        if let Some(d) = out.divergence {
            println!("signature: {}", d.signature());
        }
        return Ok(true);
    }
    // The skeleton client's children die of SIGSEGV on purpose, eight a
    // run: the console need not print each.
    let _ = std::fs::write("/proc/sys/debug/exception-trace", "0");
    let mut report = Report::open(o.results.as_deref())?;
    report.start(o.seed, o.seconds, o.threads, &settings)?;
    if o.threads > 1 {
        // Nothing is reported until the threads are done.
        let _alive = report.heartbeat(HEARTBEAT);
        let out = threads::run(
            &settings,
            Rounds::Draw { seed: o.seed },
            Duration::from_secs(o.seconds),
            o.threads,
            &mut |ops, digest| report.progress(ops, digest),
        )?;
        race_reported(o, &settings, &mut report, &out)?;
        return report.threads_summary(&out);
    }
    // A share of a run's time goes to racing threads (not a replay's).
    let race_seconds = match replay {
        Some(_) => 0,
        None => o.race_seconds.min(o.seconds),
    };
    let source = match replay {
        Some(ops) => Source::Replay(ops),
        None => Source::Generate {
            seed: o.seed,
            budget: Duration::from_secs(o.seconds - race_seconds),
        },
    };
    let out = operations(o, &settings, source, &mut report)?;
    if out.divergence.is_some() || race_seconds == 0 {
        report.summary(&out, None)?;
        return Ok(out.divergence.is_none());
    }
    let raced = {
        let _alive = report.heartbeat(HEARTBEAT);
        threads::run(
            &settings,
            Rounds::Draw { seed: o.seed },
            Duration::from_secs(race_seconds),
            o.race_threads,
            &mut |_, _| Ok(()),
        )?
    };
    race_reported(o, &settings, &mut report, &raced)?;
    report.summary(&out, Some(&raced))?;
    Ok(raced.failure.is_none())
}

/// A race reproducer's rounds, run again on fresh maps for `--seconds`
/// or until one breaks; whether none did. Not shrunk.
fn replay_rounds(o: &Options, settings: &Settings, script: Script) -> Result<bool, String> {
    let mut report = Report::open(o.results.as_deref())?;
    report.start(o.seed, o.seconds, script.threads, settings)?;
    let _alive = report.heartbeat(HEARTBEAT);
    let out = threads::run(
        settings,
        Rounds::Script(script.rounds),
        Duration::from_secs(o.seconds),
        script.threads,
        &mut |ops, digest| report.progress(ops, digest),
    )?;
    report.raced(&out, None, 0)?;
    report.threads_summary(&out)
}

/// A racing round that broke, reported; then its shortest run of last
/// rounds that breaks again (not a replay's), reported with it.
fn race_reported(
    o: &Options,
    settings: &Settings,
    report: &mut Report,
    out: &ThreadsOutcome,
) -> Result<(), String> {
    if out.failure.is_none() {
        return Ok(());
    }
    // Unshrunk first: a guest that dies while shrinking has said it.
    report.raced(out, None, 0)?;
    if o.shrink && o.replay.is_none() {
        let _alive = report.heartbeat(HEARTBEAT);
        let (shrunk, tries) = threads::shrink(settings, out, RACE_REPLAY, SHRINK_BUDGET);
        drop(_alive);
        report.raced(out, shrunk.as_ref(), tries)?;
    }
    Ok(())
}

/// One thread's operations from `source`, reported as they go; a
/// divergence reported, then shrunk (not a replay's).
fn operations(
    o: &Options,
    settings: &Settings,
    source: Source,
    report: &mut Report,
) -> Result<Outcome, String> {
    let mut progress_err = None;
    let out = run::run(settings, source, &mut |ops, digest| {
        if let Err(e) = report.progress(ops, digest) {
            progress_err.get_or_insert(e);
        }
    })
    .map_err(|e| format!("setting up: {e}"))?;
    if let Some(e) = progress_err {
        return Err(e);
    }
    if let Some(d) = &out.divergence {
        let shrinking = o.shrink && o.replay.is_none();
        // Unshrunk first: a guest that dies while shrinking has said it.
        report.divergence(o.seed, d, &out.ops[..=d.step], None, 0)?;
        if shrinking {
            let _alive = report.heartbeat(HEARTBEAT);
            let (shrunk, tries) = shrink_divergence(o, &out, &d.signature());
            drop(_alive);
            report.divergence(o.seed, d, &out.ops[..=d.step], shrunk.as_deref(), tries)?;
        }
    }
    Ok(out)
}

/// The shortest reproducer of the divergence found by replaying
/// candidates in fresh processes; None if the whole run does not
/// reproduce it.
fn shrink_divergence(o: &Options, out: &Outcome, signature: &str) -> (Option<Vec<Op>>, usize) {
    let failing = &out.ops[..=out.divergence.as_ref().expect("diverged").step];
    let started = std::time::Instant::now();
    // Past the deadline every candidate counts as passing: what was
    // found so far is the reproducer.
    let fails = |ops: &[Op]| {
        started.elapsed() < SHRINK_BUDGET && replay_signature(o, ops).as_deref() == Some(signature)
    };
    if !fails(failing) {
        return (None, 1);
    }
    let (min, tries) = shrink::shrink(failing, fails);
    (Some(min), tries + 1)
}

/// The signature of the divergence `ops` show in a fresh process, if any.
fn replay_signature(o: &Options, ops: &[Op]) -> Option<String> {
    let file = std::env::temp_dir().join(format!("fuzz-candidate-{}.ops", std::process::id()));
    let text: String = ops.iter().map(|op| format!("{op}\n")).collect();
    std::fs::write(&file, text).ok()?;
    let exe = std::env::current_exe().ok()?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["--kernel", o.kernel.name(), "--check-replay"])
        .arg(&file);
    match &o.client {
        Some(c) => cmd.arg("--client").arg(c),
        None => cmd.arg("--no-client"),
    };
    let out = cmd.stderr(std::process::Stdio::null()).output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("signature: ").map(str::to_string))
}
