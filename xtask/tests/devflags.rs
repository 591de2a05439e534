//! The developer's flags for real: `--config` fragments, `--network
//! user` and `--gdb`, each on a booted kernel, each held against the
//! kernel without it. They boot kernels, so they are ignored by a plain
//! `cargo test` and run by `cargo xtask ci` (`cargo test -p xtask --test
//! devflags -- --ignored --test-threads=1`). The gdb test needs gdb on
//! the host.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

mod common;
use common::{project, run_to_end, wait_with_deadline, KillOnDrop, Ran};

const XTASK: &str = env!("CARGO_BIN_EXE_xtask");

fn xtask(args: &[&str]) -> Command {
    let mut c = Command::new(XTASK);
    c.args(args)
        .current_dir(project())
        .env("BPFLAB_CONFIG", "")
        .stdin(Stdio::null());
    c
}

/// `run` on the mainline kernel (and a fragment's build of it, which the
/// first call may have to make).
fn run(args: &[&str]) -> Ran {
    let mut all = vec!["run", "--kernel", "mainline", "--accel", "tcg"];
    all.extend(args);
    run_to_end(xtask(&all), Duration::from_secs(1800))
}

/// The plain mainline kernel's bzImage in the cache, and when it was built.
fn plain_mainline_image() -> (PathBuf, SystemTime) {
    mainline_image(&[])
}

/// The mainline kernel's bzImage with `more` build-kernel flags (built if
/// it is not), and when it was built.
fn mainline_image(more: &[&str]) -> (PathBuf, SystemTime) {
    let mut args = vec!["build-kernel", "--kernel", "mainline", "--json"];
    args.extend(more);
    let r = run_to_end(xtask(&args), Duration::from_secs(1800));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let manifest: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let image = PathBuf::from(manifest["kernels"][0]["bzimage"].as_str().unwrap());
    let built = fs::metadata(&image).unwrap().modified().unwrap();
    (image, built)
}

/// The guest kernel's own CONFIG_TEST_BITOPS line.
const CONFIG_OF_GUEST: &str = "zcat /proc/config.gz | grep -E '^CONFIG_TEST_BITOPS=' || true";

/// A fragment of the developer's: one test module (lib/test_bitops.c),
/// which no other object depends on, at a path of this run's own, so its
/// build directory (keyed by the path) is new and starts from a copy.
fn bitops_fragment() -> PathBuf {
    let dir = project().join(format!("target/devflags/{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bitops.config");
    fs::write(&path, "CONFIG_TEST_BITOPS=m\n").unwrap();
    path
}

/// The build directories of `tree` whose names contain `part`.
fn build_dirs(tree: &std::path::Path, part: &str) -> Vec<PathBuf> {
    fs::read_dir(tree)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().contains(part))
        .collect()
}

