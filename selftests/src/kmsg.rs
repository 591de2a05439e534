//! Reading /dev/kmsg and spotting kernel splats (T28). The runner checks
//! the records each test produced; `t28_dmesg_clean` checks the whole
//! buffer.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;

/// Whether one message is a kernel report: the list the host's console
/// watch uses too.
pub use guest_common::splat::is_splat;

/// The message text of one /dev/kmsg record ("pri,seq,ts,flags;text\n"
/// followed by optional " KEY=value" continuation lines).
pub fn record_text(record: &str) -> &str {
    let text = record.split_once(';').map_or(record, |(_, t)| t);
    text.split('\n').next().unwrap_or("")
}

/// The messages that look like kernel reports, less the ones the project's
/// allowlist (shared with the host's console watch) calls benign.
pub fn find_splats<'a>(messages: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    let allowlist = guest_common::splat::allowlist();
    messages
        .into_iter()
        .filter(|m| is_splat(m) && !guest_common::splat::is_allowed(m, &allowlist))
        .cloned()
        .collect()
}

/// A non-blocking reader of /dev/kmsg.
pub struct Kmsg {
    file: File,
}

impl Kmsg {
    fn open() -> io::Result<File> {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open("/dev/kmsg")
    }

    /// Positioned after the last record: only new messages are returned.
    pub fn open_at_end() -> io::Result<Kmsg> {
        let mut file = Self::open()?;
        file.seek(SeekFrom::End(0))?;
        Ok(Kmsg { file })
    }

    /// Positioned at the oldest record still in the buffer.
    pub fn open_from_start() -> io::Result<Kmsg> {
        Ok(Kmsg {
            file: Self::open()?,
        })
    }

    /// Message texts of all records not read yet.
    pub fn read_new(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            // One read() returns exactly one record.
            match self.file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.push(record_text(&String::from_utf8_lossy(&buf[..n])).to_string()),
                // EPIPE: records were overwritten before we read them; the
                // next read continues with the oldest remaining one.
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break, // EAGAIN: no more records
            }
        }
        out
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn record_parsing() {
        assert_eq!(
            record_text("6,1234,5678901,-;bpf: hello\n SUBSYSTEM=x\n"),
            "bpf: hello"
        );
        assert_eq!(
            record_text("4,1,2,c;WARNING: CPU: 0 PID: 1 at mm/memory.c:1 f+0x1/0x2\n"),
            "WARNING: CPU: 0 PID: 1 at mm/memory.c:1 f+0x1/0x2"
        );
        assert_eq!(record_text("no header"), "no header");
    }

    #[test]
    fn splat_detection() {
        let msgs: Vec<String> = [
            "Linux version 6.12.0",
            "BUG: Bad page map in process selftests  pte:8000000 pmd:1",
            "selftests[77]: segfault at 7f00 ip 401000 sp 7ffe error 6",
            "==================================================================",
            "BUG: KASAN: use-after-free in array_map_mmap_fault+0x1/0x2",
            "WARNING: possible circular locking dependency detected",
            "rcu: INFO: rcu_sched self-detected stall on CPU",
            "kasan: KernelAddressSanitizer initialized (generic)",
            "Speculative Return Stack Overflow: WARNING: See https://kernel.org/doc/html/latest/admin-guide/hw-vuln/srso.html for mitigation options.",
            "WARNING: CPU: 1 PID: 99 at kernel/bpf/syscall.c:1100 bpf_map_mmap_close+0x5/0x10",
            "watchdog: BUG: soft lockup - CPU#2 stuck for 22s! [selftests:123]",
            "rcu: \tRCU lockdep checking is enabled.",
            "WARNING: suspicious RCU usage",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let s = find_splats(&msgs);
        assert_eq!(s.len(), 7, "{s:?}");
        assert!(s[4].starts_with("WARNING: CPU: 1"));
        assert!(s[0].starts_with("BUG: Bad page map"));
        assert!(find_splats(&msgs[2..4]).is_empty());
    }
}
