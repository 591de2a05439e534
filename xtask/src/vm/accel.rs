//! Choosing the accelerator: KVM where it can run our kernels, TCG
//! otherwise. Some hosts have a /dev/kvm that cannot run a normal kernel
//! (nested software hypervisors); what KVM showed on this host is
//! remembered in the cache, so later runs do not pay to find out again.

use std::fs;
use std::path::{Path, PathBuf};

use super::qemu::{self, Accel, AccelChoice};

/// In the cache: the host kernel under which KVM failed, and how.
const MEMO: &str = "kvm-unusable";

/// Picks the accelerator, and falls back to TCG once KVM has shown it
/// cannot run our kernels here.
#[derive(Clone)]
pub struct AccelPicker {
    choice: AccelChoice,
    kvm_failed: bool,
    memo: PathBuf,
}

/// Whether `auto` would try KVM first on this host: KVM is there and not
/// remembered as unusable. Says nothing (the picker says it at the boot).
pub fn auto_tries_kvm(cache_dir: &Path) -> bool {
    let text = fs::read_to_string(cache_dir.join(MEMO)).unwrap_or_default();
    memo_reason(&text, &host_release()).is_none() && qemu::kvm_available()
}

impl AccelPicker {
    pub fn new(choice: AccelChoice, cache_dir: &Path) -> AccelPicker {
        let memo = cache_dir.join(MEMO);
        // A memo that cannot be read is as good as none: KVM is tried.
        let text = fs::read_to_string(&memo).unwrap_or_default();
        let known = match choice {
            AccelChoice::Auto => memo_reason(&text, &host_release()),
            _ => None,
        };
        if let Some(why) = known {
            crate::status!(
                "accel",
                "KVM could not run a kernel on this host before ({why}): using TCG (delete {} to try KVM again)",
                memo.display()
            );
        }
        AccelPicker {
            choice,
            kvm_failed: known.is_some(),
            memo,
        }
    }

    pub fn choice(&self) -> AccelChoice {
        self.choice
    }

    pub fn current(&self) -> Accel {
        match self.choice {
            AccelChoice::Kvm => Accel::Kvm,
            AccelChoice::Tcg => Accel::Tcg,
            AccelChoice::Auto if !self.kvm_failed && qemu::kvm_available() => Accel::Kvm,
            AccelChoice::Auto => Accel::Tcg,
        }
    }

    /// KVM failed: TCG from now on, in this run and in later ones while
    /// the host runs the same kernel.
    pub fn kvm_failed(&mut self, why: &str) {
        self.kvm_failed = true;
        // Only a time saver: a memo that cannot be written is no error.
        let _ = fs::write(&self.memo, memo_text(&host_release(), why));
    }
}

/// The host kernel's release: KVM's abilities come with it.
fn host_release() -> String {
    fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn memo_text(release: &str, why: &str) -> String {
    format!("{release}\n{}\n", why.trim())
}

/// Why KVM failed, if the memo was written under this host kernel.
fn memo_reason<'a>(memo: &'a str, release: &str) -> Option<&'a str> {
    let (recorded, why) = memo.split_once('\n')?;
    (!release.is_empty() && recorded == release).then_some(why.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memo_holds_for_the_same_host_kernel_only() {
        let memo = memo_text("6.1.0-9-amd64", "no console output within 15 s under KVM");
        assert_eq!(
            memo_reason(&memo, "6.1.0-9-amd64"),
            Some("no console output within 15 s under KVM")
        );
        assert_eq!(memo_reason(&memo, "6.12.1"), None);
        assert_eq!(memo_reason("", "6.1.0-9-amd64"), None);
        assert_eq!(memo_reason(&memo, ""), None);
    }

    #[test]
    fn a_failure_is_remembered_in_the_cache() {
        let t = crate::util::tempdir();
        let mut p = AccelPicker::new(AccelChoice::Auto, &t);
        p.kvm_failed("KVM internal error. Suberror: 1");
        assert_eq!(p.current(), Accel::Tcg);
        let again = AccelPicker::new(AccelChoice::Auto, &t);
        assert!(again.kvm_failed, "the memo was not read back");
        assert_eq!(again.current(), Accel::Tcg);
        // An explicit choice is obeyed.
        assert_eq!(AccelPicker::new(AccelChoice::Kvm, &t).current(), Accel::Kvm);
        fs::remove_dir_all(t).unwrap();
    }
}
