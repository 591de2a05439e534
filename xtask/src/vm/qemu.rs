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

/// How TCG runs the vCPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TcgThreads {
    /// One host thread per vCPU: as fast as the host's cores allow.
    #[default]
    Multi,
    /// Every vCPU on one host thread. Code the kernel patches on one vCPU
    /// (text_poke of static keys, trampolines, kprobes) is then seen by
    /// all at once: under multi-threaded TCG another vCPU can still run a
    /// stale int3 and Oops ("Oops: int3" in syscall_trace_enter, measured
    /// on the BPF selftests), which a real CPU never does.
    Single,
    /// As `Single`, and the guest's clocks count instructions (QEMU's
    /// icount, one nanosecond per guest instruction, idle time skipped):
    /// guest time is then the same from boot to boot, whatever the host's
    /// load. The benchmark's clock under TCG.
    Icount,
}

#[derive(Debug, Clone)]
pub struct VmConfig {
    pub accel: Accel,
    pub tcg_threads: TcgThreads,
    pub bzimage: PathBuf,
    pub initramfs: PathBuf,
    pub memory_mib: u32,
    pub cpus: u32,
    pub numa_nodes: u32,
    /// Where the guest's second serial port (the results channel) goes.
    pub results: PathBuf,
    pub guest: GuestCommand,
    /// The host's directories in the guest, if shared.
    pub share: Option<ShareDevices>,
    /// Where the console and a host command's output go.
    pub io: GuestIo,
    /// The developer's kernel arguments, after ours.
    pub append: Vec<String>,
    /// The developer's QEMU arguments, after ours.
    pub extra_args: Vec<String>,
    /// The guest's network (`--network`).
    pub network: Network,
    /// `--gdb PORT`: QEMU's gdbstub on this local port, the guest stopped
    /// until gdb continues it.
    pub gdb: Option<u16>,
}

/// The guest's network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Network {
    /// No network device: only loopback.
    #[default]
    None,
    /// QEMU's user-mode network on a virtio-net device: the guest takes
    /// its address, route and DNS from QEMU's DHCP; the host is 10.0.2.2.
    User,
}

/// The developer's changes to every guest of a run (`--cpus`, `--memory`,
/// `--append`, `--qemu-arg`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Machine {
    pub cpus: Option<u32>,
    pub memory_mib: Option<u32>,
    pub append: Vec<String>,
    pub qemu_args: Vec<String>,
    pub network: Network,
    pub gdb: Option<u16>,
}

impl Machine {
    pub fn apply(&self, cfg: &mut VmConfig) {
        if let Some(cpus) = self.cpus {
            cfg.cpus = cpus;
        }
        if let Some(mib) = self.memory_mib {
            cfg.memory_mib = mib;
        }
        cfg.append.extend(self.append.iter().cloned());
        cfg.extra_args.extend(self.qemu_args.iter().cloned());
        cfg.network = self.network;
        cfg.gdb = self.gdb;
    }
}

/// `--memory`'s value in MiB: a number of MiB, or one with a suffix M or
/// G (`4096`, `4096M`, `4G`); at least 256 MiB, which the guest needs.
pub fn parse_memory(text: &str) -> Result<u32, String> {
    let t = text.trim();
    let (digits, factor) = match t.char_indices().last() {
        Some((i, 'G' | 'g')) => (&t[..i], 1024),
        Some((i, 'M' | 'm')) => (&t[..i], 1),
        _ => (t, 1),
    };
    let mib = digits
        .parse::<u32>()
        .ok()
        .and_then(|n| n.checked_mul(factor))
        .ok_or_else(|| format!("{text:?} is not a size: give MiB, or a number with M or G (4G)"))?;
    if mib < 256 {
        return Err(format!(
            "{text:?} is too little memory: the guest needs at least 256M"
        ));
    }
    Ok(mib)
}

/// How the host's root (read-only) and the project (read-write) are
/// exported to the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShareDevices {
    /// vhost-user-fs devices served by two virtiofsd sockets.
    Virtiofs { root: PathBuf, project: PathBuf },
    /// virtio-9p devices served by QEMU itself.
    NineP { project: PathBuf },
}

