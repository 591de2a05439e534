//! What a boot's console says the kernel lacks, pure: the kconfig option
//! without which the boot failed, and the optional features a kernel
//! went without. Only the console before /init starts the program is
//! read: what the kernel lacks stops the boot before then, and what goes
//! wrong after it is the tests' own, never a missing option.

use std::path::Path;

use guest_common::protocol::BOOT_MARKER;

use super::process::VmEnd;

/// Where docs/USAGE.md says what a bzImage of your own needs.
pub const USAGE_ANCHOR: &str = "docs/USAGE.md#a-bzimage-of-your-own";

/// An option the kernel lacks, as its boot log shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Missing {
    /// What the kernel has not, in words: "virtiofs".
    pub feature: &'static str,
    /// The kconfig option(s) that give it.
    pub option: &'static str,
    /// What failed for want of it.
    pub failed: &'static str,
    /// The project's fragment that has it.
    pub fragment: &'static str,
}

impl Missing {
    /// One line: the kernel, the option, what failed and the fix.
    pub fn line(&self, kernel: &Path) -> String {
        format!(
            "the kernel {} has no {} ({}): {}; build it in (kconfig/{} has it), or see {USAGE_ANCHOR}",
            kernel.display(),
            self.feature,
            self.option,
            self.failed,
            self.fragment
        )
    }
}

const fn missing(
    feature: &'static str,
    option: &'static str,
    failed: &'static str,
    fragment: &'static str,
) -> Missing {
    Missing {
        feature,
        option,
        failed,
        fragment,
    }
}

/// How a missing option shows on the console: every text of `all`, and
/// none of `unless`.
struct Signature {
    all: &'static [&'static str],
    unless: &'static [&'static str],
    missing: Missing,
}

impl Signature {
    fn seen_in(&self, console: &str) -> bool {
        self.all.iter().all(|t| console.contains(t))
            && !self.unless.iter().any(|t| console.contains(t))
    }
}

const fn sig(all: &'static [&'static str], missing: Missing) -> Signature {
    Signature {
        all,
        unless: &[],
        missing,
    }
}

/// A kernel with initramfs support says one of these before /init runs
/// (init/initramfs.c), whether or not the image unpacks.
const UNPACKED: &[&str] = &[
    "Unpacking initramfs...",
    "Trying to unpack rootfs image as initramfs...",
];

/// /init was there and could not be run: not the initramfs's absence.
const INITRAMFS_UNLESS: &[&str] = &[UNPACKED[0], UNPACKED[1], "Failed to execute /init"];

const NO_INITRAMFS: Missing = missing(
    "initramfs support",
    "CONFIG_BLK_DEV_INITRD",
    "the initramfs was never unpacked, so there was no /init to run",
    "qemu.config",
);

/// The one miss a boot over virtiofs can get around: over 9p.
pub const NO_VIRTIOFS: Missing = missing(
    "virtiofs",
    "CONFIG_VIRTIO_FS, with CONFIG_FUSE_FS",
    "the host's root could not be mounted over virtiofs",
    "share.config",
);

const NO_VIRTIO_PCI: Missing = missing(
    "virtio over PCI",
    "CONFIG_VIRTIO_PCI",
    "the share's virtio device was never found, so the host's root could not be mounted",
    "share.config",
);

const NO_VIRTIO_CONSOLE: Missing = missing(
    "virtio console",
    "CONFIG_VIRTIO_CONSOLE",
    "the command's virtio-serial ports or console never appeared",
    "share.config",
);

/// Nothing reached the console, not even the kernel's first line.
const NO_SERIAL_CONSOLE: Missing = missing(
    "serial console",
    "CONFIG_SERIAL_8250_CONSOLE, with CONFIG_SERIAL_8250",
    "nothing at all reached the console (console=ttyS0) before the boot timed out",
    "qemu.config",
);

