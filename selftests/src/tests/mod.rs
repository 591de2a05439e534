//! The test cases of the plan (`docs/TEST-PLAN.md`), one module per area,
//! and the registry the runner executes in plan order (T01..T41).

pub mod accounting;
pub mod anon_inode;
pub mod arena_race;
pub mod client;
pub mod coherence;
pub mod common;
pub mod extras;
pub mod failures;
pub mod growing;
pub mod laziness;
pub mod lifetime;
pub mod neighbours;
pub mod populate;
pub mod processes;
pub mod stress;
pub mod vma_surgery;
pub mod window;

use crate::runner::Test;

/// `test!(module::name)` registers a function under its own name.
macro_rules! test {
    ($m:ident :: $f:ident) => {
        Test::new(stringify!($f), $m::$f)
    };
    ($m:ident :: $f:ident, timeout = $secs:expr) => {
        Test::new(stringify!($f), $m::$f).with_timeout($secs)
    };
}

pub const ALL: &[Test] = &[
    test!(laziness::t01_untouched_mapping_has_no_rss),
    test!(laziness::t02_touch_three_pages),
    test!(laziness::t03_vmflags_mixedmap_dontdump),
    test!(coherence::t04_syscall_and_mapping_coherent),
    test!(coherence::t05_prog_and_mapping_coherent),
    test!(coherence::t05_direct_value_every_page),
    test!(coherence::t06_mmap_offsets),
    test!(coherence::t07_size_rounding),
    test!(coherence::t08_refused_mappings),
    test!(populate::t09_populate_fills_everything),
    test!(populate::t09_populate_nonblock),
    test!(populate::t10_readonly_mapping),
    test!(accounting::t11_freeze_busy_while_writable_mapped),
    test!(accounting::t11_split_middle_page),
    test!(accounting::t11_fork_holds_write_active),
    test!(accounting::t11_closed_fd_still_busy),
    test!(accounting::t11_failed_mmap_balanced),
    test!(accounting::t11_map_fixed_anon_releases),
    test!(vma_surgery::t12_split_vma_pgoff),
    test!(vma_surgery::t13_mremap),
    test!(vma_surgery::t14_dontneed_then_touch),
    test!(vma_surgery::t14_dontneed_then_proc_mem),
    test!(vma_surgery::t14_dontneed_then_populate_read),
    test!(processes::t15_fork_child_sees_and_writes),
    test!(processes::t16_remote_access_untouched),
    // ~1 s (file, /dev/urandom and pipe I/O, vmsplice, O_DIRECT on the ramdisk).
    test!(processes::t17_gup_kernel_access, timeout = 15),
    test!(stress::t18_same_page_concurrent_faults),
    test!(stress::t18_fault_races),
    // Bounded work, but much of it: 6-9 s under TCG, 44 s on the debug
    // kernel (where the runner triples every timeout).
    test!(stress::t19_no_leak_after_many_maps, timeout = 60),
    test!(stress::t19_every_page_freed, timeout = 60),
    // 2.5-4 s under TCG, also on the debug kernel.
    test!(stress::t20_huge_map_lazy, timeout = 30),
    test!(neighbours::t21_ringbuf_stays_eager),
    test!(neighbours::t22_arena_unchanged),
    test!(lifetime::t23_mapping_outlives_fd),
    test!(lifetime::t24_coredump_skips_map),
    test!(client::t25_libbpf_global_data),
    test!(extras::t26_thp_madvise_no_effect),
    test!(extras::t27_numa_node_placement),
    test!(extras::t28_dmesg_clean),
    test!(window::t29_window_stays_inside_vma),
    test!(window::t30_window_fill_keeps_readonly),
    test!(window::t31_faults_per_window),
    // 2 s of racing under TCG, more on the debug kernel.
    test!(window::t32_window_fill_races, timeout = 20),
    test!(anon_inode::t33_fault_timestamps),
    test!(anon_inode::t33_arena_fault_timestamps),
    test!(window::t34_window_stops_short_of_mapped_pages),
    test!(failures::t35_window_fill_page_table_failures),
    test!(failures::t35_arena_page_table_failure),
    test!(growing::t36_growing_window_sequences),
    test!(growing::t37_growing_window_state_is_the_file_record),
    // Four threads sweeping 8 MiB: about a second under TCG.
    test!(growing::t38_growing_window_concurrent_sweeps, timeout = 30),
    test!(anon_inode::t39_soft_dirty_write_faults),
    test!(growing::t40_growing_window_fills_holes_in_place),
    // Milliseconds when the race is made; a try that misses holds the
    // fault for up to 2 s, and there are three.
    test!(arena_race::t41_arena_free_races_a_fault, timeout = 20),
];

#[cfg(test)]
mod plan {
    /// The plan lives in the repository, next to the code it describes.
    const PLAN: &str = include_str!("../../../docs/TEST-PLAN.md");

    fn rows() -> Vec<Vec<&'static str>> {
        PLAN.lines()
            .filter(|l| l.starts_with("| T"))
            .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
            .collect()
    }

    /// Every case id the plan has, T01 to the last with none missing.
    fn plan_ids(rows: &[Vec<&str>]) -> Vec<u32> {
        let mut ids: Vec<u32> = rows
            .iter()
            .map(|r| r[0][1..].parse().expect("a case id is T and a number"))
            .collect();
        ids.sort();
        ids.dedup();
        let last = *ids.last().expect("the plan has cases");
        assert_eq!(
            ids,
            (1..=last).collect::<Vec<_>>(),
            "the plan skips a case id"
        );
        ids
    }

    /// Every case of the plan is run: a registered test carries its id.
    #[test]
    fn every_case_of_the_plan_has_a_registered_test() {
        for id in plan_ids(&rows()) {
            let prefix = format!("t{id:02}_");
            assert!(
                super::ALL.iter().any(|t| t.name.starts_with(&prefix)),
                "T{id:02} is in docs/TEST-PLAN.md and no test {prefix}* is registered"
            );
        }
    }

    #[test]
    fn every_case_has_both_expectations_and_its_functions() {
        let rows = rows();
        for id in plan_ids(&rows) {
            let tid = format!("T{id:02}");
            let row = rows
                .iter()
                .find(|r| r[0] == tid)
                .unwrap_or_else(|| panic!("docs/TEST-PLAN.md has no row for {tid}"));
            // The growing window's table adds A's column before the last.
            assert!(
                row.len() == 6 || row.len() == 7,
                "{tid}: want id | checked | U | P | W | (A |) functions"
            );
            assert!(
                row[2..row.len() - 1].iter().all(|cell| !cell.is_empty()),
                "{tid}: every kernel's expectation must be written"
            );
            let prefix = format!("t{id:02}_");
            assert!(
                row[row.len() - 1].contains(&prefix),
                "{tid}: no function named {prefix}*"
            );
        }
    }

    #[test]
    fn every_registered_test_is_in_the_plan() {
        for t in super::ALL {
            assert!(
                PLAN.contains(&format!("`{}`", t.name)),
                "{} is not named in docs/TEST-PLAN.md",
                t.name
            );
        }
    }
}