/// The console and, for `run`, the command's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuestIo {
    /// The console on QEMU's stdout, read by the harness.
    Console,
    /// As `Console`, plus the command's stdout and stderr on virtio-serial
    /// ports written to these files, which the harness relays; and with
    /// `stdin`, a port whose host side is a unix socket at that path, which
    /// QEMU waits for the harness to connect to before it starts the guest.
    Command {
        stdout: PathBuf,
        stderr: PathBuf,
        stdin: Option<PathBuf>,
    },
    /// QEMU's stdio is the user's terminal, as the guest's virtio console
    /// (the shell's); the kernel console goes to this file.
    Shell { console: PathBuf },
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
            tcg_threads: TcgThreads::Multi,
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
            share: None,
            io: GuestIo::Console,
            append: Vec::new(),
            extra_args: Vec::new(),
            network: Network::None,
            gdb: None,
        }
    }
}

/// QEMU option values escape a comma by doubling it.
fn escape(path: &Path) -> String {
    path.display().to_string().replace(',', ",,")
}

/// The share's devices. virtiofs maps guest memory into virtiofsd, so the
/// guest's RAM must be a shared memory backend (it keeps `-m`'s size).
pub fn share_args(share: &ShareDevices, memory_mib: u32) -> Vec<String> {
    use guest_common::request::{PROJECT_TAG, ROOT_TAG};
    match share {
        ShareDevices::Virtiofs { root, project } => {
            let mut args = vec![
                "-object".into(),
                format!("memory-backend-memfd,id=mem,size={memory_mib}M,share=on"),
                "-machine".into(),
                "memory-backend=mem".into(),
            ];
            for (id, socket, tag) in [
                ("vfsroot", root, ROOT_TAG),
                ("vfsproj", project, PROJECT_TAG),
            ] {
                args.extend([
                    "-chardev".into(),
                    format!("socket,id={id},path={}", escape(socket)),
                    "-device".into(),
                    // The tag goes to the device, never to virtiofsd.
                    format!("vhost-user-fs-pci,chardev={id},tag={tag}"),
                ]);
            }
            args
        }
        ShareDevices::NineP { project } => {
            let mut args = Vec::new();
            for (id, path, tag, ro) in [
                ("p9root", Path::new("/"), ROOT_TAG, ",readonly=on"),
                ("p9proj", project.as_path(), PROJECT_TAG, ""),
            ] {
                args.extend([
                    "-fsdev".into(),
                    // multidevs=remap: the host root spans several file
                    // systems, whose inode numbers must not collide.
                    format!(
                        "local,id={id},path={},security_model=none,multidevs=remap{ro}",
                        escape(path)
                    ),
                    "-device".into(),
                    format!("virtio-9p-pci,fsdev={id},mount_tag={tag}"),
                ]);
            }
            args
        }
    }
}

/// The console's chardev, and the command's output devices.
pub fn io_args(io: &GuestIo) -> Vec<String> {
    use guest_common::request::{STDERR_PORT, STDIN_PORT, STDOUT_PORT};
    let mut args: Vec<String> = vec!["-chardev".into()];
    match io {
        GuestIo::Console | GuestIo::Command { .. } => {
            args.push("stdio,id=console,signal=off".into())
        }
        GuestIo::Shell { console } => {
            args.push(format!("file,id=console,path={}", escape(console)))
        }
    }
    args.extend(["-serial".into(), "chardev:console".into()]);
    match io {
        GuestIo::Console => {}
        GuestIo::Command {
            stdout,
            stderr,
            stdin,
        } => {
            args.extend(["-device".into(), "virtio-serial-pci".into()]);
            for (id, file, name) in [("out", stdout, STDOUT_PORT), ("err", stderr, STDERR_PORT)] {
                args.extend([
                    "-chardev".into(),
                    format!("file,id={id},path={}", escape(file)),
                    "-device".into(),
                    format!("virtserialport,chardev={id},name={name}"),
                ]);
            }
            if let Some(socket) = stdin {
                // wait=on: no byte can be lost to a guest that reads before
                // the harness is there; the harness's close is the EOF.
                args.extend([
                    "-chardev".into(),
                    format!("socket,id=in,path={},server=on,wait=on", escape(socket)),
                    "-device".into(),
                    format!("virtserialport,chardev=in,name={STDIN_PORT}"),
                ]);
            }
        }
        GuestIo::Shell { .. } => args.extend([
            "-device".into(),
            "virtio-serial-pci".into(),
            // signal=off: Ctrl-C goes to the guest's foreground process,
            // not to QEMU.
            "-chardev".into(),
            "stdio,id=term,signal=off".into(),
            "-device".into(),
            "virtconsole,chardev=term".into(),
        ]),
    }
    args
}