/// What made a boot fail, most telling first: the kernel's own messages
/// (init/main.c, init/do_mounts.c, fs/fuse/virtio_fs.c, net/9p/) and
/// /init's errors (`mount FSTYPE on TARGET: ERRNO`, vm-images/init).
const FAILURES: &[Signature] = &[
    // ENOEXEC: the kernel has no loader for /init, a static-pie ELF.
    sig(
        &["Failed to execute /init (error -8)"],
        missing(
            "ELF executables",
            "CONFIG_BINFMT_ELF",
            "/init could not be executed (ENOEXEC)",
            "qemu.config",
        ),
    ),
    Signature {
        all: &["VFS: Unable to mount root fs"],
        unless: INITRAMFS_UNLESS,
        missing: NO_INITRAMFS,
    },
    Signature {
        all: &["No working init found"],
        unless: INITRAMFS_UNLESS,
        missing: NO_INITRAMFS,
    },
    sig(
        &["mount proc on /proc: ENODEV"],
        missing(
            "proc",
            "CONFIG_PROC_FS",
            "/init could not mount /proc",
            "qemu.config",
        ),
    ),
    sig(
        &["mount sysfs on /sys: ENODEV"],
        missing(
            "sysfs",
            "CONFIG_SYSFS",
            "/init could not mount /sys",
            "qemu.config",
        ),
    ),
    sig(
        &["mount devtmpfs on /dev: ENODEV"],
        missing(
            "devtmpfs",
            "CONFIG_DEVTMPFS",
            "/init could not mount /dev",
            "qemu.config",
        ),
    ),
    // bpffs is built with the bpf() syscall (kernel/bpf/inode.c).
    sig(
        &["mount bpf on /sys/fs/bpf: ENODEV"],
        missing(
            "bpf() syscall",
            "CONFIG_BPF_SYSCALL",
            "/init could not mount bpffs on /sys/fs/bpf",
            "bpf.config",
        ),
    ),
    sig(&["virtio-fs: tag <"], NO_VIRTIO_PCI),
    sig(
        &["9pnet_virtio: no channels available for device "],
        NO_VIRTIO_PCI,
    ),
    sig(&["mount virtiofs on /host: ENODEV"], NO_VIRTIOFS),
    sig(
        &["9pnet: Could not find request transport: virtio"],
        missing(
            "9p over virtio",
            "CONFIG_NET_9P_VIRTIO",
            "the host's root could not be mounted over 9p",
            "share.config",
        ),
    ),
    sig(
        &["mount 9p on /host: ENODEV"],
        missing(
            "9p",
            "CONFIG_9P_FS, with CONFIG_NET_9P",
            "the host's root could not be mounted over 9p",
            "share.config",
        ),
    ),
    sig(
        &["mount devpts on /host/dev/pts: ENODEV"],
        missing(
            "ptys",
            "CONFIG_UNIX98_PTYS",
            "/init could not mount devpts for the command",
            "share.config",
        ),
    ),
    sig(&["no virtio-serial port named "], NO_VIRTIO_CONSOLE),
    sig(&["/dev/hvc0 did not appear"], NO_VIRTIO_CONSOLE),
    sig(
        &["network: no network interface in the guest"],
        missing(
            "virtio network device",
            "CONFIG_VIRTIO_NET, with CONFIG_VIRTIO_PCI",
            "--network user found no interface",
            "net.config",
        ),
    ),
    // The harness's own fault injections (vm-images/init).
    sig(&["inject warn: ", "debugfs not available"], NO_DEBUGFS),
    sig(
        &["inject warn: open /sys/kernel/debug/provoke-crash/DIRECT: ENOENT"],
        missing(
            "lkdtm",
            "CONFIG_LKDTM",
            "inject=warn found no /sys/kernel/debug/provoke-crash",
            "qemu.config",
        ),
    ),
    sig(
        &["inject panic: open /proc/sysrq-trigger: ENOENT"],
        missing(
            "sysrq",
            "CONFIG_MAGIC_SYSRQ",
            "inject=panic found no /proc/sysrq-trigger",
            "qemu.config",
        ),
    ),
];

