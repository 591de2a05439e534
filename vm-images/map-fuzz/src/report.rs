//! The fuzzer's records, `BPFLAB-FUZZ <json>` lines on the results port
//! (and on stdout): `start`, `progress`, `divergence` and `summary`.
//! Their fields are read by the host (`xtask/src/fuzz/`).

use std::collections::BTreeMap;
use std::fs::File;

use guest_common::port;
use guest_common::protocol::Line;
use serde_json::{json, Value};

use crate::op::Op;
use crate::run::{Divergence, Outcome, Settings};
use crate::threads::script::Script;
use crate::threads::ThreadsOutcome;

/// The longest unshrunk run a divergence record carries: the host can
/// always draw the rest again from the seed.
const MAX_OPS_SENT: usize = 4000;

/// The most rounds before a broken one that its record carries.
const MAX_ROUNDS_SENT: usize = 64;

pub struct Report {
    port: Option<File>,
}

impl Report {
    /// Records go to `path` (the results port) and stdout; to stdout
    /// alone without one.
    pub fn open(path: Option<&str>) -> Result<Report, String> {
        let port = match path {
            None => None,
            Some(p) => {
                let file = port::open(p, false).map_err(|e| format!("opening {p}: {e}"))?;
                port::set_raw(&file).map_err(|e| format!("raw mode on {p}: {e}"))?;
                Some(file)
            }
        };
        Ok(Report { port })
    }

    fn emit(&mut self, record: Value) -> Result<(), String> {
        let line = format!("{}\n", Line::Fuzz(record.to_string()));
        if let Some(port) = &self.port {
            port::write_line(port, &line).map_err(|e| format!("writing a record: {e}"))?;
        }
        print!("{line}");
        Ok(())
    }

    pub fn start(
        &mut self,
        seed: u64,
        seconds: u64,
        threads: usize,
        settings: &Settings,
    ) -> Result<(), String> {
        self.emit(json!({
            "kind": "start",
            "seed": seed,
            "seconds": seconds,
            "threads": threads,
            "nodes": settings.nodes,
            "client": settings.client.is_some(),
            "inject": settings.inject,
        }))
    }

    pub fn progress(&mut self, ops: usize, digest: u64) -> Result<(), String> {
        self.emit(json!({"kind": "progress", "ops": ops, "digest": format!("{digest:016x}")}))
    }

    /// A sign of life every `every` until the guard is dropped, from a
    /// thread of its own: for the phases that report nothing else for
    /// long (shrinking, a `--threads` run). The host's stall limit then
    /// only stops a guest whose kernel stopped this thread too.
    pub fn heartbeat(&self, every: std::time::Duration) -> Heartbeat {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let port = self.port.as_ref().and_then(|p| p.try_clone().ok());
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut waited = std::time::Duration::ZERO;
            let tick = std::time::Duration::from_millis(100);
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(tick);
                waited += tick;
                if waited >= every {
                    waited = std::time::Duration::ZERO;
                    let line = format!("{}\n", Line::Fuzz(json!({"kind": "alive"}).to_string()));
                    if let Some(p) = &port {
                        let _ = port::write_line(p, &line);
                    }
                }
            }
        });
        Heartbeat {
            stop,
            thread: Some(thread),
        }
    }

    pub fn divergence(
        &mut self,
        seed: u64,
        d: &Divergence,
        prefix: &[Op],
        shrunk: Option<&[Op]>,
        tries: usize,
    ) -> Result<(), String> {
        let lines = |ops: &[Op]| ops.iter().map(Op::to_string).collect::<Vec<_>>();
        let sent = &prefix[prefix.len().saturating_sub(MAX_OPS_SENT)..];
        self.emit(json!({
            "kind": "divergence",
            "seed": seed,
            "step": d.step,
            "op": d.op.to_string(),
            "signature": d.signature(),
            "what": d.what,
            "ops": if sent.len() == prefix.len() { Value::from(lines(sent)) } else { Value::Null },
            "shrunk": shrunk.map(lines),
            "shrink_runs": tries,
        }))
    }

    /// Ends a run: its operations, and the racing rounds after them.
    pub fn summary(&mut self, out: &Outcome, raced: Option<&ThreadsOutcome>) -> Result<(), String> {
        let secs = out.elapsed.as_secs_f64();
        let mut counts = out.counts.clone();
        if let Some(r) = raced {
            counts.extend(race_counts(r));
        }
        self.emit(json!({
            "kind": "summary",
            "ops": out.ops.len(),
            "executed": out.executed,
            "secs": secs,
            "ops_per_sec": out.executed as f64 / secs.max(1e-9),
            "counts": counts,
            "diverged": out.divergence.is_some() || raced.is_some_and(|r| r.failure.is_some()),
        }))
    }

    /// A racing round that broke, as a divergence (signature "threads"):
    /// its last rounds as a race reproducer, and the fewest of them that
    /// broke the same check again when replayed, once shrunk.
    pub fn raced(
        &mut self,
        out: &ThreadsOutcome,
        shrunk: Option<&Script>,
        tries: usize,
    ) -> Result<(), String> {
        let Some(broken) = &out.failure else {
            return Ok(());
        };
        let last = &out.history[out.history.len().saturating_sub(MAX_ROUNDS_SENT)..];
        let unshrunk = Script {
            threads: out.threads,
            rounds: last.to_vec(),
        };
        self.emit(json!({
            "kind": "divergence",
            "step": out.ops,
            "op": format!("{} threads", out.threads),
            "signature": "threads",
            "what": format!("{} check: {}", broken.check, broken.what),
            "ops": unshrunk.lines(),
            "shrunk": shrunk.map(Script::lines),
            "shrink_runs": tries,
        }))
    }

    /// Ends a `--threads` run or a race reproducer's replay; whether it
    /// held.
    pub fn threads_summary(&mut self, out: &ThreadsOutcome) -> Result<bool, String> {
        let secs = out.elapsed.as_secs_f64();
        self.emit(json!({
            "kind": "summary",
            "ops": out.ops,
            "executed": out.ops,
            "secs": secs,
            "ops_per_sec": out.ops as f64 / secs.max(1e-9),
            "counts": race_counts(out),
            "diverged": out.failure.is_some(),
        }))?;
        Ok(out.failure.is_none())
    }
}

/// The summary's counts of racing rounds (what the host reads back).
fn race_counts(r: &ThreadsOutcome) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::from([
        (format!("race rounds ({} threads)", r.threads), r.rounds),
        ("race events".to_string(), r.ops),
    ]);
    if r.repetitions > 0 {
        counts.insert("race replays".to_string(), r.repetitions);
    }
    counts
}

/// Stops the heartbeat when dropped.
pub struct Heartbeat {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
