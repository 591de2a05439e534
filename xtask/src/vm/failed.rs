//! Why a VM did not do its job, in the one shape every suite takes it
//! (plan, kselftest, fuzz, bench, `run`, and the mutants through them):
//! the cause on one line, what the kernel said of itself, which tells a
//! kernel's failure from the host's, how far the guest got, and the
//! console to read. No suite reads any of it back out of text.

use std::fmt;
use std::path::PathBuf;

use super::process::VmOutcome;

/// What a guest's kernel said of itself on its console.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelSign {
    Panicked,
    /// A splat (a BUG, a WARNING, a lockup report): the first one.
    Splat(String),
    /// Neither: a VM that failed anyway was failed by the host (QEMU
    /// killed, a results stall, a share's daemon gone).
    Nothing,
}

/// What the kernel of the run `outcome` said of itself.
pub fn kernel_sign(outcome: &VmOutcome) -> KernelSign {
    match (&outcome.panic, outcome.splats.first()) {
        (Some(_), _) => KernelSign::Panicked,
        (None, Some(splat)) => KernelSign::Splat(splat.trim().to_string()),
        (None, None) => KernelSign::Nothing,
    }
}

/// A VM that did not do its job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmFailed {
    /// What went wrong, on one line ("the kernel panicked: ...", "the
    /// guest hung: ...", "QEMU wrote no results file").
    pub cause: String,
    pub sign: KernelSign,
    /// Whether the guest got to /init.
    pub reached_init: bool,
    /// The kernel option its boot log says it lacks, which explains the
    /// rest.
    pub lacks: Option<String>,
    /// The console log and its last lines; None for a failure before a
    /// VM ran.
    pub console: Option<(PathBuf, Vec<String>)>,
}

impl VmFailed {
    /// A failure of the VM whose run is `outcome`, for `cause`.
    pub fn of_run(outcome: &VmOutcome, cause: String, lacks: Option<&str>) -> VmFailed {
        let tail = &outcome.tail[outcome.tail.len().saturating_sub(12)..];
        VmFailed {
            cause,
            sign: kernel_sign(outcome),
            reached_init: outcome.boot_secs.is_some(),
            lacks: lacks.map(str::to_string),
            console: Some((outcome.console_log.clone(), tail.to_vec())),
        }
    }

    /// A failure of the host's before any VM ran its kernel (the guest
    /// image, QEMU's start): no console, no sign of the kernel's.
    pub fn of_host(cause: String) -> VmFailed {
        VmFailed {
            cause,
            sign: KernelSign::Nothing,
            reached_init: false,
            lacks: None,
            console: None,
        }
    }

    /// Whether the kernel panicked: the kernel's failure, not the host's.
    pub fn panicked(&self) -> bool {
        self.sign == KernelSign::Panicked
    }

    /// The cause on one line, led by what the kernel lacks.
    pub fn headline(&self) -> String {
        match &self.lacks {
            Some(lacks) => format!("{lacks}; {}", self.cause),
            None => self.cause.clone(),
        }
    }
}

/// The headline, the console's path and its last lines.
impl fmt::Display for VmFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.headline())?;
        if let Some((log, tail)) = &self.console {
            write!(
                f,
                " (console: {})\nlast console lines:\n    {}",
                log.display(),
                tail.join("\n    ")
            )?;
        }
        Ok(())
    }
}

/// A VM failure of one kernel's run, named: "adaptive", or with
/// kselftest its runner ("adaptive test_progs").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedRun {
    pub name: String,
    pub failed: VmFailed,
}