/// QEMU's gdbstub on a local port, the CPUs stopped until gdb continues
/// them (`-S`), so a breakpoint can be set before the kernel runs.
pub fn gdb_args(port: Option<u16>) -> Vec<String> {
    match port {
        None => Vec::new(),
        Some(p) => vec!["-gdb".into(), format!("tcp:127.0.0.1:{p}"), "-S".into()],
    }
}

/// The network device: virtio-net on QEMU's user-mode network.
pub fn network_args(network: Network) -> Vec<String> {
    match network {
        Network::None => Vec::new(),
        Network::User => [
            "-netdev",
            "user,id=net0",
            "-device",
            "virtio-net-pci,netdev=net0",
        ]
        .map(String::from)
        .to_vec(),
    }
}

pub fn accel_args(accel: Accel, threads: TcgThreads) -> Vec<String> {
    match (accel, threads) {
        (Accel::Kvm, _) => vec!["-accel".into(), "kvm".into(), "-cpu".into(), "host".into()],
        (Accel::Tcg, TcgThreads::Multi) => vec!["-accel".into(), "tcg,thread=multi".into()],
        (Accel::Tcg, TcgThreads::Single) => vec!["-accel".into(), "tcg,thread=single".into()],
        (Accel::Tcg, TcgThreads::Icount) => [
            "-accel",
            "tcg,thread=single",
            "-icount",
            "shift=0,sleep=off,align=off",
        ]
        .map(String::from)
        .to_vec(),
    }
}

