//! `cargo xtask run` and `vmtest --share` for real: host commands in the
//! mainline kernel over virtiofs and 9p (and one on eager and mainline, held
//! to what each is expected to do), their exit statuses and output,
//! the shares' permissions, the 9p fallback, a shell on a terminal, and
//! nothing left running after a run, a guest panic or a killed harness.
//! They boot kernels, so they are ignored by a plain `cargo test` and run
//! by `cargo xtask ci` (`cargo test -p xtask --test share -- --ignored
//! --test-threads=1`); they need the kernels built and virtiofsd installed
//! (`cargo install --locked virtiofsd`; the xtask installs it itself).

use std::fs;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{project, run_to_end, wait_with_deadline, KillOnDrop, Ran};

const XTASK: &str = env!("CARGO_BIN_EXE_xtask");
const VM_FAILED: i32 = 125;

fn xtask(args: &[&str]) -> Command {
    xtask_on("mainline", args)
}

/// `run` on `kernels` (a comma list), under TCG, with `args`.
fn xtask_on(kernels: &str, args: &[&str]) -> Command {
    let mut c = Command::new(XTASK);
    c.args(["run", "--kernel", kernels, "--accel", "tcg"])
        .args(args)
        .current_dir(project())
        .stdin(Stdio::null());
    c
}

fn run_with(command: Command) -> Ran {
    run_to_end(command, Duration::from_secs(600))
}

fn run(args: &[&str]) -> Ran {
    run_with(xtask(args))
}

/// Processes whose command line contains `needle`.
fn processes_with(needle: &str) -> Vec<String> {
    fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| {
            let cmd = fs::read(e.path().join("cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            cmd.contains(needle).then_some(cmd)
        })
        .collect()
}

/// No virtiofsd or QEMU of the harness with pid `pid`, and no socket
/// directory of it, within a few seconds.
fn assert_nothing_left(pid: u32) {
    let marker = format!("bpflab-vfs-{pid}-");
    let start = Instant::now();
    loop {
        let left = processes_with(&marker);
        let dirs: Vec<_> = fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&marker))
            .map(|e| e.path())
            .collect();
        if left.is_empty() && dirs.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "left behind: processes {left:?}, socket directories {dirs:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn exit_statuses_are_the_commands() {
    for (cmd, want) in [
        (&["true"][..], 0),
        (&["false"][..], 1),
        (&["sh", "-c", "kill -9 $$"][..], 137),
        (&["sh", "-c", "exit 42"][..], 42),
        (&["no-such-command-bpflab"][..], 127),
    ] {
        let mut args = vec!["--"];
        args.extend(cmd);
        let r = run(&args);
        assert_eq!(r.code, want, "{cmd:?}: {}", r.stderr);
    }
    // Said where the command's errors go, like a shell.
    let r = run(&["--", "no-such-command-bpflab"]);
    assert!(
        r.stderr.contains("bpflab: no-such-command-bpflab: ENOENT"),
        "{}",
        r.stderr
    );
}

/// `run` on eager and mainline, with `args`.
fn run_on_two(args: &[&str]) -> Ran {
    run_with(xtask_on("eager,mainline", args))
}

