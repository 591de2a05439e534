//! The results protocol between the guest and the host harness, as
//! constants both sides use: the line prefixes on the results port, the
//! `bpflab.*` kernel parameters /init reads, and the boot marker.
//!
//! ```text
//! BPFLAB-PLAN <n> <name> <name> ...      the tests about to run, in order
//! BPFLAB-START <name>                    a test begins (names the culprit
//!                                        if the kernel dies during it)
//! BPFLAB-RESULT <name> pass <ms>
//! BPFLAB-RESULT <name> fail <ms> <message on one line>  (its lines
//!                                        joined by LINE_BREAK)
//! BPFLAB-RESULT <name> skip 0 <reason>
//! BPFLAB-RESULT <name> notrun 0 <why>    the runner stopped early
//! BPFLAB-BENCH <json>                    one benchmark record
//! BPFLAB-VERDICT pass|fail|error <detail>  exactly one, written by /init:
//!                                        exit=N, signal=NAME, status=N
//!                                        (a host command) or one line of text
//! ```
//!
//! Both sides write and read these lines through one type, [`Line`].

mod line;

pub use line::{Detail, Line, Outcome, TestLine, Verdict};

/// What joins a message's lines on its one protocol line; the host
/// splits them again into the message and its detail.
pub const LINE_BREAK: &str = " | ";

/// The project's one machine-facing name.
pub const NAME: &str = "bpflab";

pub const PLAN: &str = "BPFLAB-PLAN";
pub const START: &str = "BPFLAB-START";
pub const RESULT: &str = "BPFLAB-RESULT";
pub const BENCH: &str = "BPFLAB-BENCH";
pub const FUZZ: &str = "BPFLAB-FUZZ";
pub const VERDICT: &str = "BPFLAB-VERDICT";
/// Every protocol line starts with this.
pub const LINE_PREFIX: &str = "BPFLAB-";

/// What /init prints on the console when it hands over to the program; the
/// host measures boot time up to it.
pub const BOOT_MARKER: &str = "bpflab-init: starting";

/// The guest's results port (its second serial port).
pub const RESULTS_PORT: &str = "/dev/ttyS1";

/// The kernels the test plan has expectations for (`bpflab.kernel`):
/// eager (without the lazy mapping: 7.3 with it reverted), mainline
/// (with it, 0001: 7.3 as shipped), then each variant of patches/series:
/// +0002 and 0003 (the fault handlers of array and arena maps map the
/// page), +0004 (a window grown while faults are sequential), +0005
/// (small mappings populated by mmap()).
pub const PLAN_KERNELS: [&str; 5] = ["eager", "mainline", "direct", "prefault", "adaptive"];

/// The most map pages one fault maps on "prefault" and "adaptive"
/// (ARRAY_MAP_FAULT_WINDOW, defined by patch 0004): what their tests and
/// the bench's Rss bound expect. xtask's
/// `the_series_defines_what_the_guest_expects` fails when the two differ.
pub const PREFAULT_WINDOW_PAGES: usize = 64;

/// The largest mapping mmap() populates whole on "adaptive"
/// (ARRAY_MAP_MMAP_POPULATE_PAGES, defined by patch 0005), held to the
/// series' `#define` as PREFAULT_WINDOW_PAGES is.
pub const MMAP_POPULATE_PAGES: usize = 256;

/// Kernel command-line keys read by /init.
pub mod param {
    pub const PREFIX: &str = "bpflab.";
    pub const RUN: &str = "bpflab.run";
    pub const KERNEL: &str = "bpflab.kernel";
    pub const ARGS: &str = "bpflab.args";
    pub const INJECT: &str = "bpflab.inject";
    /// `bpflab.net=user`: the guest takes an address and DNS from
    /// QEMU's user-mode network (DHCP) before its program.
    pub const NET: &str = "bpflab.net";
    /// NET's one value.
    pub const NET_USER: &str = "user";
}

/// Words of a `BPFLAB-RESULT` line's status field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultWord {
    Pass,
    Fail,
    Skip,
    NotRun,
}

impl ResultWord {
    pub const ALL: [ResultWord; 4] = [
        ResultWord::Pass,
        ResultWord::Fail,
        ResultWord::Skip,
        ResultWord::NotRun,
    ];

    pub fn word(self) -> &'static str {
        match self {
            ResultWord::Pass => "pass",
            ResultWord::Fail => "fail",
            ResultWord::Skip => "skip",
            ResultWord::NotRun => "notrun",
        }
    }

    pub fn parse(word: &str) -> Option<ResultWord> {
        Self::ALL.into_iter().find(|w| w.word() == word)
    }
}