/// The clock the guest keeps time by, where its own choice can be wrong.
/// Under TCG without icount the guest calibrates its TSC against the PIT
/// with a timed loop, and on a loaded host (ci's two workers, three
/// guests on two cores) the loop is descheduled: a guest measured its
/// 2.6 GHz TSC at 234 MHz ("PIT calibration deviates from HPET"), so its
/// clocks ran 11x fast and a 15 s test timeout fired after 1.4 s. The
/// HPET is QEMU's host clock, right whatever the load. Under KVM
/// kvm-clock is right, and under icount every clock counts instructions
/// (the bench's figures stand on that), so both keep the kernel's choice.
///
/// Where the HPET is forced, so is `tsc=nowatchdog`: 7.3's clocksource
/// watchdog can deadlock the boot. Until the HPET is selected the
/// timekeeper reads jiffies; the switch to it is a stop_machine(), and
/// when the watchdog's timer fires on the CPU that has not yet joined
/// it, that CPU asks a CPU already stopped (interrupts off) to read its
/// TSC and waits for it with a timeout read from the timekeeper, whose
/// jiffies no CPU advances any more. Seen as "the guest did not reach
/// /init" in about 1 boot of 200 under load (gdb: CPU 0 in
/// watchdog_wait_seq(), the others in multi_cpu_stop()). Without a
/// TSC to verify the watchdog has nothing to watch and never runs; the
/// TSC keeps no time here anyway.
pub fn guest_clock_args(accel: Accel, threads: TcgThreads) -> &'static [&'static str] {
    match (accel, threads) {
        (Accel::Tcg, TcgThreads::Multi | TcgThreads::Single) => {
            &["clocksource=hpet", "tsc=nowatchdog"]
        }
        _ => &[],
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
    parts.extend(
        guest_clock_args(cfg.accel, cfg.tcg_threads)
            .iter()
            .map(|a| a.to_string()),
    );
    if cfg.numa_nodes > 1 {
        parts.push(format!("numa=fake={}", cfg.numa_nodes));
    }
    if cfg.gdb.is_some() {
        // gdb's symbols are vmlinux's link-time addresses.
        parts.push("nokaslr".to_string());
    }
    if cfg.network == Network::User {
        use guest_common::protocol::param;
        parts.push(format!("{}={}", param::NET, param::NET_USER));
    }
    parts.extend(cfg.append.iter().cloned());
    parts.extend(cfg.guest.words());
    parts.join(" ")
}

/// Every argument after `qemu-system-x86_64`.
pub fn qemu_args(cfg: &VmConfig) -> Vec<String> {
    let mut args: Vec<String> = ["-nodefaults", "-no-reboot", "-display", "none"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(accel_args(cfg.accel, cfg.tcg_threads));
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
    ]);
    // ttyS0: the console, read live by the harness.
    args.extend(io_args(&cfg.io));
    // ttyS1: test results only, so kernel messages never interleave.
    args.extend([
        "-chardev".into(),
        format!("file,id=results,path={}", escape(&cfg.results)),
        "-serial".into(),
        "chardev:results".into(),
    ]);
    if let Some(share) = &cfg.share {
        args.extend(share_args(share, cfg.memory_mib));
    }
    args.extend(network_args(cfg.network));
    args.extend(gdb_args(cfg.gdb));
    // Last, so the developer's options can add to or override ours.
    args.extend(cfg.extra_args.iter().cloned());
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
                kernel: Flavor::from_name("mainline").name().into(),
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
        let mut single = cfg(Accel::Tcg);
        single.tcg_threads = TcgThreads::Single;
        assert_eq!(
            value_after(&qemu_args(&single), "-accel"),
            ["tcg,thread=single"]
        );
        assert!(value_after(&qemu_args(&single), "-icount").is_empty());
        let mut icount = cfg(Accel::Tcg);
        icount.tcg_threads = TcgThreads::Icount;
        let counted = qemu_args(&icount);
        assert_eq!(value_after(&counted, "-accel"), ["tcg,thread=single"]);
        assert_eq!(
            value_after(&counted, "-icount"),
            ["shift=0,sleep=off,align=off"],
            "one instruction a nanosecond, idle time skipped"
        );
        icount.accel = Accel::Kvm;
        assert!(value_after(&qemu_args(&icount), "-icount").is_empty());
        single.accel = Accel::Kvm;
        assert_eq!(
            value_after(&qemu_args(&single), "-accel"),
            ["kvm"],
            "KVM has no TCG threads"
        );
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
    fn a_tcg_guest_keeps_time_by_the_hpet_and_the_others_by_their_own_choice() {
        let clock = |accel, threads| {
            let mut c = cfg(accel);
            c.tcg_threads = threads;
            kernel_cmdline(&c)
                .split(' ')
                .filter(|w| w.starts_with("clocksource=") || w.starts_with("tsc="))
                .map(String::from)
                .collect::<Vec<_>>()
        };
        // The HPET, and no TSC watchdog to deadlock the switch to it.
        for threads in [TcgThreads::Multi, TcgThreads::Single] {
            assert_eq!(
                clock(Accel::Tcg, threads),
                ["clocksource=hpet", "tsc=nowatchdog"],
                "{threads:?}"
            );
        }
        // icount's clocks count instructions: the bench's record stands
        // on the kernel's own choice.
        assert!(clock(Accel::Tcg, TcgThreads::Icount).is_empty());
        assert!(clock(Accel::Kvm, TcgThreads::Multi).is_empty());
    }

    #[test]
    fn cmdline_carries_guest_command() {
        let mut c = cfg(Accel::Tcg);
        assert_eq!(
            kernel_cmdline(&c),
            "console=ttyS0 panic=-1 oops=panic rdinit=/init clocksource=hpet tsc=nowatchdog numa=fake=2 bpflab.run=selftests bpflab.kernel=mainline bpflab.args=t14,t02"
        );
        c.guest.args.clear();
        c.guest.inject = Some(Inject::Panic);
        c.numa_nodes = 1;
        let line = kernel_cmdline(&c);
        assert!(
            line.ends_with("bpflab.kernel=mainline bpflab.inject=panic"),
            "{line}"
        );
        assert!(!line.contains("numa="));
        assert!(!line.contains("bpflab.args"));
    }

    #[test]
    fn the_developers_machine_changes_cpus_memory_cmdline_and_args() {
        let mut c = cfg(Accel::Tcg);
        Machine {
            cpus: Some(2),
            memory_mib: Some(8192),
            append: vec!["nokaslr".into(), "loglevel=7".into()],
            qemu_args: vec!["-device".into(), "virtio-rng-pci".into()],
            network: Network::None,
            gdb: None,
        }
        .apply(&mut c);
        let args = qemu_args(&c);
        assert_eq!(value_after(&args, "-smp"), ["2"]);
        assert_eq!(value_after(&args, "-m"), ["8192M"]);
        assert_eq!(args[args.len() - 2..], ["-device", "virtio-rng-pci"]);
        let line = kernel_cmdline(&c);
        assert!(
            line.contains("numa=fake=2 nokaslr loglevel=7 bpflab.run=selftests"),
            "{line}"
        );
        // Nothing given: the defaults stay.
        let mut d = cfg(Accel::Tcg);
        Machine::default().apply(&mut d);
        assert_eq!(qemu_args(&d), qemu_args(&cfg(Accel::Tcg)));
    }

    #[test]
    fn a_user_network_is_a_virtio_nic_on_slirp_and_a_word_for_init() {
        let plain = cfg(Accel::Tcg);
        assert!(!qemu_args(&plain).iter().any(|a| a.contains("net")));
        assert!(!kernel_cmdline(&plain).contains("bpflab.net"));
        let mut c = cfg(Accel::Tcg);
        Machine {
            network: Network::User,
            ..Default::default()
        }
        .apply(&mut c);
        let args = qemu_args(&c);
        assert_eq!(value_after(&args, "-netdev"), ["user,id=net0"]);
        assert_eq!(
            value_after(&args, "-device"),
            ["virtio-net-pci,netdev=net0"]
        );
        let line = kernel_cmdline(&c);
        assert!(
            line.contains("numa=fake=2 bpflab.net=user bpflab.run=selftests"),
            "{line}"
        );
        let parsed = guest_common::cmdline::parse(&line).unwrap();
        assert!(parsed.network, "init reads what the host wrote");
    }

    #[test]
    fn gdb_stops_the_guest_at_a_local_stub_without_kaslr() {
        let plain = cfg(Accel::Tcg);
        assert!(!qemu_args(&plain).contains(&"-S".to_string()));
        assert!(!kernel_cmdline(&plain).contains("nokaslr"));
        let mut c = cfg(Accel::Tcg);
        Machine {
            gdb: Some(4321),
            ..Default::default()
        }
        .apply(&mut c);
        let args = qemu_args(&c);
        assert_eq!(value_after(&args, "-gdb"), ["tcp:127.0.0.1:4321"]);
        assert!(args.contains(&"-S".to_string()));
        assert!(kernel_cmdline(&c).contains(" nokaslr "));
    }

    #[test]
    fn memory_sizes_parse_in_mib_with_a_clear_error() {
        assert_eq!(parse_memory("4G"), Ok(4096));
        assert_eq!(parse_memory("6144M"), Ok(6144));
        assert_eq!(parse_memory("512"), Ok(512));
        assert_eq!(parse_memory("2g"), Ok(2048));
        for bad in ["", "G", "4T", "-1G", "lots", "99999999G"] {
            let e = parse_memory(bad).unwrap_err();
            assert!(e.contains("not a size"), "{bad}: {e}");
        }
        assert!(parse_memory("128M").unwrap_err().contains("at least 256M"));
    }

    #[test]
    fn virtiofs_needs_shared_memory_and_tags_on_the_devices() {
        let mut c = cfg(Accel::Tcg);
        c.share = Some(ShareDevices::Virtiofs {
            root: "/s/root.sock".into(),
            project: "/s/proj,1.sock".into(),
        });
        let args = qemu_args(&c);
        assert_eq!(
            value_after(&args, "-object"),
            ["memory-backend-memfd,id=mem,size=4096M,share=on"]
        );
        assert_eq!(value_after(&args, "-machine"), ["memory-backend=mem"]);
        assert_eq!(value_after(&args, "-m"), ["4096M"], "the backend keeps -m");
        let chardevs = value_after(&args, "-chardev");
        assert!(chardevs.contains(&"socket,id=vfsroot,path=/s/root.sock"));
        assert!(chardevs.contains(&"socket,id=vfsproj,path=/s/proj,,1.sock"));
        assert_eq!(
            value_after(&args, "-device"),
            [
                "vhost-user-fs-pci,chardev=vfsroot,tag=bpflab-root",
                "vhost-user-fs-pci,chardev=vfsproj,tag=bpflab-project"
            ]
        );
        assert!(
            !args.iter().any(|a| a == "-numa"),
            "numa=fake stays on the cmdline"
        );
    }

    #[test]
    fn nine_p_shares_the_root_read_only_and_the_project_writable() {
        let mut c = cfg(Accel::Tcg);
        c.share = Some(ShareDevices::NineP {
            project: "/home/dev/p".into(),
        });
        let args = qemu_args(&c);
        assert_eq!(
            value_after(&args, "-fsdev"),
            [
                "local,id=p9root,path=/,security_model=none,multidevs=remap,readonly=on",
                "local,id=p9proj,path=/home/dev/p,security_model=none,multidevs=remap"
            ]
        );
        assert_eq!(
            value_after(&args, "-device"),
            [
                "virtio-9p-pci,fsdev=p9root,mount_tag=bpflab-root",
                "virtio-9p-pci,fsdev=p9proj,mount_tag=bpflab-project"
            ]
        );
        assert!(
            value_after(&args, "-object").is_empty(),
            "9p needs no shared memory"
        );
    }

    #[test]
    fn a_command_gets_two_output_ports_and_a_shell_the_terminal() {
        let mut c = cfg(Accel::Tcg);
        c.io = GuestIo::Command {
            stdout: "/r/out".into(),
            stderr: "/r/err".into(),
            stdin: None,
        };
        let args = qemu_args(&c);
        assert_eq!(
            value_after(&args, "-chardev"),
            [
                "stdio,id=console,signal=off",
                "file,id=out,path=/r/out",
                "file,id=err,path=/r/err",
                "file,id=results,path=/r/results.txt"
            ]
        );
        assert_eq!(
            value_after(&args, "-device"),
            [
                "virtio-serial-pci",
                "virtserialport,chardev=out,name=bpflab.stdout",
                "virtserialport,chardev=err,name=bpflab.stderr"
            ]
        );
        // A piped stdin: a third port, on a socket QEMU waits at.
        c.io = GuestIo::Command {
            stdout: "/r/out".into(),
            stderr: "/r/err".into(),
            stdin: Some("/r/stdin.sock".into()),
        };
        let args = qemu_args(&c);
        assert!(value_after(&args, "-chardev")
            .contains(&"socket,id=in,path=/r/stdin.sock,server=on,wait=on"));
        assert_eq!(
            value_after(&args, "-device").last(),
            Some(&"virtserialport,chardev=in,name=bpflab.stdin")
        );
        c.io = GuestIo::Shell {
            console: "/r/console.raw".into(),
        };
        let args = qemu_args(&c);
        let chardevs = value_after(&args, "-chardev");
        assert_eq!(chardevs[0], "file,id=console,path=/r/console.raw");
        assert!(chardevs.contains(&"stdio,id=term,signal=off"));
        assert!(value_after(&args, "-device").contains(&"virtconsole,chardev=term"));
        assert_eq!(value_after(&args, "-serial")[0], "chardev:console");
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
