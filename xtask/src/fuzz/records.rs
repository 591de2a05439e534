//! The guest fuzzer's `BPFLAB-FUZZ` records (`vm-images/map-fuzz/src/report.rs`
//! writes them), read into one kernel's run: how far it got, the digests
//! on the way, its divergence and its summary.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use map_fuzz::run::FIRED_OUTSIDE;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Record {
    Start {
        seed: u64,
        seconds: u64,
        threads: usize,
        nodes: u32,
        client: bool,
        /// Whether the guest had fail_page_alloc (`fail_alloc` ran).
        #[serde(default)]
        inject: bool,
    },
    Progress {
        ops: usize,
        digest: String,
    },
    /// A sign of life while the guest shrinks or its threads run.
    Alive,
    Divergence(Divergence),
    Summary(Summary),
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Divergence {
    #[serde(default)]
    pub seed: Option<u64>,
    pub step: usize,
    pub op: String,
    pub signature: String,
    pub what: String,
    /// Every operation up to the divergence, when the guest sent them.
    pub ops: Option<Vec<String>>,
    pub shrunk: Option<Vec<String>>,
    pub shrink_runs: usize,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct Summary {
    pub ops: usize,
    pub executed: usize,
    pub secs: f64,
    pub ops_per_sec: f64,
    pub counts: BTreeMap<String, usize>,
    pub diverged: bool,
}

/// One kernel's fuzzing, as its records tell it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KernelFuzz {
    pub client: bool,
    pub inject: bool,
    /// Operations passed, by the last progress record or the summary.
    pub ops: usize,
    /// (operations, digest) at each progress record.
    pub digests: Vec<(usize, String)>,
    pub divergence: Option<Divergence>,
    pub summary: Option<Summary>,
}

/// Reads one kernel's records, in order.
pub fn read(payloads: &[String]) -> Result<KernelFuzz> {
    let mut k = KernelFuzz::default();
    for p in payloads {
        let record: Record = serde_json::from_str(p)
            .with_context(|| format!("a fuzz record the host cannot read: {p}"))?;
        match record {
            Record::Start { client, inject, .. } => {
                k.client = client;
                k.inject = inject;
            }
            Record::Progress { ops, digest } => {
                k.ops = k.ops.max(ops);
                k.digests.push((ops, digest));
            }
            Record::Alive => {}
            Record::Divergence(d) => k.divergence = Some(d),
            Record::Summary(s) => {
                k.ops = k.ops.max(s.ops);
                k.summary = Some(s);
            }
        }
    }
    Ok(k)
}

impl KernelFuzz {
    /// What a run tried beyond plain operations, from its summary: the
    /// injected allocation failures (drawn, and fired) and the racing
    /// rounds. A clean verdict proves nothing of either when it says 0.
    pub fn tried(&self) -> Option<String> {
        let counts = &self.summary.as_ref()?.counts;
        let count = |key: &str| counts.get(key).copied().unwrap_or(0);
        let injected = if self.inject {
            let outside = match count(FIRED_OUTSIDE) {
                0 => String::new(),
                n => format!(" ({n} outside the operation's path)"),
            };
            format!(
                "fail_alloc {}, {} fired{outside}",
                count("fail_alloc"),
                count("fail_alloc fired")
            )
        } else {
            "no fail_page_alloc in the kernel".to_string()
        };
        let rounds = counts
            .iter()
            .find(|(k, _)| k.starts_with("race rounds"))
            .map_or("no racing round".to_string(), |(k, n)| {
                format!("{n} {}", k.trim_start_matches("race "))
            });
        let replays = match count("race replays") {
            0 => String::new(),
            n => format!(" in {n} replays"),
        };
        Some(format!("{injected}; {rounds}{replays}"))
    }

    /// What a clean run was to try and did not: an allocation failure
    /// fired in an operation's path where the kernel has the injection
    /// and the plan injects, a racing round where the plan races. A run
    /// short of either proved nothing of it (`FuzzVerdict::NotExercised`);
    /// a kernel without fail_page_alloc is no shortfall (`tried` says so).
    pub fn unexercised(&self, planned: Planned) -> Vec<&'static str> {
        let Some(s) = &self.summary else {
            return Vec::new();
        };
        let mut missing = Vec::new();
        let count = |key: &str| s.counts.get(key).copied().unwrap_or(0);
        let fired_in_path = count("fail_alloc fired") > count(FIRED_OUTSIDE);
        if planned.inject && self.inject && !fired_in_path {
            missing.push("no allocation failure fired in an operation's path");
        }
        if planned.races && !s.counts.keys().any(|k| k.starts_with("race rounds")) {
            missing.push("no racing round");
        }
        missing
    }
}

