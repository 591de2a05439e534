//! The five test programs of the BPF tree that BPF CI runs on x86_64:
//! test_progs in its three flavors (the BPF programs built as usual,
//! without ALU32, and for the v4 ISA), test_maps and test_verifier. Each
//! is built from the same tree, run in the same guest, and its results
//! named `<runner>:<test>` in one report.

use crate::vm::qemu::TcgThreads;

/// One of the five.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Runner {
    #[value(name = "test_progs")]
    TestProgs,
    #[value(name = "test_progs-no_alu32")]
    NoAlu32,
    #[value(name = "test_progs-cpuv4")]
    CpuV4,
    #[value(name = "test_maps")]
    Maps,
    #[value(name = "test_verifier")]
    Verifier,
}

impl Runner {
    pub const ALL: [Runner; 5] = [
        Runner::TestProgs,
        Runner::NoAlu32,
        Runner::CpuV4,
        Runner::Maps,
        Runner::Verifier,
    ];

    /// The program's name: its make target, its binary, the prefix of its
    /// results.
    pub fn name(self) -> &'static str {
        match self {
            Runner::TestProgs => "test_progs",
            Runner::NoAlu32 => "test_progs-no_alu32",
            Runner::CpuV4 => "test_progs-cpuv4",
            Runner::Maps => "test_maps",
            Runner::Verifier => "test_verifier",
        }
    }

    /// A flavor of test_progs: named tests and subtests, `-a`/`-d` lists,
    /// `-l` to list them.
    pub fn is_test_progs(self) -> bool {
        matches!(self, Runner::TestProgs | Runner::NoAlu32 | Runner::CpuV4)
    }

    /// How TCG runs the guest's vCPUs for this runner. The test_progs
    /// flavors and test_verifier attach programs, kprobes and trampolines,
    /// patching kernel text, which a thread per vCPU can see stale (an
    /// int3 Oops; see `TcgThreads`). test_maps patches nothing and forks
    /// a hundred tasks at a time: 655 s with a thread per vCPU, 1418 s on
    /// one (base-bpfci, measured), so it keeps the threads.
    pub fn tcg_threads(self) -> TcgThreads {
        match self {
            Runner::Maps => TcgThreads::Multi,
            _ => TcgThreads::Single,
        }
    }

    /// The subdirectory a test_progs flavor changes into for its BPF
    /// objects (and the test modules it loads from there).
    pub fn flavor_dir(self) -> Option<&'static str> {
        match self {
            Runner::NoAlu32 => Some("no_alu32"),
            Runner::CpuV4 => Some("cpuv4"),
            _ => None,
        }
    }

    /// `<runner>:<test>`: what one result of this runner is called.
    pub fn result_name(self, test: &str) -> String {
        format!("{}:{test}", self.name())
    }
}

/// The runner and the test of a result name (`test_maps:x` → test_maps,
/// `x`), if it has a runner's prefix.
pub fn split_result_name(name: &str) -> Option<(Runner, &str)> {
    let (runner, test) = name.split_once(':')?;
    let runner = Runner::ALL.into_iter().find(|r| r.name() == runner)?;
    Some((runner, test))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_test_maps_keeps_a_thread_per_vcpu() {
        for r in [
            Runner::TestProgs,
            Runner::NoAlu32,
            Runner::CpuV4,
            Runner::Verifier,
        ] {
            assert_eq!(r.tcg_threads(), TcgThreads::Single, "{r:?}");
        }
        assert_eq!(Runner::Maps.tcg_threads(), TcgThreads::Multi);
    }
    use clap::ValueEnum;

    #[test]
    fn names_round_trip_through_results_and_the_command_line() {
        for r in Runner::ALL {
            let name = r.result_name("mmap/sub");
            assert_eq!(split_result_name(&name), Some((r, "mmap/sub")));
            assert_eq!(Runner::from_str(r.name(), false), Ok(r));
        }
        assert_eq!(split_result_name("mmap/sub"), None);
        assert_eq!(split_result_name("nope:mmap"), None);
        assert_eq!(Runner::ALL.iter().filter(|r| r.is_test_progs()).count(), 3);
    }
}
