//! The one list of kernel messages that mean the kernel misbehaved, used by
//! the guest (per-test /dev/kmsg scan) and by the host (console watch).

/// Substrings of a kernel message that mark a report. Case-sensitive, as
/// the kernel prints them.
pub const CONTAINS: &[&str] = &[
    "Kernel panic",
    "Oops:",
    "BUG:",
    "kernel BUG at",
    "KASAN:",
    "UBSAN:",
    // Lockdep reports, by their headlines: a bare "lockdep" would also
    // match the boot banner "RCU lockdep checking is enabled." of debug
    // kernels.
    "possible circular locking dependency",
    "possible recursive locking",
    "inconsistent lock state",
    "suspicious RCU usage",
    "DEBUG_LOCKS_WARN_ON",
    "INFO: trying to register non-static key",
    // RCU stalls ("rcu_preempt detected stalls", "self-detected stall").
    "detected stall",
    "INFO: rcu",
    "Bad page",
    "general protection fault",
    "blocked for more than",
    "soft lockup",
    "hard LOCKUP",
    "page_table_check",
];

/// Prefixes that count only at the start of a message. WARN() and lockdep
/// print "WARNING: ..." first; x86 boot advisories such as "Speculative
/// Return Stack Overflow: WARNING: See ..." carry a prefix and are not
/// kernel bugs.
pub const LEADING: &[&str] = &["WARNING:"];

/// The start of the message the kernel prints when it gives up.
pub const PANIC: &str = "Kernel panic - not syncing";

/// Whether one kernel message (the text after the printk timestamp or the
/// kmsg header) is a kernel report.
pub fn is_splat(msg: &str) -> bool {
    let start = msg.trim_start();
    CONTAINS.iter().any(|p| msg.contains(p)) || LEADING.iter().any(|p| start.starts_with(p))
}

pub fn is_panic(msg: &str) -> bool {
    msg.contains(PANIC)
}

/// `vm-images/splat-allowlist.txt`, built into both sides: substrings of
/// kernel lines known to be benign, so neither the guest's kmsg scan nor
/// the host's console watch counts them.
const ALLOWLIST_FILE: &str = include_str!("../../vm-images/splat-allowlist.txt");

/// Parses an allowlist: one substring per line, `#` comments.
pub fn parse_allowlist(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// The project's allowlist.
pub fn allowlist() -> Vec<String> {
    parse_allowlist(ALLOWLIST_FILE)
}

/// Whether `line` contains an entry of `allowlist`.
pub fn is_allowed(line: &str, allowlist: &[String]) -> bool {
    allowlist.iter().any(|a| line.contains(a.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_are_found() {
        for msg in [
            "WARNING: CPU: 1 PID: 99 at kernel/bpf/syscall.c:1100 bpf_map_mmap_close+0x5/0x10",
            "BUG: KASAN: use-after-free in array_map_mmap_fault+0x1/0x2",
            "BUG: Bad page map in process selftests  pte:8000000 pmd:1",
            "Oops: general protection fault, probably for non-canonical address",
            "WARNING: possible circular locking dependency detected",
            "rcu: INFO: rcu_preempt self-detected stall on CPU",
            "watchdog: BUG: soft lockup - CPU#2 stuck for 22s! [selftests:123]",
            "WARNING: suspicious RCU usage",
            "Kernel panic - not syncing: sysrq triggered crash",
            "kernel BUG at mm/page_alloc.c:1200!",
            "INFO: task kworker/0:1:12 blocked for more than 120 seconds.",
        ] {
            assert!(is_splat(msg), "{msg}");
        }
        assert!(is_panic("Kernel panic - not syncing: Fatal exception"));
        assert!(!is_panic("WARNING: CPU: 0 PID: 1 at x"));
    }

    #[test]
    fn allowlist_entries_are_substrings_and_comments_are_ignored() {
        let allow = parse_allowlist("# known benign\n\ninsert_page+0x1c\n");
        assert_eq!(allow, ["insert_page+0x1c"]);
        assert!(is_allowed("WARNING: at insert_page+0x1c/0x60", &allow));
        assert!(!is_allowed("BUG: KASAN: x", &allow));
    }

    #[test]
    fn ordinary_messages_are_not() {
        for msg in [
            "Linux version 6.12.117 (bpflab@bpflab)",
            "Run /init as init process",
            "selftests[77]: segfault at 7f00 ip 401000 sp 7ffe error 6",
            "kasan: KernelAddressSanitizer initialized (generic)",
            "Speculative Return Stack Overflow: WARNING: See https://x for more",
            "rcu: \tRCU lockdep checking is enabled.",
            "lkdtm: Performing direct entry WARNING",
        ] {
            assert!(!is_splat(msg), "{msg}");
        }
    }
}
