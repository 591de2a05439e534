//! The harness's fault tests in ci, each in exactly one step: queued
//! those that only boot the kernels the build made or that have caches
//! or trees of their own; alone, after the queue, the rest, which build,
//! make base stale, kill builds and hold the cache's lock on purpose.

use super::{booting_tests, Step};

/// The fault tests that only boot the kernels the build step made (a
/// guest that panics, freezes, hangs or floods its console, a test that
/// hangs or fails, QEMU killed): they run queued. The others build,
/// make base stale, kill builds and hold the cache's lock on purpose, so
/// they run alone, after the queue.
pub const GUEST_FAULTS: [&str; 10] = [
    "guest_panic_is_a_vm_failure",
    "kernel_crash_mid_plan_keeps_every_result",
    "guest_that_stops_responding_mid_plan_is_handled_like_a_crash",
    "a_hanging_test_costs_its_own_timeout_and_fail_fast_stops_the_run",
    "hung_guest_is_killed_at_the_timeout",
    "kernel_warning_fails_a_passing_run",
    "failing_test_gives_exit_code_1",
    "qemu_killed_mid_run_is_a_vm_failure_and_leaves_nothing_running",
    "console_flood_keeps_a_bounded_log_and_still_reports",
    "missing_qemu_is_reported_before_any_long_step",
];

/// The fault tests with caches or trees of their own, none of the
/// kernels' trees: a full disk and a patch that does not apply (each in
/// a cache of its own), and the maintainer's gates (the check trees),
/// of the series and of each patch on its own. They run queued, beside
/// test_progs' build (`queue::FREE_OF_KERNEL_TREES`).
pub const OWN_CACHE_FAULTS: [&str; 4] = [
    "a_full_cache_is_one_line_and_the_next_run_with_space_recovers",
    "patch_that_does_not_apply_is_named_and_nothing_is_applied",
    "a_series_that_fails_the_maintainer_gates_is_named_gate_by_gate",
    "a_patch_that_breaks_the_build_is_named_though_the_next_fixes_it",
];

/// The fault tests of mutants: the control on a host that cannot boot
/// guests, and mutants (and controls) of their own in the `mutant` tree,
/// which they take in turn with the mutants step (each boots a copy of
/// its kernel's bzImage, made before the tree is let go). They run
/// queued.
pub const MUTANT_FAULTS: [&str; 4] = [
    "mutants_on_a_host_that_cannot_boot_guests_fail_at_the_control",
    "a_mutant_that_does_not_build_fails_the_run_unjudged",
    "a_sample_line_whose_test_does_not_kill_its_mutant_fails_the_run",
    "a_mutant_of_a_variants_first_patch_is_held_only_by_what_it_changes",
];

/// The fault tests `names`, and only those.
pub fn named(id: &'static str, name: &'static str, names: &[&str]) -> Step {
    let mut step = booting_tests(id, name, "faults");
    step.args.push("--exact".into());
    step.args.extend(names.iter().map(|n| n.to_string()));
    step
}

/// The fault tests none of the queued steps runs: alone, after the queue.
pub fn the_rest() -> Step {
    let mut faults = booting_tests("faults", "fault tests (builds and the cache)", "faults");
    faults.args.push("--exact".into());
    for name in GUEST_FAULTS
        .iter()
        .chain(&OWN_CACHE_FAULTS)
        .chain(&MUTANT_FAULTS)
    {
        faults.args.extend(["--skip".into(), name.to_string()]);
    }
    faults
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ci::steps::steps;
    use crate::ci::Options;
    use crate::project;

    /// The ignored tests of a suite in xtask/tests/.
    fn booting_test_names(suite: &str) -> Vec<String> {
        let path = project::root().join(format!("xtask/tests/{suite}.rs"));
        let text = std::fs::read_to_string(path).unwrap();
        let mut names = Vec::new();
        let mut after_test = false;
        for line in text.lines() {
            if line == "#[test]" {
                after_test = true;
            } else if let Some(rest) = line.strip_prefix("fn ").filter(|_| after_test) {
                names.push(rest.split('(').next().unwrap().to_string());
                after_test = false;
            }
        }
        names
    }

    /// The guest fault tests are fault tests, and the two steps run each
    /// fault test exactly once between them.
    #[test]
    fn the_fault_tests_are_split_between_the_lanes_and_the_end_exactly() {
        let all = booting_test_names("faults");
        let queued = || {
            GUEST_FAULTS
                .iter()
                .chain(&OWN_CACHE_FAULTS)
                .chain(&MUTANT_FAULTS)
        };
        assert!(all.len() > queued().count(), "{all:?}");
        for name in queued() {
            assert!(all.iter().any(|n| n == name), "no fault test {name}");
        }
        let s = steps(&Options::default(), "/x/xtask");
        let step = |id| s.iter().find(|s| s.id == id).unwrap().args.clone();
        let named = [
            step("guest-faults"),
            step("building-faults"),
            step("mutant-faults"),
        ];
        let rest = step("faults");
        for a in named.iter().chain([&rest]) {
            assert!(a.contains(&"--exact".into()), "{a:?}");
        }
        // Each test runs in exactly one of the four steps.
        for name in &all {
            let skipped = rest.windows(2).any(|w| w[0] == "--skip" && &w[1] == name);
            let mut runs: Vec<bool> = named.iter().map(|a| a.contains(name)).collect();
            runs.push(!skipped);
            assert_eq!(
                runs.iter().filter(|r| **r).count(),
                1,
                "{name}: in guest-faults, building-faults, mutant-faults, faults: {runs:?}"
            );
        }
    }
}