/// Which guest program /init runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    Selftests,
    Bench,
    /// The differential fuzzer (`vm-images/map-fuzz`).
    Fuzz,
    /// A host command (or shell) from the request, in the shared host root.
    Command,
}

impl Program {
    pub const ALL: [Program; 4] = [
        Program::Selftests,
        Program::Bench,
        Program::Fuzz,
        Program::Command,
    ];

    /// Name of the program; for selftests and bench also its file name
    /// under /bin.
    pub fn name(self) -> &'static str {
        match self {
            Program::Selftests => "selftests",
            Program::Bench => "bench",
            Program::Fuzz => "fuzz",
            Program::Command => "command",
        }
    }

    pub fn parse(name: &str) -> Option<Program> {
        Self::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// A deliberate failure the harness asks /init for, to test its own
/// failure paths. (Failures in the middle of the plan are asked of the
/// selftests runner instead: see its `--inject-*` options.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inject {
    /// Crash the kernel through sysrq before running the program.
    Panic,
    /// Provoke a kernel WARNING through lkdtm, then run the program.
    Warn,
    /// Run the program, then never write a verdict.
    Hang,
    /// Run the program, then write more to the console than the host
    /// keeps: the host must bound its log and still report.
    Flood,
}

impl Inject {
    pub const ALL: [Inject; 4] = [Inject::Panic, Inject::Warn, Inject::Hang, Inject::Flood];

    pub fn name(self) -> &'static str {
        match self {
            Inject::Panic => "panic",
            Inject::Warn => "warn",
            Inject::Hang => "hang",
            Inject::Flood => "flood",
        }
    }

    pub fn parse(name: &str) -> Option<Inject> {
        Self::ALL.into_iter().find(|i| i.name() == name)
    }
}

/// A failure the selftests runner provokes when a given test starts, to
/// test the host's handling of failures in the middle of the plan
/// (`--inject KIND:TEST`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestInject {
    /// The test's process crashes the kernel (lkdtm PANIC).
    Crash,
    /// The runner itself stops responding: only the host's stall or
    /// overall limit ends the run.
    Freeze,
    /// The test hangs: its own timeout must end it.
    Stall,
}

impl TestInject {
    pub const ALL: [TestInject; 3] = [TestInject::Crash, TestInject::Freeze, TestInject::Stall];

    pub fn name(self) -> &'static str {
        match self {
            TestInject::Crash => "crash",
            TestInject::Freeze => "freeze",
            TestInject::Stall => "stall",
        }
    }

    /// `KIND:TEST`, e.g. `crash:t11_split_middle_page`.
    pub fn parse_spec(spec: &str) -> Result<(TestInject, String), String> {
        let (kind, test) = spec
            .split_once(':')
            .ok_or(format!("--inject {spec:?}: want KIND:TEST"))?;
        let kind = Self::ALL
            .into_iter()
            .find(|k| k.name() == kind)
            .ok_or(format!(
                "--inject kind {kind:?}: want crash, freeze or stall"
            ))?;
        if test.is_empty() {
            return Err("--inject: empty test name".into());
        }
        Ok((kind, test.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip() {
        for w in ResultWord::ALL {
            assert_eq!(ResultWord::parse(w.word()), Some(w));
        }
        for p in Program::ALL {
            assert_eq!(Program::parse(p.name()), Some(p));
        }
        for i in Inject::ALL {
            assert_eq!(Inject::parse(i.name()), Some(i));
        }
        assert_eq!(ResultWord::parse("maybe"), None);
        assert_eq!(
            TestInject::parse_spec("crash:t11_x"),
            Ok((TestInject::Crash, "t11_x".into()))
        );
        assert!(TestInject::parse_spec("boom:t03").is_err());
        assert!(TestInject::parse_spec("crash").is_err());
        assert!(TestInject::parse_spec("crash:").is_err());
        assert_eq!(Inject::parse("oops"), None);
    }

    #[test]
    fn names_agree() {
        assert!(BOOT_MARKER.starts_with(NAME));
        assert!(param::PREFIX.starts_with(NAME));
        for tag in [PLAN, START, RESULT, BENCH, VERDICT] {
            assert!(tag.starts_with(LINE_PREFIX));
            assert!(tag.to_lowercase().starts_with(NAME));
        }
        for key in [param::RUN, param::KERNEL, param::ARGS, param::INJECT] {
            assert!(key.starts_with(param::PREFIX));
        }
    }
}