/// What a run's plan has the guest try beyond plain operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Planned {
    /// Allocation failures (`fail_alloc`), where the kernel has them.
    pub inject: bool,
    /// Rounds of racing threads.
    pub races: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_with_progress_and_a_divergence_reads_back() {
        let lines = [
            r#"{"kind":"start","seed":7,"seconds":60,"threads":1,"nodes":2,"client":true}"#,
            r#"{"kind":"progress","ops":250,"digest":"00000000000000aa"}"#,
            r#"{"kind":"progress","ops":500,"digest":"00000000000000bb"}"#,
            r#"{"kind":"alive"}"#,
            r#"{"kind":"divergence","seed":7,"step":612,"op":"touch @3.1=r","signature":"page","what":"page @3: absent","ops":null,"shrunk":["create m0 value=8 entries=1"],"shrink_runs":40}"#,
            r#"{"kind":"summary","ops":613,"executed":600,"secs":3.5,"ops_per_sec":171.4,"counts":{"touch":400},"diverged":true}"#,
        ];
        let k = read(&lines.map(String::from)).unwrap();
        assert!(k.client);
        assert_eq!(k.ops, 613);
        assert_eq!(k.digests[1], (500, "00000000000000bb".to_string()));
        let d = k.divergence.unwrap();
        assert_eq!((d.step, d.signature.as_str()), (612, "page"));
        assert_eq!(d.shrunk.unwrap().len(), 1);
        assert_eq!(k.summary.unwrap().counts["touch"], 400);
        let err = read(&["{\"kind\":\"party\"}".into()])
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("a fuzz record the host cannot read"),
            "{err}"
        );
    }

    /// A one-thread run's plan: injection, then racing rounds.
    const ALL: Planned = Planned {
        inject: true,
        races: true,
    };

    fn summary(counts: &str) -> String {
        format!(
            r#"{{"kind":"summary","ops":9,"executed":9,"secs":1.0,"ops_per_sec":9.0,"counts":{counts},"diverged":false}}"#
        )
    }

    fn start(inject: bool) -> String {
        format!(
            r#"{{"kind":"start","seed":7,"seconds":60,"threads":1,"nodes":2,"client":false,"inject":{inject}}}"#
        )
    }

    #[test]
    fn what_a_run_tried_is_read_from_its_summary() {
        let both = read(&[
            start(true),
            summary(r#"{"fail_alloc":134,"fail_alloc fired":23,"race rounds (4 threads)":412}"#),
        ])
        .unwrap();
        assert_eq!(
            both.tried().unwrap(),
            "fail_alloc 134, 23 fired; 412 rounds (4 threads)"
        );
        assert!(both.unexercised(ALL).is_empty());
        let never_fired = read(&[
            start(true),
            summary(r#"{"fail_alloc":3,"race rounds (4 threads)":5}"#),
        ])
        .unwrap();
        assert_eq!(
            never_fired.tried().unwrap(),
            "fail_alloc 3, 0 fired; 5 rounds (4 threads)"
        );
        assert_eq!(
            never_fired.unexercised(ALL),
            ["no allocation failure fired in an operation's path"]
        );
        // Fired, every one outside the operation's path: said, and
        // counted as none tried.
        let outside = read(&[
            start(true),
            summary(
                r#"{"fail_alloc":9,"fail_alloc fired":2,"fail_alloc fired outside the path":2,"race rounds (4 threads)":5}"#,
            ),
        ])
        .unwrap();
        assert_eq!(
            outside.tried().unwrap(),
            "fail_alloc 9, 2 fired (2 outside the operation's path); 5 rounds (4 threads)"
        );
        assert_eq!(
            outside.unexercised(ALL),
            ["no allocation failure fired in an operation's path"]
        );
        let neither = read(&[start(false), summary(r#"{"touch":9}"#)]).unwrap();
        assert_eq!(
            neither.tried().unwrap(),
            "no fail_page_alloc in the kernel; no racing round"
        );
        let replayed = read(&[
            start(true),
            summary(r#"{"race rounds (4 threads)":991,"race replays":991}"#),
        ])
        .unwrap();
        assert_eq!(
            replayed.tried().unwrap(),
            "fail_alloc 0, 0 fired; 991 rounds (4 threads) in 991 replays"
        );
        assert_eq!(read(&[start(true)]).unwrap().tried(), None);
    }

    /// A run owes what its plan tries and its kernel has: a --threads
    /// run no injection, a kernel without fail_page_alloc none either.
    #[test]
    fn what_a_run_owes_is_what_its_plan_and_kernel_have() {
        let never_fired = read(&[
            start(true),
            summary(r#"{"fail_alloc":3,"race rounds (4 threads)":5}"#),
        ])
        .unwrap();
        let threads_only = Planned {
            inject: false,
            races: true,
        };
        assert!(
            never_fired.unexercised(threads_only).is_empty(),
            "--threads injects nothing"
        );
        let neither = read(&[start(false), summary(r#"{"touch":9}"#)]).unwrap();
        // A kernel without the injection falls short of nothing there;
        // a plan that races, of its rounds.
        assert_eq!(neither.unexercised(ALL), ["no racing round"]);
        let no_race = Planned {
            inject: true,
            races: false,
        };
        assert!(neither.unexercised(no_race).is_empty());
    }
}
