//! Which of ci's steps may take a bundle (`$BPFLAB_BUNDLE`, made by
//! `cargo xtask bundle`): the steps that only boot kernels and run test
//! programs. A run with a bundle set runs only those. A whole run builds
//! this checkout's kernels and would then boot the bundle's in vmtest,
//! kselftest and bench, so it is refused; the GitHub workflow's test jobs
//! set the bundle for one such step each, and keep it.

use anyhow::{bail, Result};

use super::Step;
use crate::kernel::bundle::BUNDLE_ENV;

/// Whether a step only boots kernels (and runs test programs) it can take
/// from a bundle, rather than building them. A kernel with a fragment of
/// its own (`--config`, as KASAN's) is not in a bundle: its step builds it.
pub fn boots_from_bundle(step: &Step) -> bool {
    let sub = step.args.first().map(String::as_str);
    step.program != "cargo"
        && matches!(sub, Some("vmtest" | "kselftest" | "bench"))
        && !step
            .args
            .iter()
            .any(|a| a == "--build-only" || a == "--config")
}

/// Refuses a bundle (`bundle`: `$BPFLAB_BUNDLE`'s value, if set and not
/// empty) for a run of `selected` unless every step of it boots from
/// the bundle; `all` are every step, for the ids that may.
pub fn refuse_mixed(selected: &[Step], all: &[Step], bundle: Option<&str>) -> Result<()> {
    let Some(dir) = bundle.filter(|d| !d.is_empty()) else {
        return Ok(());
    };
    let others: Vec<&str> = selected
        .iter()
        .filter(|s| !boots_from_bundle(s))
        .map(|s| s.id)
        .collect();
    if others.is_empty() {
        return Ok(());
    }
    let booting: Vec<&str> = all
        .iter()
        .filter(|s| boots_from_bundle(s))
        .map(|s| s.id)
        .collect();
    bail!(
        "{BUNDLE_ENV}={dir} is set, but the steps {} do not boot from a bundle: unset \
         {BUNDLE_ENV} for this run (what it builds would not be what vmtest, kselftest and \
         bench boot), or --step only steps that do ({})",
        others.join(", "),
        booting.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ci::{steps, Options};

    fn every_step() -> Vec<Step> {
        let options = Options {
            debug: true,
            ..Options::default()
        };
        steps::steps(&options, "xtask")
    }

    fn only(ids: &[&str]) -> Vec<Step> {
        let only: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
        steps::select(every_step(), &only).unwrap()
    }

    #[test]
    fn a_whole_run_with_a_bundle_is_refused_in_one_line() {
        let all = every_step();
        let e = refuse_mixed(&all, &all, Some("/old"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("BPFLAB_BUNDLE=/old is set, but the steps fmt, "),
            "{e}"
        );
        assert!(e.contains(" build,"), "{e}");
        assert!(e.contains("unset BPFLAB_BUNDLE for this run"), "{e}");
        assert!(e.contains("(vmtest-eager, "), "{e}");
        assert!(!e.contains('\n'), "{e}");
        let mixed = only(&["build", "vmtest-mainline"]);
        let e = refuse_mixed(&mixed, &all, Some("/old"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the steps build do not boot from a bundle"),
            "{e}"
        );
    }

    #[test]
    fn the_workflows_booting_steps_keep_their_bundle() {
        let all = every_step();
        for ids in [
            &["vmtest-mainline"][..],
            &["kselftest"],
            &["bench"],
            &["vmtest-adaptive-debug", "kselftest-debug"],
        ] {
            refuse_mixed(&only(ids), &all, Some("/b")).unwrap();
        }
        refuse_mixed(&only(&["kselftest-build"]), &all, Some("/b")).unwrap_err();
        refuse_mixed(&all, &all, None).unwrap();
        refuse_mixed(&all, &all, Some("")).unwrap();
    }
}
