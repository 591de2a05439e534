//! The host's file systems in the guest: its root read-only at
//! `/host`, and for a host command a whole root made of it: the guest's
//! own proc, sysfs, devices and bpffs, tmpfs where programs write
//! (/tmp, /run, /var/tmp, /dev/shm), and the project read-write at its
//! host path.

use guest_common::request::{Share, ShareKind, HOST_ROOT, PROJECT_TAG, ROOT_TAG};

use crate::say;
use crate::sys::{describe, mount_fs};

/// The mount options of one share, by transport. 9p: the root is
/// read-only and unchanging during a run, so its pages may be cached;
/// the project is written, and mmap of its files must work.
pub fn options(kind: ShareKind, writable: bool) -> (&'static str, &'static str) {
    match (kind, writable) {
        (ShareKind::Virtiofs, _) => ("virtiofs", ""),
        (ShareKind::NineP, false) => (
            "9p",
            "trans=virtio,version=9p2000.L,msize=512000,cache=loose",
        ),
        (ShareKind::NineP, true) => (
            "9p",
            "trans=virtio,version=9p2000.L,msize=512000,cache=mmap",
        ),
    }
}

/// Mounts the host's root read-only at [`HOST_ROOT`].
pub fn mount_host_root(share: &Share) -> Result<(), String> {
    std::fs::create_dir_all(HOST_ROOT).map_err(|e| describe(&format!("mkdir {HOST_ROOT}"), &e))?;
    let (fstype, data) = options(share.kind, false);
    mount_fs(ROOT_TAG, HOST_ROOT, fstype, libc::MS_RDONLY, data).map_err(|(_, d)| {
        format!(
            "{d} ({} share {ROOT_TAG}; is the kernel built with kconfig/share.config?)",
            share.kind.name()
        )
    })
}

/// One file system of the command's root, under [`HOST_ROOT`].
struct Inner {
    fstype: &'static str,
    at: &'static str,
    data: &'static str,
    /// Missing mount points (a host without /run) and file systems the
    /// kernel lacks are skipped with a note.
    optional: bool,
}

const fn inner(
    fstype: &'static str,
    at: &'static str,
    data: &'static str,
    optional: bool,
) -> Inner {
    Inner {
        fstype,
        at,
        data,
        optional,
    }
}

/// In order: later mount points live inside earlier file systems.
const INNER: &[Inner] = &[
    inner("proc", "/proc", "", false),
    inner("sysfs", "/sys", "", false),
    inner("devtmpfs", "/dev", "", false),
    inner("devpts", "/dev/pts", "mode=0620,ptmxmode=0666", false),
    inner("tmpfs", "/dev/shm", "mode=1777", false),
    inner("tmpfs", "/tmp", "mode=1777", false),
    inner("tmpfs", "/run", "mode=0755", true),
    inner("tmpfs", "/var/tmp", "mode=1777", true),
    inner("bpf", "/sys/fs/bpf", "", false),
    inner("debugfs", "/sys/kernel/debug", "", true),
    // Where libbpf and test_progs look for tracepoints and kprobe events.
    inner("tracefs", "/sys/kernel/tracing", "", true),
    // cgroup v2, where test_progs's cgroup helpers make their cgroups
    // (a kernel without CONFIG_CGROUPS has neither it nor its mount point).
    inner("cgroup2", "/sys/fs/cgroup", "", true),
];

/// Makes [`HOST_ROOT`] a root a host command can run in: the guest's
/// own kernel file systems and scratch space inside the host's tree,
/// then the project read-write at its own path.
pub fn build_command_root(share: &Share) -> Result<(), String> {
    for m in INNER {
        let target = format!("{HOST_ROOT}{}", m.at);
        // Mount points inside a fresh devtmpfs must be made; those in the
        // read-only host root exist or cannot be made.
        let _ = std::fs::create_dir_all(&target);
        if let Err((_, detail)) = mount_fs(m.fstype, &target, m.fstype, 0, m.data) {
            if !m.optional {
                return Err(detail);
            }
            say(&format!("{} not mounted ({detail})", m.at));
        }
    }
    mount_project(share)
}

/// The project read-write at its host path. Where that path lies inside a
/// tmpfs of the guest (a project under /tmp), its mount point is made.
fn mount_project(share: &Share) -> Result<(), String> {
    let target = format!("{HOST_ROOT}{}", share.project);
    if let Err(e) = std::fs::create_dir_all(&target) {
        return Err(describe(&format!("mkdir {target}"), &e));
    }
    let (fstype, data) = options(share.kind, true);
    mount_fs(PROJECT_TAG, &target, fstype, 0, data).map_err(|(_, d)| d)
}