const NO_DEBUGFS: Missing = missing(
    "debugfs",
    "CONFIG_DEBUG_FS",
    "/sys/kernel/debug is not mounted, so tests that read it fail",
    "qemu.config",
);

/// Optional features /init mounts when the kernel has them: their
/// absence fails no boot, only the tests that need them.
const ABSENT: &[Signature] = &[
    sig(&["debugfs not available"], NO_DEBUGFS),
    sig(&["mount debugfs on /host/sys/kernel/debug: "], NO_DEBUGFS),
    sig(
        &["mount tracefs on /host/sys/kernel/tracing: "],
        missing(
            "tracefs",
            "CONFIG_FTRACE",
            "/sys/kernel/tracing is not mounted, so tests that trace fail",
            "selftests.config",
        ),
    ),
    sig(
        &["mount cgroup2 on /host/sys/fs/cgroup: "],
        missing(
            "cgroup2",
            "CONFIG_CGROUPS",
            "/sys/fs/cgroup is not mounted, so tests that make cgroups fail",
            "selftests.config",
        ),
    ),
];

/// The console up to /init's starting of the program.
fn before_program(console: &str) -> &str {
    console
        .find(BOOT_MARKER)
        .map_or(console, |at| &console[..at])
}

/// A line of the guest's, not one the harness adds to the log.
fn from_guest(line: &str) -> bool {
    !line.trim().is_empty() && !line.starts_with("[qemu stderr]") && !line.starts_with("[harness]")
}

/// The option whose absence made this boot fail, if its console shows
/// one; `end` is how the boot ended. A silent console counts only when
/// the boot timed out (QEMU that exits says why itself) and the kernel
/// is not one the harness built (`ours`): those have a serial console,
/// and a guest of theirs that hangs silent under TCG is no option's.
pub fn missing_option(console: &str, end: &VmEnd, ours: bool) -> Option<Missing> {
    let boot = before_program(console);
    if !ours && matches!(end, VmEnd::BootTimeout) && !boot.lines().any(from_guest) {
        return Some(NO_SERIAL_CONSOLE);
    }
    FAILURES.iter().find(|s| s.seen_in(boot)).map(|s| s.missing)
}

