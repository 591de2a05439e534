//! The order of ci's queued steps: which run side by side (`sections`),
//! which the two workers take first (`longest_first`) and which wait for
//! another to end (`waits_for`).

use super::times::CiTimes;
use super::{Runs, Step};

/// The steps in sections: one step alone, or a run of consecutive steps
/// with a lane, which run side by side.
pub fn sections(steps: &[Step]) -> Vec<&[Step]> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < steps.len() {
        let end = if steps[start].runs == Runs::Alone {
            start + 1
        } else {
            start
                + steps[start..]
                    .iter()
                    .take_while(|s| s.runs == Runs::Queued)
                    .count()
        };
        out.push(&steps[start..end]);
        start = end;
    }
    out
}

/// The order the queue takes `section` in: longest first by the cold run
/// on record, so that the two workers end close together (a long step
/// taken last would run alone at the end); steps the record lacks
/// first, as their time is unknown. Ties keep the steps' order.
pub fn longest_first<'a>(section: &'a [Step], record: Option<&CiTimes>) -> Vec<&'a Step> {
    let seconds = |step: &Step| {
        record
            .and_then(|r| r.steps.iter().find(|t| t.id == step.id))
            .map_or(f64::INFINITY, |t| t.seconds)
    };
    let mut order: Vec<&Step> = section.iter().collect();
    order.sort_by(|a, b| seconds(b).total_cmp(&seconds(a)));
    if let Some(at) = order.iter().position(|s| s.id == TEST_PROGS_BUILD) {
        let step = order.remove(at);
        order.insert(0, step);
    }
    order
}

/// test_progs' build, queued: it holds every kernel's tree while it
/// builds (the test modules are built against each kernel), 140-155 s
/// cold, so the queue takes it first and the queued steps that use a
/// kernel's tree start when it has ended (`waits_for`): in cold runs
/// they had waited on its locks with their workers idle (kselftest
/// 188 s at c328b8f, mutants about 136 s at cb6b316).
pub const TEST_PROGS_BUILD: &str = "kselftest-build";

/// The queued steps that use no kernel's tree, which run beside
/// test_progs' build: the patch checks (the check trees) and the fault
/// tests with caches of their own.
pub const FREE_OF_KERNEL_TREES: [&str; 2] = ["patches", "building-faults"];