fn mtime(p: &std::path::Path) -> SystemTime {
    fs::metadata(p).unwrap().modified().unwrap()
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn a_config_fragment_gives_a_kernel_of_its_own_and_leaves_the_others() {
    let (image, built) = plain_mainline_image();
    let tree = image.ancestors().nth(5).unwrap().to_path_buf();
    let plain_objtool = mtime(
        &image
            .ancestors()
            .nth(4)
            .unwrap()
            .join("tools/objtool/objtool"),
    );
    let fragment = bitops_fragment();
    let started = std::time::Instant::now();
    let with = run(&[
        "--config",
        fragment.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        CONFIG_OF_GUEST,
    ]);
    eprintln!(
        "run --config, the kernel built if it was not: {:.0?}",
        started.elapsed()
    );
    assert_eq!(with.code, 0, "{}", with.stderr);
    assert_eq!(
        with.stdout, "CONFIG_TEST_BITOPS=m\n",
        "the fragment's option in the kernel it built"
    );
    assert!(
        with.stderr
            .contains("[mainline+bitops] starting from mainline's build"),
        "the kernel is named after its fragment, and starts from a copy:\n{}",
        with.stderr
    );
    // The copy's objtool stood (its .cmd files pointed at the copy):
    // had it been rebuilt, so would every object.
    let (bitops, _) = mainline_image(&["--config", fragment.to_str().unwrap()]);
    let ours = bitops.ancestors().nth(4).unwrap().to_path_buf();
    assert_eq!(ours.parent(), Some(tree.as_path()), "{}", ours.display());
    assert_eq!(
        mtime(&ours.join("tools/objtool/objtool")),
        plain_objtool,
        "objtool was rebuilt in the copy"
    );
    let without = run(&["--", "sh", "-c", CONFIG_OF_GUEST]);
    assert_eq!(without.code, 0, "{}", without.stderr);
    assert_eq!(without.stdout, "", "the plain kernel has no test_bitops");
    assert_eq!(
        fs::metadata(&image).unwrap().modified().unwrap(),
        built,
        "the plain mainline kernel was rebuilt for a fragment it does not have"
    );

    // This run's kernel is a copy of a gigabyte: not kept.
    fs::remove_dir_all(&ours).unwrap();
    fs::remove_dir_all(fragment.parent().unwrap()).unwrap();
    let r = run(&["--config", "no/such.config", "--", "true"]);
    assert!(
        r.code == 125 && r.stderr.contains("--config no/such.config: no such file"),
        "exit {}: {}",
        r.code,
        r.stderr
    );
}

#[test]
#[ignore = "builds a kernel's configuration: run by cargo xtask ci"]
fn a_fragments_option_that_cannot_be_set_is_named_and_leaves_nothing() {
    // An option that cannot be set is named with its fragment, and its
    // build directory does not stay behind.
    let bad = project().join("target/devflags/bad.config");
    fs::create_dir_all(bad.parent().unwrap()).unwrap();
    fs::write(
        &bad,
        "CONFIG_TEST_BITOPS=m\nCONFIG_BPFLAB_NO_SUCH_OPTION=y\n",
    )
    .unwrap();
    let r = run_to_end(
        xtask(&[
            "build-kernel",
            "--kernel",
            "mainline",
            "--config",
            bad.to_str().unwrap(),
        ]),
        Duration::from_secs(600),
    );
    assert!(
        r.code == 3
            && r.stderr.contains("did not survive olddefconfig")
            && r.stderr
                .contains("CONFIG_BPFLAB_NO_SUCH_OPTION=y (got n) from bad.config"),
        "exit {}: {}",
        r.code,
        r.stderr
    );
    let tree = plain_mainline_image()
        .0
        .ancestors()
        .nth(5)
        .unwrap()
        .to_path_buf();
    let left = build_dirs(&tree, "+bad");
    assert!(
        left.is_empty(),
        "left behind in {}: {left:?}",
        tree.display()
    );
}

/// A TCP server on the host's loopback that greets one client and
/// returns the line it sends back.
fn greeter() -> (u16, std::thread::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        conn.write_all(b"hello-from-host\n").unwrap();
        let mut line = String::new();
        BufReader::new(conn).read_line(&mut line).unwrap();
        line
    });
    (port, served)
}

/// The host's own answer for `name`, as getent prints it.
fn host_lookup(name: &str) -> String {
    let out = Command::new("getent")
        .args(["ahostsv4", name])
        .output()
        .unwrap();
    first_address(&String::from_utf8_lossy(&out.stdout))
}

