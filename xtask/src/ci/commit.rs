//! The commit a ci run is of: its id goes into the run's times, and its
//! first bits seed the fuzzer, so a failing run is repeated by its commit.

use std::process::Command;

use crate::project;

/// HEAD's commit id; None outside a git checkout.
pub fn id() -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(project::root())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The first 64 bits of HEAD's commit id; None outside a git checkout.
pub fn seed() -> Option<u64> {
    u64::from_str_radix(id()?.get(..16)?, 16).ok()
}
