//! Reading the guest's console: kernel splats and panics (by the list the
//! guest's own per-test kmsg scan uses, `guest_common::splat`), and the
//! allowlist of lines known to be benign.

use std::sync::OnceLock;

use guest_common::splat;
use regex::Regex;

/// The text of a kernel message in a console line, if the line has one: a
/// printk timestamp "[    1.234567] " anywhere (user output may precede it
/// on the same line when the two interleave).
pub fn kernel_message(line: &str) -> Option<&str> {
    static TS: OnceLock<Regex> = OnceLock::new();
    let ts = TS.get_or_init(|| Regex::new(r"\[\s*\d+\.\d{6}\] ").expect("valid regex"));
    ts.find(line).map(|m| &line[m.end()..])
}

/// Whether a console line reports a kernel problem, given the allowlist
/// (substrings of known-benign lines).
pub fn is_splat(line: &str, allowlist: &[String]) -> bool {
    let Some(msg) = kernel_message(line) else {
        return false;
    };
    splat::is_splat(msg) && !splat::is_allowed(line, allowlist)
}

pub fn is_panic(line: &str) -> bool {
    kernel_message(line).is_some_and(splat::is_panic)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WARN: &str =
        "[   12.345678] WARNING: CPU: 1 PID: 88 at mm/memory.c:1234 insert_page+0x1c/0x60";
    const KASAN: &str =
        "[    3.000001] BUG: KASAN: slab-use-after-free in array_map_mmap_fault+0x3a/0x90";
    const LOCKDEP: &str = "[    7.100000] WARNING: possible circular locking dependency detected";
    const STALL: &str = "[   60.000000] rcu: INFO: rcu_preempt self-detected stall on CPU";
    const BADPAGE: &str = "[    9.999999] BUG: Bad page state in process selftests  pfn:0x1234";
    const PANIC: &str = "[    1.500000] Kernel panic - not syncing: sysrq triggered crash";

    #[test]
    fn finds_real_looking_splats() {
        for line in [WARN, KASAN, LOCKDEP, STALL, BADPAGE, PANIC] {
            assert!(is_splat(line, &[]), "{line}");
        }
        assert!(is_panic(PANIC));
        assert!(!is_panic(WARN));
        // Interleaved with user output on one line.
        assert!(is_splat(&format!("[selftests] t18_conc{WARN}"), &[]));
    }

    #[test]
    fn ignores_user_output_and_benign_kernel_lines() {
        // A test's own output may mention these words: not a kernel line.
        assert!(!is_splat(
            "[selftests] t14 fail: expected SIGBUS, WARNING: none",
            &[]
        ));
        assert!(!is_splat("BPFLAB-RESULT t01 fail 3 BUG: x", &[]));
        assert!(!is_splat(
            "[    0.000000] Linux version 6.12.117 (bpflab@bpflab)",
            &[]
        ));
        assert!(!is_splat("[    0.210000] Run /init as init process", &[]));
        assert!(!is_splat(
            "[    0.050000] Speculative Return Stack Overflow: WARNING: See https://x for more",
            &[]
        ));
        assert!(!is_splat(
            "[    0.814099] rcu: \tRCU lockdep checking is enabled.",
            &[]
        ));
    }

    /// Host and guest judge kernel messages by one list: every pattern the
    /// guest's kmsg scan knows is also caught on the console.
    #[test]
    fn the_console_watch_knows_every_pattern_of_the_guest() {
        for p in splat::CONTAINS {
            let line = format!("[   42.000001] something {p} happened");
            assert!(is_splat(&line, &[]), "{line}");
        }
        for p in splat::LEADING {
            let line = format!("[   42.000001] {p} CPU: 0 PID: 1 at x");
            assert!(is_splat(&line, &[]), "{line}");
        }
    }

    #[test]
    fn allowlist_suppresses_matching_lines() {
        let allow = splat::parse_allowlist("# known benign\n\ninsert_page+0x1c\n");
        assert!(!is_splat(WARN, &allow));
        assert!(is_splat(KASAN, &allow));
    }
}
