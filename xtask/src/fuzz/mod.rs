//! The differential fuzzer's host side: what the guest is told, its
//! records read back (`records`), kernels compared with each other, and
//! reproducers written for a divergence: the guest's shrunk one, or, for
//! a kernel that died mid-run, the operations drawn again on the host
//! from the seed up to the last progress the guest reported (the
//! generator reads only the model's structure, the same on every
//! kernel). The guest program is `vm-images/map-fuzz`; the skeleton client
//! it runs is built here (`client`, `tools`); `campaign` runs the fuzzer
//! on a run's kernels and judges each.

pub mod campaign;
pub mod client;
pub mod records;
pub mod tools;

use std::fmt::Write as _;
use std::path::Path;

use map_fuzz::gen::Generator;
use map_fuzz::model::Model;
use selftests::runner::Kernel;

use self::records::KernelFuzz;

/// Where the image keeps a reproducer to replay.
pub const REPLAY_PATH: &str = "/fuzz/replay.ops";

/// What the guest's fuzzer is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FuzzParams {
    pub seed: u64,
    pub seconds: u64,
    pub threads: usize,
    /// Of `seconds` with one thread: the last ones, rounds of racing
    /// threads (`RACE_THREADS`).
    pub race_seconds: u64,
    pub replay: bool,
}

/// Threads of the racing rounds that end a one-thread run: as many as a
/// guest has vCPUs.
pub const RACE_THREADS: usize = 4;

/// The share of a one-thread run's seconds that goes to racing rounds
/// unless told: a quarter.
pub fn default_race_seconds(seconds: u64) -> u64 {
    seconds / 4
}

impl FuzzParams {
    /// What the guest is to try beyond plain operations: a one-thread
    /// run injects allocation failures and, with race seconds, ends in
    /// racing rounds; a `--threads` run only races; a replay tries what
    /// its file holds, so nothing is owed.
    pub fn planned(&self) -> records::Planned {
        records::Planned {
            inject: self.threads == 1 && !self.replay,
            races: !self.replay && (self.threads > 1 || self.race_seconds > 0),
        }
    }

    /// The fuzzer's arguments after /init's `--kernel` and `--results`.
    pub fn guest_args(&self) -> Vec<String> {
        let mut args = vec![
            "--seed".to_string(),
            self.seed.to_string(),
            "--seconds".to_string(),
            self.seconds.to_string(),
            "--threads".to_string(),
            self.threads.to_string(),
        ];
        if self.threads == 1 && self.race_seconds > 0 && !self.replay {
            args.extend([
                "--race-seconds".to_string(),
                self.race_seconds.to_string(),
                "--race-threads".to_string(),
                RACE_THREADS.to_string(),
            ]);
        }
        if self.replay {
            args.extend(["--replay".to_string(), REPLAY_PATH.to_string()]);
        }
        args
    }
}

/// The first point where two of the series' kernels saw different
/// returns for the same operations: (ops, kernel a, kernel b), every
/// pair compared at every count both reached. Eager (and a source's base)
/// differs by design (a zapped page is a hole there), so it is left out.
pub fn digests_disagree<'a>(
    runs: &[(&'a str, &'a KernelFuzz)],
) -> Option<(usize, &'a str, &'a str)> {
    let lazy: Vec<&(&str, &KernelFuzz)> = runs
        .iter()
        .filter(|(name, _)| !name.starts_with("eager") && !name.starts_with("base"))
        .collect();
    let mut first: Option<(usize, &str, &str)> = None;
    for (i, (a, ka)) in lazy.iter().enumerate() {
        for (b, kb) in &lazy[i + 1..] {
            let differ = ka.digests.iter().find(|(ops, digest)| {
                kb.digests
                    .iter()
                    .any(|(o, other)| o == ops && other != digest)
            });
            if let Some((ops, _)) = differ {
                if first.is_none_or(|(f, _, _)| *ops < f) {
                    first = Some((*ops, a, b));
                }
            }
        }
    }
    first
}

/// The operations a run with `seed` draws first, `count` of them, as the
/// guest drew them (with the client or not, with `nodes` NUMA nodes,
/// with fail_page_alloc or not).
pub fn regenerate(seed: u64, count: usize, nodes: u32, client: bool, inject: bool) -> Vec<String> {
    let mut model = Model::new(Kernel::Mainline, nodes, client);
    model.inject = inject;
    let mut gen = Generator::new(seed);
    (0..count)
        .map(|_| {
            let op = gen.next(&model);
            model.apply(&op);
            op.to_string()
        })
        .collect()
}

