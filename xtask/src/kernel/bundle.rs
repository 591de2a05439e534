//! A bundle: what the test jobs of a CI workflow need of the build job's
//! work, apart from the cache that holds the trees and objects (gigabytes,
//! more than a CI cache keeps). The bzImage of each kernel, and for the
//! BPF selftests each kernel's run directory with its files, not links.
//!
//! ```text
//! <bundle>/manifest.json                    what it was made from (`bundle_manifest`)
//! <bundle>/kernels/<kernel>.bzImage         eager, mainline-debug, ...
//! <bundle>/kselftest-<config>/run/<kernel>/ test_progs, its flavors, modules
//! <bundle>/kselftest-<config>/left-out.json what could not be built
//! ```
//!
//! With `--bundle DIR` (or `$BPFLAB_BUNDLE`) vmtest, bench and kselftest
//! take their kernels and test programs from it and build nothing, once
//! its manifest says this checkout would build the same.

use std::path::{Path, PathBuf};

use super::KernelConfig;

/// The environment variable that names a bundle, for the steps of `ci`.
pub const BUNDLE_ENV: &str = "BPFLAB_BUNDLE";

/// What a bundle holds, as `--kernel` words and whether debug: every
/// kernel, and the debug ones of the series' variants, which are what
/// the test steps of `ci` boot.
pub const KERNELS: &[(&str, bool)] = &[("all", false), ("mainline,adaptive", true)];

/// Where a kernel's image is in a bundle.
pub fn image(bundle: &Path, kernel: &str) -> PathBuf {
    bundle.join("kernels").join(format!("{kernel}.bzImage"))
}

/// The BPF selftests of one configuration in a bundle.
pub fn kselftest_dir(bundle: &Path, config: KernelConfig) -> PathBuf {
    bundle.join(match config {
        KernelConfig::Lean => "kselftest-lean",
        KernelConfig::BpfCi => "kselftest-bpfci",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout() {
        let b = Path::new("/b");
        assert_eq!(
            image(b, "patched-debug"),
            Path::new("/b/kernels/patched-debug.bzImage")
        );
        assert_eq!(
            kselftest_dir(b, KernelConfig::BpfCi),
            Path::new("/b/kselftest-bpfci")
        );
    }
}