/// The directory `reports: DIR (...)` names.
fn reports_dir(stderr: &str) -> std::path::PathBuf {
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("reports: "))
        .unwrap_or_else(|| panic!("no reports line in {stderr}"));
    line.split(" (").next().unwrap().into()
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn a_command_on_several_kernels_is_held_to_what_each_is_expected_to_do() {
    // Passes on mainline alone: each guest is told its kernel's name.
    let probe = [
        "--",
        "sh",
        "-c",
        "grep -q bpflab.kernel=mainline /proc/cmdline",
    ];
    let expected = [&["--expect", "eager=fail"][..], &probe].concat();
    let r = run_on_two(&expected);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("run: 2 of 2 kernels as expected"),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr.contains("eager              fail     exit 1"),
        "{}",
        r.stderr
    );
    let junit = fs::read_to_string(reports_dir(&r.stderr).join("junit.xml")).unwrap();
    assert!(
        junit.contains("tests=\"2\" skipped=\"0\" failures=\"0\""),
        "{junit}"
    );
    // Pass everywhere by default: eager does otherwise, and is named.
    let r = run_on_two(&probe);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("run: 1 of 2 kernels as expected; not eager"),
        "{}",
        r.stdout
    );
    let junit = fs::read_to_string(reports_dir(&r.stderr).join("junit.xml")).unwrap();
    assert!(junit.contains("expected pass, got exit 1"), "{junit}");
    // A kernel the run does not have: said before anything boots.
    let r = run_on_two(&["--expect", "mine=pass", "--", "true"]);
    assert_eq!(r.code, VM_FAILED, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("mine is not a kernel of this run (eager, mainline)"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("booting"), "{}", r.stderr);
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn stdout_and_stderr_stream_apart_and_completely() {
    let r = run(&[
        "--",
        "sh",
        "-c",
        "echo to-stdout; echo to-stderr >&2; seq 1 100000",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[0], "to-stdout");
    assert_eq!(lines.len(), 100_001, "every line arrives");
    assert_eq!(lines[100_000], "100000");
    assert!(!r.stdout.contains("to-stderr"));
    assert!(r.stderr.contains("to-stderr"), "{}", r.stderr);
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn a_piped_stdin_reaches_the_command_to_its_last_byte() {
    // A pipe, as `echo hi | cargo xtask run -- cat`.
    let mut echo = Command::new("printf")
        .arg("hi\n")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut c = xtask(&["--", "cat"]);
    c.stdin(Stdio::from(echo.stdout.take().unwrap()));
    let r = run_with(c);
    echo.wait().unwrap();
    assert_eq!((r.code, r.stdout.as_str()), (0, "hi\n"), "{}", r.stderr);
    // 10 MB of every byte value from a file, through sha256sum.
    let data: Vec<u8> = {
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        (0..10_000_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect()
    };
    let file = project().join("target/stdin-10MB.bin");
    fs::write(&file, &data).unwrap();
    let host = Command::new("sha256sum").arg(&file).output().unwrap();
    let want = String::from_utf8_lossy(&host.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    let mut c = xtask(&["--", "sha256sum"]);
    c.stdin(fs::File::open(&file).unwrap());
    let r = run_with(c);
    let _ = fs::remove_file(&file);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        r.stdout,
        format!("{want}  -\n"),
        "the guest's sum of the 10 MB"
    );
    // A command that reads none of it still ends; /dev/null stays empty.
    let mut c = xtask(&["--", "true"]);
    c.stdin(fs::File::open("/proc/self/exe").unwrap());
    assert_eq!(run_with(c).code, 0);
    let r = run(&["--", "cat"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""), "{}", r.stderr);
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn machine_flags_reach_the_guest() {
    let r = run(&[
        "--cpus",
        "2",
        "--memory",
        "2G",
        "--append",
        "bpflab_probe=machine-flags",
        // pci-testdev: Red Hat's vendor 0x1b36, device 0x0005.
        "--qemu-arg=-device",
        "--qemu-arg=pci-testdev",
        "--",
        "sh",
        "-c",
        "nproc; grep MemTotal /proc/meminfo; cat /proc/cmdline; \
         cat /sys/bus/pci/devices/*/vendor /sys/bus/pci/devices/*/device | tr '\\n' ' '",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[0], "2", "--cpus 2: nproc in\n{}", r.stdout);
    let kb: u64 = lines[1]
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no MemTotal in\n{}", r.stdout));
    assert!(
        (1_800_000..=2_097_152).contains(&kb),
        "--memory 2G: MemTotal {kb} kB"
    );
    assert!(
        lines[2].contains(" bpflab_probe=machine-flags "),
        "--append: {}",
        lines[2]
    );
    assert!(
        lines[3].contains("0x1b36") && lines[3].contains("0x0005"),
        "--qemu-arg: no pci-testdev among the PCI ids {}",
        lines[3]
    );
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn a_config_file_gives_defaults_that_the_command_line_overrides() {
    let file = std::env::temp_dir().join(format!("bpflab-test-{}.toml", std::process::id()));
    fs::write(&file, "cpus = 2\nappend = [\"bpflab_probe=from-file\"]\n").unwrap();
    let nproc_and_cmdline = |extra: &[&str]| {
        let mut c = xtask(extra);
        c.args(["--", "sh", "-c", "nproc; cat /proc/cmdline"])
            .env("BPFLAB_CONFIG", &file);
        let r = run_with(c);
        assert_eq!(r.code, 0, "{}", r.stderr);
        r.stdout
    };
    let out = nproc_and_cmdline(&[]);
    assert!(
        out.starts_with("2\n") && out.contains("bpflab_probe=from-file"),
        "the file's cpus and append: {out}"
    );
    let out = nproc_and_cmdline(&["--cpus", "3"]);
    assert!(out.starts_with("3\n"), "--cpus 3 over the file's 2: {out}");
    fs::write(&file, "cpu = 2\n").unwrap();
    let mut c = xtask(&["--", "true"]);
    c.env("BPFLAB_CONFIG", &file);
    let r = run_with(c);
    assert!(
        r.code == 3 && r.stderr.contains("unknown field `cpu`"),
        "an unknown key: exit {} {}",
        r.code,
        r.stderr
    );
    fs::remove_file(&file).unwrap();
}

/// In the project: a file written in the guest is on the host; outside
/// it the host is read-only; /tmp is the guest's own; the caller's
/// working directory and environment are the command's.
fn shares_behave(share: &str) {
    let name = format!("target/share-test-{share}-{}", std::process::id());
    let host_file = project().join(&name);
    let _ = fs::remove_file(&host_file);
    let script = format!(
        "echo written-in-guest > {name}; \
         touch /etc/bpflab-probe 2>&1; echo etc=$?; \
         echo scratch > /tmp/x && cat /tmp/x; \
         pwd; echo var=$BPFLAB_TEST_VAR; \
         grep -c '^bpflab-[a-z]* [^ ]* {} ' /proc/mounts",
        if share == "9p" { "9p" } else { "virtiofs" }
    );
    let mut command = xtask(&["--share", share, "--", "sh", "-c", &script]);
    command.env("BPFLAB_TEST_VAR", "from host");
    let r = run_with(command);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(
        fs::read_to_string(&host_file).unwrap_or_default(),
        "written-in-guest\n",
        "the guest's write is not on the host: {}",
        r.stdout
    );
    fs::remove_file(&host_file).unwrap();
    assert!(r.stdout.contains("Read-only file system"), "{}", r.stdout);
    assert!(r.stdout.contains("etc=1"), "{}", r.stdout);
    assert!(r.stdout.contains("scratch\n"), "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!("{}\n", project().display())),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("var=from host"), "{}", r.stdout);
    assert!(
        r.stdout.ends_with("2\n"),
        "both shares mounted: {}",
        r.stdout
    );
    assert!(
        r.stderr.contains(&format!("host shared over {share}")),
        "{}",
        r.stderr
    );
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn virtiofs_shares_the_project_writable_and_the_rest_read_only() {
    shares_behave("virtiofs");
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn nine_p_shares_the_project_writable_and_the_rest_read_only() {
    shares_behave("9p");
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn without_virtiofsd_the_share_falls_back_to_9p_in_one_line() {
    let mut command = xtask(&["--", "true"]);
    command.env("BPFLAB_VIRTIOFSD", "/nonexistent/virtiofsd");
    let r = run_with(command);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let said: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.contains("sharing over 9p instead"))
        .collect();
    assert_eq!(said.len(), 1, "{}", r.stderr);
    assert!(said[0].contains("/nonexistent/virtiofsd"), "{}", said[0]);
    assert!(r.stderr.contains("host shared over 9p"), "{}", r.stderr);
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn bpftool_creates_and_lists_an_mmapable_array_on_the_mainline_kernel() {
    let r = run(&[
        "--",
        "sh",
        "-c",
        "bpftool map create /sys/fs/bpf/lazy type array key 4 value 8 entries 1024 \
         name lazy flags 1024 && bpftool map show pinned /sys/fs/bpf/lazy",
    ]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("array  name lazy  flags 0x400"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("key 4B  value 8B  max_entries 1024"),
        "{}",
        r.stdout
    );
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn nothing_is_left_after_a_run_or_a_guest_panic() {
    let r = run(&["--", "true"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_nothing_left(r.pid);
    let r = run(&["--", "sh", "-c", "echo c > /proc/sysrq-trigger; sleep 60"]);
    assert_eq!(r.code, VM_FAILED, "{}", r.stderr);
    assert!(r.stderr.contains("the kernel panicked"), "{}", r.stderr);
    assert_nothing_left(r.pid);
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn nothing_is_left_after_the_harness_is_killed() {
    let mut child = KillOnDrop(
        xtask(&["--", "sh", "-c", "echo guest-ready; sleep 600"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = child.0.id();
    let mut stdout = child.0.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("guest-ready") {
        let n = stdout.read(&mut buf).unwrap();
        assert!(n > 0, "the guest never said it was ready");
        seen.extend_from_slice(&buf[..n]);
    }
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    // QEMU's command line names the socket directory too.
    assert_nothing_left(pid);
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn a_shell_gets_a_terminal_with_job_control_and_the_hosts_size() {
    // `script` gives the harness a pseudo-terminal of a known size.
    let inner =
        format!("stty rows 33 cols 101; exec {XTASK} run --kernel mainline --accel tcg --shell");
    let mut child = KillOnDrop(
        Command::new("script")
            .args(["-qfec", &inner, "/dev/null"])
            .current_dir(project())
            .env("SHELL", "/bin/bash")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut input = child.0.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
    let mut stdout = child.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                return;
            }
        }
    });
    let mut seen = String::new();
    let expect = |what: &str, seen: &mut String, limit: Duration| {
        let start = Instant::now();
        while !seen.contains(what) {
            let Some(left) = limit.checked_sub(start.elapsed()) else {
                return false;
            };
            if let Ok(chunk) = rx.recv_timeout(left) {
                seen.push_str(&String::from_utf8_lossy(&chunk));
            }
        }
        true
    };
    let mut send = |text: &[u8]| {
        input.write_all(text).unwrap();
        input.flush().unwrap();
    };
    // Typed before the shell reads its terminal, a line may be lost: ask
    // until the shell answers (the echo shows the sum unevaluated).
    let start = Instant::now();
    loop {
        send(b"echo ready-$((6*7))\n");
        if expect("ready-42", &mut seen, Duration::from_secs(3)) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "no shell: {seen}"
        );
    }
    let expect = |what: &str, seen: &mut String| {
        assert!(
            expect(what, seen, Duration::from_secs(120)),
            "never saw {what:?} on the terminal; saw: {seen}"
        );
    };
    send(b"stty size; echo tty=$(tty)\n");
    expect("tty=/dev/hvc0", &mut seen);
    assert!(seen.contains("33 101"), "the terminal size: {seen}");
    send(b"sleep 300\n");
    std::thread::sleep(Duration::from_secs(2));
    // Ctrl-C reaches the guest's foreground job, not QEMU.
    send(b"\x03");
    send(b"echo after=$?\n");
    expect("after=130", &mut seen);
    send(b"exit 7\n");
    let code = wait_with_deadline(&mut child.0, Duration::from_secs(120));
    assert_eq!(code, 7, "{seen}");
    assert!(!seen.contains("no job control"), "{seen}");
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn vmtest_reads_the_test_programs_over_either_share() {
    // Every test of the plan and the console check.
    let list = Command::new("cargo")
        .args(["run", "-q", "-p", "selftests", "--", "--list"])
        .current_dir(project())
        .output()
        .unwrap();
    assert!(list.status.success(), "selftests --list");
    let planned = String::from_utf8_lossy(&list.stdout).lines().count() + 1;
    for share in ["virtiofs", "9p"] {
        let r = run_with({
            let mut c = Command::new(XTASK);
            c.args([
                "vmtest", "--kernel", "mainline", "--accel", "tcg", "--share", share,
            ])
            .current_dir(project())
            .stdin(Stdio::null());
            c
        });
        let text = format!("{}{}", r.stdout, r.stderr);
        assert_eq!(r.code, 0, "{text}");
        assert!(
            text.contains(&format!("host shared over {share}")),
            "{text}"
        );
        assert!(
            text.contains(&format!("{planned} passed, 0 failed")),
            "{text}"
        );
    }
}

/// Seconds a run of `command` takes, start to exit.
fn timed(command: Command) -> (f64, Ran) {
    let start = Instant::now();
    let r = run_with(command);
    (start.elapsed().as_secs_f64(), r)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The figures README quotes: `run -- true` against the hermetic vmtest
/// boot, and reading a file and walking the project over each share.
/// Printed, not asserted (timings are noisy); what is asserted is that
/// the guest saw what the host has.
#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn share_figures() {
    let mut run_true = Vec::new();
    let mut hermetic = Vec::new();
    for _ in 0..3 {
        let (t, r) = timed(xtask(&["--", "true"]));
        assert_eq!(r.code, 0, "{}", r.stderr);
        run_true.push(t);
        let mut c = Command::new(XTASK);
        c.args([
            "vmtest", "--kernel", "mainline", "--accel", "tcg", "--", "t01",
        ])
        .current_dir(project())
        .stdin(Stdio::null());
        let (t, r) = timed(c);
        assert_eq!(r.code, 0, "{}", r.stderr);
        hermetic.push(t);
    }
    let (a, b) = (median(run_true), median(hermetic));
    println!(
        "FIGURE run -- true: {a:.2} s; vmtest -- t01 (initramfs only): {b:.2} s; ratio {:.2}",
        a / b
    );
    let big = project().join(format!("target/share-read-{}", std::process::id()));
    fs::write(&big, vec![7u8; 100 << 20]).unwrap();
    // target/ left out: ci's other worker builds there meanwhile.
    let count = "find . -path ./target -prune -o -print | wc -l";
    let host_entries = Command::new("sh")
        .args(["-c", count])
        .current_dir(project())
        .output()
        .unwrap();
    let host_entries = String::from_utf8_lossy(&host_entries.stdout)
        .trim()
        .to_string();
    let rel = big.strip_prefix(project()).unwrap().display().to_string();
    let script = format!(
        "t0=$(date +%s%N); wc -c < {rel}; t1=$(date +%s%N); {count}; t2=$(date +%s%N); \
         echo read_ms=$(( (t1 - t0) / 1000000 )) find_ms=$(( (t2 - t1) / 1000000 ))"
    );
    for share in ["virtiofs", "9p"] {
        let r = run(&["--share", share, "--", "sh", "-c", &script]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let lines: Vec<&str> = r.stdout.lines().collect();
        assert_eq!(lines[0], (100u64 << 20).to_string(), "{}", r.stdout);
        // The guest writes nothing meanwhile; the host's count includes
        // the same files (the big one is under target/, read by path).
        assert_eq!(lines[1], host_entries, "{}", r.stdout);
        println!(
            "FIGURE {share}: 100 MiB file and find over {host_entries} entries (target/ left out): {}",
            lines[2]
        );
    }
    fs::remove_file(big).unwrap();
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn a_kernel_splat_fails_a_passing_command_unless_allowed() {
    let warn = "echo WARNING > /sys/kernel/debug/provoke-crash/DIRECT; echo done";
    let r = run(&["--", "sh", "-c", warn]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(r.stdout, "done\n");
    let said = r.stderr.lines().last().unwrap_or_default();
    assert!(
        said.starts_with("bpflab: the kernel reported") && said.contains("WARNING"),
        "the splat is the last thing said: {}",
        r.stderr
    );
    // Symbolized by the tree's decode_stacktrace.sh: the call trace has
    // file:line, which the raw console never has.
    assert!(
        r.stderr.contains("the first splat, with file:line")
            && r.stderr
                .contains("direct_entry (drivers/misc/lkdtm/core.c:"),
        "{}",
        r.stderr
    );
    let r = run(&["--allow-splat", "--", "sh", "-c", warn]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stderr.contains("the kernel reported"), "{}", r.stderr);
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn a_command_that_hangs_is_killed_at_the_timeout() {
    let start = Instant::now();
    let r = run(&["--timeout", "20", "--", "sleep", "600"]);
    assert_eq!(r.code, VM_FAILED, "{}", r.stderr);
    assert!(r.stderr.contains("the guest hung"), "{}", r.stderr);
    assert!(start.elapsed() < Duration::from_secs(60));
    assert_nothing_left(r.pid);
}