fn first_address(getent: &str) -> String {
    getent
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn network_user_gives_an_address_a_route_to_the_host_and_dns() {
    // The name apt installs from: a host that can run these tests
    // resolves it.
    let name = "deb.debian.org";
    let want = host_lookup(name);
    assert!(
        !want.is_empty(),
        "the host cannot resolve {name}: no DNS for QEMU to forward"
    );
    let (port, served) = greeter();
    let script = format!(
        "ls /sys/class/net | tr '\\n' ' '; echo; cat /etc/resolv.conf; \
         awk '$2 == \"00000000\" {{print \"default via\", $3}}' /proc/net/route; \
         grep -c '10.0.2.15' /proc/net/fib_trie; \
         getent ahostsv4 {name} | head -1; \
         exec 3<>/dev/tcp/10.0.2.2/{port}; read -r greeting <&3; echo \"$greeting\"; \
         echo from-guest >&3"
    );
    let r = run(&["--network", "user", "--", "bash", "-c", &script]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 6, "{}", r.stdout);
    assert!(lines[0].contains("eth0"), "interfaces: {}", lines[0]);
    assert_eq!(
        lines[1], "nameserver 10.0.2.3",
        "resolv.conf from QEMU's DHCP"
    );
    assert_eq!(lines[2], "default via 0202000A", "the route to 10.0.2.2");
    assert_ne!(lines[3], "0", "10.0.2.15 is the guest's address");
    assert_eq!(first_address(lines[4]), want, "{name} through QEMU's DNS");
    assert_eq!(lines[5], "hello-from-host", "a TCP connection to the host");
    assert_eq!(served.join().unwrap(), "from-guest\n");

    // Without the flag: the same kernel, loopback alone.
    let r = run(&["--", "sh", "-c", "ls /sys/class/net"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, "lo\n"), "{}", r.stderr);
}

/// The gdb command `--gdb` printed: the line after "attach with:".
fn printed_gdb_command(stderr: &mpsc::Receiver<String>) -> String {
    let mut seen = Vec::new();
    while let Ok(line) = stderr.recv_timeout(Duration::from_secs(900)) {
        if seen
            .last()
            .is_some_and(|l: &String| l.ends_with("attach with:"))
        {
            return line.trim().to_string();
        }
        seen.push(line);
    }
    panic!("no gdb command printed:\n{}", seen.join("\n"));
}

/// Runs the printed gdb command in batch: break in the fault handler,
/// continue, a backtrace and a helper, detach; gdb's output.
fn gdb_session(attach: &str) -> String {
    let session = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{attach} -batch -ex 'break array_map_mmap_fault' -ex continue -ex bt \
             -ex lx-version -ex 'delete' -ex detach"
        ))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&session.stdout),
        String::from_utf8_lossy(&session.stderr)
    )
}

#[test]
#[ignore = "boots a kernel: run by cargo xtask ci"]
fn gdb_stops_in_the_fault_handler_with_a_backtrace_and_the_helpers() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let selftests = project().join("target/guest/x86_64-unknown-linux-gnu/release/selftests");
    let mut command = xtask(&[
        "run",
        "--kernel",
        "mainline",
        "--accel",
        "tcg",
        "--gdb",
        &port.to_string(),
        "--",
        selftests.to_str().unwrap(),
        "--kernel",
        "mainline",
        "t02",
    ]);
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut xt = KillOnDrop(command.spawn().unwrap());
    let (tx, rx) = mpsc::channel();
    let err = xt.0.stderr.take().unwrap();
    let relay = std::thread::spawn(move || {
        let mut all = String::new();
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            all.push_str(&line);
            all.push('\n');
            let _ = tx.send(line);
        }
        all
    });
    let mut out = xt.0.stdout.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).ok();
        s
    });
    let attach = printed_gdb_command(&rx);
    assert!(attach.contains("vmlinux") && attach.contains("add-auto-load-safe-path"));
    let gdb = gdb_session(&attach);
    // gdb gone without the breakpoint leaves the guest stopped for good:
    // say what gdb said now rather than wait out the deadline.
    assert!(
        gdb.contains("Breakpoint 1, array_map_mmap_fault"),
        "the breakpoint was not hit:\n{gdb}"
    );
    let code = wait_with_deadline(&mut xt.0, Duration::from_secs(600));
    let (stderr, stdout) = (relay.join().unwrap(), out.join().unwrap());
    assert!(
        gdb.contains("Breakpoint 1, array_map_mmap_fault"),
        "the breakpoint was not hit:\n{gdb}"
    );
    assert!(
        gdb.contains("#1 ") && gdb.contains("__do_fault"),
        "no backtrace through the fault path:\n{gdb}"
    );
    assert!(
        gdb.contains("Linux version 7."),
        "lx-version (scripts/gdb) did not run:\n{gdb}"
    );
    assert_eq!(
        code, 0,
        "the guest went on after detach:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("t02"), "{stdout}");
}