/// The steps a queued step starts after, the first of them in the queue:
/// the mutants' fault tests after the mutants step, whose tree they
/// build in (beside it they took turns with it, each waiting with its
/// worker idle: the fault tests' step took 463 s at cb6b316, 270 s
/// before), and every step that uses a kernel's tree after test_progs'
/// build.
pub fn waits_for(step: &Step) -> &'static [&'static str] {
    match step.id {
        TEST_PROGS_BUILD => &[],
        id if FREE_OF_KERNEL_TREES.contains(&id) => &[],
        "mutant-faults" => &["mutants", TEST_PROGS_BUILD],
        // The mutants' tree again, after the lean mutants and their
        // fault tests, rather than a worker waiting on its lock.
        "mutants-debug" => &["mutant-faults", "mutants", TEST_PROGS_BUILD],
        _ => &[TEST_PROGS_BUILD],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ci::steps::steps;
    use crate::ci::times::{self, StepTime};
    use crate::ci::Options;
    use crate::project;

    fn ids(steps: &[Step]) -> Vec<&'static str> {
        steps.iter().map(|s| s.id).collect()
    }

    #[test]
    fn the_lean_suites_are_queued_and_the_fault_tests_run_alone_last() {
        let s = steps(&Options::default(), "/x/xtask");
        let secs = sections(&s);
        let queued: Vec<&[Step]> = secs.iter().copied().filter(|x| x.len() > 1).collect();
        assert_eq!(queued.len(), 1, "one queued section: {secs:?}");
        assert_eq!(
            ids(queued[0]),
            [
                "kselftest-build",
                "patches",
                "posting",
                "mutants",
                "building-faults",
                "mutant-faults",
                "fuzz",
                "devflags",
                "vmtest-eager",
                "vmtest-mainline",
                "vmtest-direct",
                "vmtest-prefault",
                "vmtest-adaptive",
                "guest-faults",
                "share",
                "branch",
                "kselftest",
                "kselftest-verifier",
                "bench",
                "vmtest-adaptive-debug",
                "mutants-debug"
            ]
        );
        assert!(queued[0].iter().all(|s| s.runs == Runs::Queued));
        for alone in ["build", "build-debug", "faults"] {
            let step = s.iter().find(|s| s.id == alone).unwrap();
            assert_eq!(step.runs, Runs::Alone, "{alone}");
        }
        assert_eq!(s.last().unwrap().id, "faults");
        // What --debug adds stays alone.
        let debug = Options {
            debug: true,
            ..Default::default()
        };
        let with = steps(&debug, "/x/xtask");
        let added: Vec<&Step> = with
            .iter()
            .filter(|w| !s.iter().any(|x| x.id == w.id))
            .collect();
        assert_eq!(added.len(), 4, "{:?}", ids(&with));
        assert!(added.iter().all(|s| s.runs == Runs::Alone));
    }

    #[test]
    fn the_queue_takes_the_longest_step_on_record_first_and_unknown_ones_before_all() {
        let s = steps(&Options::default(), "/x/xtask");
        let section = sections(&s).into_iter().find(|x| x.len() > 1).unwrap();
        let time = |id: &str, seconds| StepTime {
            id: id.into(),
            name: id.into(),
            seconds,
            ok: true,
            idle_percent: None,
        };
        let record = CiTimes {
            commit: None,
            cold: true,
            base_build_seconds: Some(500.0),
            // Everything but devflags, mutants the longest.
            steps: section
                .iter()
                .filter(|s| s.id != "devflags")
                .map(|s| time(s.id, if s.id == "mutants" { 600.0 } else { 20.0 }))
                // A step of another section changes nothing.
                .chain([time("build", 1000.0)])
                .collect(),
            total_seconds: 3000.0,
        };
        // test_progs' build first, whatever the record says, then the
        // step the record lacks, then the longest.
        let order = ids_of(&longest_first(section, Some(&record)));
        assert_eq!(
            &order[..3],
            ["kselftest-build", "devflags", "mutants"],
            "{order:?}"
        );
        assert_eq!(order.len(), section.len());
        // Without a record, the steps' own order.
        assert_eq!(ids_of(&longest_first(section, None)), ids(section));
        // The record on file orders the steps it times by their time,
        // but for those taken before another.
        let on_file = times::read(&project::root().join(times::COLD_RECORD)).unwrap();
        let order = longest_first(section, Some(&on_file));
        let secs: Vec<f64> = order
            .iter()
            .filter(|s| s.id != TEST_PROGS_BUILD)
            .filter_map(|s| on_file.steps.iter().find(|t| t.id == s.id))
            .map(|t| t.seconds)
            .collect();
        assert!(secs.windows(2).all(|w| w[0] >= w[1]), "{secs:?}");
    }

    #[test]
    fn steps_on_kernel_trees_start_after_test_progs_build_and_mutant_faults_after_mutants() {
        let s = steps(&Options::default(), "/x/xtask");
        let of = |id: &str| {
            let step = s
                .iter()
                .find(|s| s.id == id)
                .unwrap_or_else(|| panic!("{id}"));
            waits_for(step).to_vec()
        };
        for free in FREE_OF_KERNEL_TREES.iter().chain([&TEST_PROGS_BUILD]) {
            assert!(of(free).is_empty(), "{free}");
        }
        for id in [
            "mutants",
            "fuzz",
            "vmtest-eager",
            "kselftest",
            "kselftest-verifier",
        ] {
            assert_eq!(of(id), [TEST_PROGS_BUILD], "{id}");
        }
        assert_eq!(of("mutant-faults"), ["mutants", TEST_PROGS_BUILD]);
        assert_eq!(
            of("mutants-debug"),
            ["mutant-faults", "mutants", TEST_PROGS_BUILD]
        );
    }

    fn ids_of(steps: &[&Step]) -> Vec<&'static str> {
        steps.iter().map(|s| s.id).collect()
    }
}
