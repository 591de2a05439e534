//! The QEMU invocation as data: small pure functions turn a config into
//! arguments, so they can be checked without running QEMU.

use std::path::{Path, PathBuf};

pub use guest_common::cmdline::GuestCommand;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AccelChoice {
    /// KVM where /dev/kvm can run the kernel, TCG otherwise.
    Auto,
    Kvm,
    Tcg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    Kvm,
    Tcg,
}

impl Accel {
    pub fn name(self) -> &'static str {
        match self {
            Accel::Kvm => "KVM",
            Accel::Tcg => "TCG",
        }
    }
}

#[derive(Debug, Clone)]
pub struct VmConfig {
    pub accel: Accel,
    pub bzimage: PathBuf,
    pub initramfs: PathBuf,
    pub memory_mib: u32,
    pub cpus: u32,
    pub numa_nodes: u32,
    /// Where the guest's second serial port (the results channel) goes.
    pub results: PathBuf,
    pub guest: GuestCommand,
}

impl VmConfig {
    pub fn new(
        accel: Accel,
        bzimage: &Path,
        initramfs: &Path,
        results: &Path,
        guest: GuestCommand,
    ) -> VmConfig {
        VmConfig {
            accel,
            bzimage: bzimage.to_path_buf(),
            initramfs: initramfs.to_path_buf(),
            // T20 maps a 1 GiB map 32 times and wants ~3 GiB.
            memory_mib: 4096,
            // T18 wants several vCPUs faulting at once.
            cpus: 4,
            // T27 wants two nodes.
            numa_nodes: 2,
            results: results.to_path_buf(),
            guest,
        }
    }
}

pub fn accel_args(accel: Accel) -> Vec<String> {
    match accel {
        Accel::Kvm => vec!["-accel".into(), "kvm".into(), "-cpu".into(), "host".into()],
        // Multi-threaded TCG: one host thread per vCPU.
        Accel::Tcg => vec!["-accel".into(), "tcg,thread=multi".into()],
    }
}

/// The kernel command line.
pub fn kernel_cmdline(cfg: &VmConfig) -> String {
    let mut parts = vec![
        "console=ttyS0".to_string(),
        // Reboot at once on panic; with -no-reboot QEMU then exits.
        "panic=-1".to_string(),
        // After an Oops the kernel is unreliable and often wedges: stop
        // there, so the test that caused it is named at once.
        "oops=panic".to_string(),
        "rdinit=/init".to_string(),
    ];
    if cfg.numa_nodes > 1 {
        parts.push(format!("numa=fake={}", cfg.numa_nodes));
    }
    parts.extend(cfg.guest.words());
    parts.join(" ")
}

/// Every argument after `qemu-system-x86_64`.
pub fn qemu_args(cfg: &VmConfig) -> Vec<String> {
    let mut args: Vec<String> = ["-nodefaults", "-no-reboot", "-display", "none"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(accel_args(cfg.accel));
    args.extend([
        "-m".into(),
        format!("{}M", cfg.memory_mib),
        "-smp".into(),
        cfg.cpus.to_string(),
        "-kernel".into(),
        cfg.bzimage.display().to_string(),
        "-initrd".into(),
        cfg.initramfs.display().to_string(),
        "-append".into(),
        kernel_cmdline(cfg),
        // ttyS0: the console, read live by the harness.
        "-chardev".into(),
        "stdio,id=console,signal=off".into(),
        "-serial".into(),
        "chardev:console".into(),
        // ttyS1: test results only, so kernel messages never interleave.
        "-chardev".into(),
        // QEMU option values escape a comma by doubling it.
        format!(
            "file,id=results,path={}",
            cfg.results.display().to_string().replace(',', ",,")
        ),
        "-serial".into(),
        "chardev:results".into(),
    ]);
    args
}

/// QEMU's words for "this KVM cannot run this guest".
pub fn is_kvm_failure(line: &str) -> bool {
    line.contains("KVM internal error")
        || line.contains("failed to initialize kvm")
        || line.contains("kvm_init_vcpu")
        || line.contains("failed to set MSR")
        || line.contains("kvm_buf_set_msrs")
        || line.contains("Could not access KVM kernel module")
}

/// Whether /dev/kvm is there and usable by us (not whether it works).
pub fn kvm_available() -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::Flavor;
    use guest_common::protocol::{Inject, Program};

    fn cfg(accel: Accel) -> VmConfig {
        VmConfig::new(
            accel,
            Path::new("/k/bzImage"),
            Path::new("/i/initramfs.cpio"),
            Path::new("/r/results.txt"),
            GuestCommand {
                program: Program::Selftests,
                kernel: Flavor::Patched.name().into(),
                args: vec!["t14".into(), "t02".into()],
                inject: None,
            },
        )
    }

    fn value_after<'a>(args: &'a [String], flag: &str) -> Vec<&'a str> {
        args.windows(2)
            .filter(|w| w[0] == flag)
            .map(|w| w[1].as_str())
            .collect()
    }

    #[test]
    fn tcg_args() {
        let args = qemu_args(&cfg(Accel::Tcg));
        assert_eq!(value_after(&args, "-accel"), ["tcg,thread=multi"]);
        assert!(value_after(&args, "-cpu").is_empty());
        assert!(args.contains(&"-nodefaults".to_string()));
        assert!(args.contains(&"-no-reboot".to_string()));
        assert_eq!(value_after(&args, "-m"), ["4096M"]);
        assert_eq!(value_after(&args, "-smp"), ["4"]);
        assert_eq!(value_after(&args, "-kernel"), ["/k/bzImage"]);
        assert_eq!(value_after(&args, "-initrd"), ["/i/initramfs.cpio"]);
        // Console first (ttyS0), results second (ttyS1).
        assert_eq!(
            value_after(&args, "-serial"),
            ["chardev:console", "chardev:results"]
        );
        assert_eq!(
            value_after(&args, "-chardev"),
            [
                "stdio,id=console,signal=off",
                "file,id=results,path=/r/results.txt"
            ]
        );
    }

    #[test]
    fn kvm_args_use_the_host_cpu() {
        let args = qemu_args(&cfg(Accel::Kvm));
        assert_eq!(value_after(&args, "-accel"), ["kvm"]);
        assert_eq!(value_after(&args, "-cpu"), ["host"]);
    }

    #[test]
    fn cmdline_carries_guest_command() {
        let mut c = cfg(Accel::Tcg);
        assert_eq!(
            kernel_cmdline(&c),
            "console=ttyS0 panic=-1 oops=panic rdinit=/init numa=fake=2 bpflab.run=selftests bpflab.kernel=patched bpflab.args=t14,t02"
        );
        c.guest.args.clear();
        c.guest.inject = Some(Inject::Panic);
        c.numa_nodes = 1;
        let line = kernel_cmdline(&c);
        assert!(
            line.ends_with("bpflab.kernel=patched bpflab.inject=panic"),
            "{line}"
        );
        assert!(!line.contains("numa="));
        assert!(!line.contains("bpflab.args"));
    }

    #[test]
    fn recognizes_kvm_failures() {
        assert!(is_kvm_failure("KVM internal error. Suberror: 1"));
        assert!(is_kvm_failure(
            "qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69"
        ));
        assert!(!is_kvm_failure("[    0.000000] Linux version 6.12.117"));
    }
}