/// The kernel a reproducer replays on, as `fuzz` takes it again: a
/// kernel of the series by name, or a bzImage by path with the variant
/// its claim held it to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayKernel {
    /// The `--kernel` word: a name or a path.
    pub word: String,
    /// The `--claim` a bzImage by path needs.
    pub claim: Option<String>,
}

impl ReplayKernel {
    /// Its flags on `fuzz`'s command line.
    fn flags(&self) -> String {
        match &self.claim {
            Some(side) => format!("--kernel {} --claim {side}", self.word),
            None => format!("--kernel {}", self.word),
        }
    }
}

/// A reproducer file: what it reproduces, how to replay it on `kernel`,
/// then one operation a line.
pub fn reproducer(kernel: &ReplayKernel, seed: u64, what: &str, ops: &[String]) -> String {
    let mut text = String::new();
    let name = &kernel.word;
    let _ = writeln!(text, "# bpflab fuzz reproducer: kernel {name}, seed {seed}");
    let _ = writeln!(text, "# {what}");
    let _ = writeln!(
        text,
        "# replay: cargo xtask fuzz {} --replay <this file>",
        kernel.flags()
    );
    for op in ops {
        let _ = writeln!(text, "{op}");
    }
    text
}

/// `fuzz-<kernel>-<seed>.ops` in `dir`.
pub fn reproducer_path(dir: &Path, kernel: &str, seed: u64) -> std::path::PathBuf {
    dir.join(format!("fuzz-{kernel}-{seed}.ops"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guest_is_told_the_seed_time_threads_and_replay() {
        let p = FuzzParams {
            seed: 9,
            seconds: 60,
            threads: 1,
            race_seconds: 15,
            replay: true,
        };
        assert_eq!(
            p.guest_args(),
            [
                "--seed",
                "9",
                "--seconds",
                "60",
                "--threads",
                "1",
                "--replay",
                REPLAY_PATH
            ],
            "a replay does not race"
        );
        let drawn = FuzzParams { replay: false, ..p };
        assert_eq!(
            drawn.guest_args()[6..],
            ["--race-seconds", "15", "--race-threads", "4"]
        );
        let threads = FuzzParams {
            threads: 4,
            ..drawn
        };
        assert_eq!(threads.guest_args().len(), 6, "all of it races already");
    }

    #[test]
    fn the_series_kernels_must_agree_and_base_may_differ() {
        let k = |d: &[(usize, &str)]| KernelFuzz {
            digests: d.iter().map(|(o, s)| (*o, s.to_string())).collect(),
            ..Default::default()
        };
        let (a, b, c, base) = (
            k(&[(250, "x"), (500, "y")]),
            k(&[(250, "x")]),
            k(&[(250, "x"), (500, "z")]),
            k(&[(250, "q")]),
        );
        assert_eq!(
            digests_disagree(&[("base", &base), ("patched", &a), ("direct", &b)]),
            None
        );
        assert_eq!(
            digests_disagree(&[("patched", &a), ("direct", &b), ("adaptive", &c)]),
            Some((500, "patched", "adaptive"))
        );
        // The first kernel stopped early: the others are still compared.
        let (d, e) = (
            k(&[(250, "x"), (500, "y"), (750, "v")]),
            k(&[(250, "x"), (500, "y"), (750, "w")]),
        );
        assert_eq!(
            digests_disagree(&[("patched", &b), ("direct", &d), ("prefault", &e)]),
            Some((750, "direct", "prefault"))
        );
    }

    #[test]
    fn the_host_draws_what_the_guest_drew() {
        let ops = regenerate(42, 300, 2, true, true);
        assert_eq!(ops.len(), 300);
        // The guest drew them on its own kernel: base's model, say.
        let mut model = Model::new(Kernel::Eager, 2, true);
        model.inject = true;
        let mut gen = Generator::new(42);
        let on_base: Vec<String> = (0..300)
            .map(|_| {
                let op = gen.next(&model);
                model.apply(&op);
                op.to_string()
            })
            .collect();
        assert_eq!(ops, on_base);
        // A guest without the client or with one node drew others.
        assert_ne!(ops, regenerate(42, 300, 2, false, true));
        // Each line reads back as an operation the guest can replay.
        let patched = ReplayKernel {
            word: "patched".into(),
            claim: None,
        };
        let text = reproducer(&patched, 42, "the kernel died", &ops);
        assert_eq!(map_fuzz::op::parse_ops(&text).unwrap().len(), 300);
        assert!(text.starts_with("# bpflab fuzz reproducer: kernel patched, seed 42\n"));
    }
}