/// The optional features the kernel went without, each once.
pub fn absent_features(console: &str) -> Vec<Missing> {
    let boot = before_program(console);
    let mut found: Vec<Missing> = Vec::new();
    for s in ABSENT.iter().filter(|s| s.seen_in(boot)) {
        if !found.contains(&s.missing) {
            found.push(s.missing);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use guest_common::request::HOST_ROOT;

    const KERNEL: &str = "/tmp/bzImage";

    /// The boot of a kernel the harness built (6.12, TCG), to where /init
    /// takes over: what every excerpt below starts from.
    const BOOT: &str = "\
[    0.000000] Linux version 6.12.118 (bpflab@bpflab) (gcc (Debian 12.2.0-14+deb12u1) 12.2.0) #1 SMP
[    0.000000] Command line: console=ttyS0 panic=-1 oops=panic rdinit=/init clocksource=hpet numa=fake=2 bpflab.run=selftests
[    0.649592] ACPI: Interpreter enabled
[    0.796833] Trying to unpack rootfs image as initramfs...
[    0.827224] Freeing initrd memory: 7800K
[    1.006951] Freeing unused kernel image (initmem) memory: 1248K
[    1.009607] Run /init as init process
";

    fn named(console: &str) -> Option<&'static str> {
        missing_option(console, &VmEnd::Exited { code: Some(0) }, false).map(|m| m.option)
    }

    fn with_init(lines: &str) -> String {
        format!("{BOOT}{lines}")
    }

    #[test]
    fn no_initramfs_support_is_named_from_the_root_mount_panic() {
        // Without CONFIG_BLK_DEV_INITRD nothing is unpacked: no /init, so
        // the kernel looks for a root device (init/do_mounts.c).
        let console = "\
[    0.000000] Linux version 6.12.118 (you@host) #1 SMP
[    1.010000] VFS: Cannot open root device \"\" or unknown-block(0,0): error -6
[    1.010100] Please append a correct \"root=\" boot option; here are the available partitions:
[    1.010200] Kernel panic - not syncing: VFS: Unable to mount root fs on unknown-block(0,0)
[    1.010300] CPU: 0 UID: 0 PID: 1 Comm: swapper/0 Not tainted 6.12.118 #1
";
        assert_eq!(named(console), Some("CONFIG_BLK_DEV_INITRD"));
        // Without CONFIG_BLOCK the root mount is skipped: init/main.c
        // tries the default inits and gives up.
        let console = "\
[    1.010000] Run /sbin/init as init process
[    1.010100] Run /bin/sh as init process
[    1.010200] Kernel panic - not syncing: No working init found.  Try passing init= option to kernel. See Linux Documentation/admin-guide/init.rst for guidance.
";
        assert_eq!(named(console), Some("CONFIG_BLK_DEV_INITRD"));
    }

    #[test]
    fn an_initramfs_that_was_unpacked_is_not_named() {
        // The kernel has initramfs support; the image itself was bad.
        let console = with_init(
            "[    0.900000] Initramfs unpacking failed: junk within compressed archive\n\
             [    1.010200] Kernel panic - not syncing: No working init found.  Try passing init= option to kernel.\n",
        );
        assert_eq!(named(&console), None);
    }

    #[test]
    fn no_elf_loader_is_named_from_the_failed_exec_of_init() {
        let console = with_init(
            "[    1.010000] Failed to execute /init (error -8)\n\
             [    1.010100] Run /sbin/init as init process\n\
             [    1.010300] Kernel panic - not syncing: No working init found.  Try passing init= option to kernel.\n",
        );
        assert_eq!(named(&console), Some("CONFIG_BINFMT_ELF"));
        // Another errno is not a missing loader, nor a missing initramfs.
        let enoent = console.replace("error -8", "error -2");
        assert_eq!(named(&enoent), None);
    }

    /// /init's words for a failed mount (guest_common::mount_what).
    fn enodev(fstype: &str, target: &str) -> String {
        format!(
            "{}: ENODEV",
            guest_common::mount_what(fstype, target, fstype, 0)
        )
    }

    #[test]
    fn init_mount_failures_name_their_filesystem() {
        for (fstype, target, option) in [
            ("proc", "/proc", "CONFIG_PROC_FS"),
            ("sysfs", "/sys", "CONFIG_SYSFS"),
            ("devtmpfs", "/dev", "CONFIG_DEVTMPFS"),
            ("bpf", "/sys/fs/bpf", "CONFIG_BPF_SYSCALL"),
        ] {
            let line = enodev(fstype, target);
            let console = with_init(&format!(
                "bpflab-init: error: {line}\nbpflab-init: verdict: error {line}\n\
                 bpflab-init: error: could not send the verdict: open /dev/ttyS1: ENOENT\n\
                 [    1.200000] reboot: Restarting system\n"
            ));
            assert_eq!(named(&console), Some(option), "{line}");
        }
    }

    #[test]
    fn a_share_that_cannot_be_mounted_names_its_transport() {
        let share = |lines: &str| {
            with_init(&format!(
                "{lines}bpflab-init: verdict: error (the share; is the kernel built with kconfig/share.config?)\n"
            ))
        };
        for (lines, option) in [
            (
                format!(
                    "bpflab-init: error: {} (virtiofs share bpflab-root)\n",
                    enodev("virtiofs", HOST_ROOT)
                )
                .as_str(),
                "CONFIG_VIRTIO_FS, with CONFIG_FUSE_FS",
            ),
            (
                "[    1.100000] virtio-fs: tag <bpflab-root> not found\n\
                 bpflab-init: error: mount virtiofs on /host: EINVAL (virtiofs share bpflab-root)\n",
                "CONFIG_VIRTIO_PCI",
            ),
            (
                format!(
                    "bpflab-init: error: {} (9p share bpflab-root)\n",
                    enodev("9p", HOST_ROOT)
                )
                .as_str(),
                "CONFIG_9P_FS, with CONFIG_NET_9P",
            ),
            (
                "[    1.100000] 9pnet: Could not find request transport: virtio\n\
                 bpflab-init: error: mount 9p on /host: EINVAL (9p share bpflab-root)\n",
                "CONFIG_NET_9P_VIRTIO",
            ),
            (
                "[    1.100000] 9pnet_virtio: no channels available for device bpflab-root\n\
                 bpflab-init: error: mount 9p on /host: ENOENT (9p share bpflab-root)\n",
                "CONFIG_VIRTIO_PCI",
            ),
            (
                format!(
                    "bpflab-init: host root shared over virtiofs\nbpflab-init: error: {}\n",
                    enodev("devpts", &format!("{HOST_ROOT}/dev/pts"))
                )
                .as_str(),
                "CONFIG_UNIX98_PTYS",
            ),
            (
                "bpflab-init: host root shared over virtiofs\n\
                 bpflab-init: verdict: error no virtio-serial port named bpflab.stderr within 10s \
                 (is the kernel built with CONFIG_VIRTIO_CONSOLE?)\n",
                "CONFIG_VIRTIO_CONSOLE",
            ),
            (
                "bpflab-init: host root shared over 9p\n\
                 bpflab-init: verdict: error /dev/hvc0 did not appear within 10s\n",
                "CONFIG_VIRTIO_CONSOLE",
            ),
        ] {
            assert_eq!(named(&share(lines)), Some(option), "{lines}");
        }
    }

    #[test]
    fn the_network_and_the_fault_injections_name_what_they_lack() {
        for (lines, option) in [
            (
                "bpflab-init: error: network: no network interface in the guest: the kernel needs CONFIG_VIRTIO_NET (kconfig/net.config)\n",
                "CONFIG_VIRTIO_NET, with CONFIG_VIRTIO_PCI",
            ),
            (
                "bpflab-init: debugfs not available (mkdir /sys/kernel/debug: EPERM)\n\
                 bpflab-init: inject=warn: provoking a kernel WARNING via lkdtm\n\
                 bpflab-init: verdict: error inject warn: open /sys/kernel/debug/provoke-crash/DIRECT: ENOENT\n",
                "CONFIG_DEBUG_FS",
            ),
            (
                "bpflab-init: inject=warn: provoking a kernel WARNING via lkdtm\n\
                 bpflab-init: verdict: error inject warn: open /sys/kernel/debug/provoke-crash/DIRECT: ENOENT\n",
                "CONFIG_LKDTM",
            ),
            (
                "bpflab-init: inject=panic: crashing the kernel via sysrq-trigger\n\
                 bpflab-init: verdict: error inject panic: open /proc/sysrq-trigger: ENOENT\n",
                "CONFIG_MAGIC_SYSRQ",
            ),
        ] {
            assert_eq!(named(&with_init(lines)), Some(option), "{lines}");
        }
    }

    #[test]
    fn a_silent_console_is_named_only_when_the_boot_timed_out() {
        let qemu = "[qemu stderr] qemu-system-x86_64: warning: TCG doesn't support requested feature: CPUID.01H:ECX.vmx [bit 5]\n";
        let m = missing_option(qemu, &VmEnd::BootTimeout, false).unwrap();
        assert_eq!(
            m.option,
            "CONFIG_SERIAL_8250_CONSOLE, with CONFIG_SERIAL_8250"
        );
        assert_eq!(missing_option("", &VmEnd::BootTimeout, false), Some(m));
        // A kernel the harness built has a serial console: a silent one
        // hung under TCG.
        assert_eq!(missing_option("", &VmEnd::BootTimeout, true), None);
        // QEMU that exits at once says why itself; a kernel that spoke
        // has a console.
        assert_eq!(
            missing_option(qemu, &VmEnd::Exited { code: Some(1) }, false),
            None
        );
        assert_eq!(missing_option(BOOT, &VmEnd::BootTimeout, false), None);
    }

    /// A boot that got as far as the program is never a missing option:
    /// what fails after that is the tests' own.
    #[test]
    fn failures_after_the_program_started_are_not_named() {
        let test_failure = with_init(
            "bpflab-init: starting selftests at 1.05s\n\
             [selftests] t14 fail: expected ENODEV from mount, got EINVAL\n\
             [selftests] t20: bpf(BPF_MAP_CREATE): ENOSYS\n\
             bpflab-init: verdict: fail exit=1\n",
        );
        assert_eq!(named(&test_failure), None);
        let splat = with_init(
            "bpflab-init: starting selftests at 1.05s\n\
             [    2.000000] BUG: kernel NULL pointer dereference, address: 0000000000000008\n\
             [    2.000100] Kernel panic - not syncing: Fatal exception\n",
        );
        assert_eq!(named(&splat), None);
        // Nor is an early splat of a kernel that has every option.
        let early = with_init(
            "[    1.100000] WARNING: CPU: 0 PID: 1 at mm/memory.c:1234 insert_page+0x1c/0x60\n\
             [    1.100100] Kernel panic - not syncing: kernel: panic_on_warn set ...\n",
        );
        assert_eq!(named(&early), None);
        // Once started, a missing feature's words in a test's output do
        // not count either.
        let echoed = with_init(
            "bpflab-init: starting command at 1.1s\n\
             test_progs: mount 9p on /host: ENODEV\n\
             VFS: Unable to mount root fs\n",
        );
        assert_eq!(named(&echoed), None);
    }

    #[test]
    fn optional_features_are_noted_each_once() {
        let console = with_init(
            "bpflab-init: debugfs not available (mkdir /sys/kernel/debug: EPERM)\n\
             bpflab-init: host root shared over virtiofs\n\
             bpflab-init: /sys/kernel/debug not mounted (mount debugfs on /host/sys/kernel/debug: ENOENT)\n\
             bpflab-init: /sys/kernel/tracing not mounted (mount tracefs on /host/sys/kernel/tracing: ENOENT)\n\
             bpflab-init: /sys/fs/cgroup not mounted (mount cgroup2 on /host/sys/fs/cgroup: ENOENT)\n\
             bpflab-init: starting command at 1.2s\n",
        );
        let options: Vec<_> = absent_features(&console).iter().map(|m| m.option).collect();
        assert_eq!(
            options,
            ["CONFIG_DEBUG_FS", "CONFIG_FTRACE", "CONFIG_CGROUPS"]
        );
        // They fail no boot.
        assert_eq!(named(&console), None);
        assert!(absent_features(BOOT).is_empty());
    }

    #[test]
    fn the_line_names_the_kernel_the_option_and_the_fix() {
        let line = NO_VIRTIOFS.line(Path::new(KERNEL));
        assert_eq!(
            line,
            "the kernel /tmp/bzImage has no virtiofs (CONFIG_VIRTIO_FS, with CONFIG_FUSE_FS): \
             the host's root could not be mounted over virtiofs; build it in \
             (kconfig/share.config has it), or see docs/USAGE.md#a-bzimage-of-your-own"
        );
        assert!(!line.contains('\n'));
    }

    /// Every fragment a line names is one of the project's, and has the
    /// option.
    #[test]
    fn each_fragment_named_has_its_option() {
        let all = FAILURES
            .iter()
            .chain(ABSENT)
            .map(|s| s.missing)
            .chain([NO_SERIAL_CONSOLE]);
        for m in all {
            let path = crate::project::root().join("kconfig").join(m.fragment);
            let text = std::fs::read_to_string(&path).unwrap();
            let first = m.option.split(',').next().unwrap();
            assert!(
                text.contains(&format!("{first}=y")),
                "{} in {}",
                first,
                m.fragment
            );
        }
    }
}