/// The command's root gets the guest's resolv.conf (`lease`: the DNS
/// servers of its DHCP lease) in place of the host's: bind-mounted over
/// the host's file, or written where the host's is a symlink into a
/// tmpfs of the guest (systemd-resolved's /run/systemd/resolve/...).
pub fn cover_resolv_conf(lease: &str) -> Result<(), String> {
    let inside = resolve_links("/etc/resolv.conf", |p| {
        std::fs::read_link(format!("{HOST_ROOT}{p}"))
            .ok()
            .map(|t| t.to_string_lossy().into_owned())
    });
    let target = format!("{HOST_ROOT}{inside}");
    if std::path::Path::new(&target).exists() {
        return mount_fs(lease, &target, "", libc::MS_BIND, "").map_err(|(_, d)| d);
    }
    let parent = std::path::Path::new(&target).parent();
    let written = parent
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::copy(lease, &target).map(drop));
    if let Err(e) = written {
        // A host without /etc/resolv.conf, in its read-only root.
        say(&describe(
            &format!("no DNS for the command: write {target}"),
            &e,
        ));
    }
    Ok(())
}

/// Where `path` leads inside a root whose symlinks `read_link` reads
/// (absolute targets are the root's), every component resolved, at most
/// 16 links followed.
fn resolve_links(path: &str, read_link: impl Fn(&str) -> Option<String>) -> String {
    let parts = |p: &str| -> Vec<String> {
        p.split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .map(str::to_string)
            .collect()
    };
    let mut todo: std::collections::VecDeque<String> = parts(path).into();
    let mut done: Vec<String> = Vec::new();
    let mut links = 16;
    while let Some(c) = todo.pop_front() {
        if c == ".." {
            done.pop();
            continue;
        }
        let here = format!(
            "/{}",
            done.iter()
                .chain([&c])
                .cloned()
                .collect::<Vec<_>>()
                .join("/")
        );
        match read_link(&here).filter(|_| links > 0) {
            Some(target) => {
                links -= 1;
                if target.starts_with('/') {
                    done.clear();
                }
                for p in parts(&target).into_iter().rev() {
                    todo.push_front(p);
                }
            }
            None => done.push(c),
        }
    }
    format!("/{}", done.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nine_p_caches_only_the_read_only_root() {
        assert!(options(ShareKind::NineP, false).1.contains("cache=loose"));
        assert!(options(ShareKind::NineP, true).1.contains("cache=mmap"));
        assert_eq!(options(ShareKind::Virtiofs, true), ("virtiofs", ""));
    }

    #[test]
    fn resolv_conf_links_are_followed_inside_the_root() {
        let links = |p: &str| match p {
            "/etc/resolv.conf" => Some("../var/run/systemd/resolve/stub-resolv.conf".to_string()),
            // An intermediate link, absolute: the root's /run.
            "/var/run" => Some("/run".to_string()),
            "/run/systemd/resolve/stub-resolv.conf" => Some("real".to_string()),
            "/loop" => Some("/loop".to_string()),
            _ => None,
        };
        assert_eq!(
            resolve_links("/etc/resolv.conf", links),
            "/run/systemd/resolve/real"
        );
        assert_eq!(resolve_links("/etc/hosts", links), "/etc/hosts");
        assert_eq!(resolve_links("/loop", links), "/loop", "a loop ends");
        assert_eq!(resolve_links("/../../etc/./x//y", |_| None), "/etc/x/y");
    }

    #[test]
    fn inner_mounts_come_after_what_holds_them() {
        let pos = |at: &str| INNER.iter().position(|m| m.at == at).unwrap();
        assert!(pos("/dev") < pos("/dev/pts"));
        assert!(pos("/dev") < pos("/dev/shm"));
        assert!(pos("/sys") < pos("/sys/fs/bpf"));
        assert!(pos("/sys") < pos("/sys/kernel/debug"));
        assert!(pos("/sys") < pos("/sys/fs/cgroup"));
        // What every program expects is never skipped.
        for at in ["/proc", "/sys", "/dev", "/tmp"] {
            assert!(!INNER[pos(at)].optional, "{at}");
        }
    }
}
