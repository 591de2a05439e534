//! The fresh root as data: what mmdebstrap is asked for, what is copied
//! from the machine's configuration, what is mounted, and which commands
//! run inside. Pure functions, unit-tested without a root.

use std::path::{Path, PathBuf};

/// What a new machine of ours comes with besides Debian's required
/// packages: a C compiler that can link (a Rust toolchain needs it), make,
/// git, python3 and the CA certificates. Nothing else is in the root.
pub const ROOT_PACKAGES: &[&str] = &[
    "gcc",
    "libc6-dev",
    "make",
    "git",
    "python3",
    "ca-certificates",
];

/// The machine's own configuration a new machine has too: name
/// resolution and the registries' settings. Copied when present; these
/// are files of the machine's setup, not of any package.
pub const MACHINE_CONFIG: &[&str] = &[
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/npmrc",
    "/etc/pip.conf",
];

/// Environment variables that point the package clients at the machine's
/// CA bundle; passed into the root when set.
pub const CA_ENV: &[&str] = &[
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "NODE_EXTRA_CA_CERTS",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
];

/// Set inside a fresh-root check (to its form): the record of that check
/// is being made, so ci's unit step filters out the test that reads the
/// last one (`ci::steps::RECORD_TEST`); the test itself never reads it.
pub const INSIDE_ENV: &str = "BPFLAB_FRESH_ROOT";

/// Where the host's Rust toolchain appears inside the root, read-only.
pub const RUSTUP_IN_ROOT: &str = "/opt/rust/rustup";
pub const CARGO_BIN_IN_ROOT: &str = "/opt/rust/cargo-bin";
/// The toolchain's commands, each rustup under another name.
const RUSTUP_PROXIES: [&str; 7] = [
    "cargo",
    "cargo-clippy",
    "cargo-fmt",
    "clippy-driver",
    "rustc",
    "rustdoc",
    "rustfmt",
];
/// Where the fresh clone of the project lives inside the root.
pub const PROJECT_IN_ROOT: &str = "/root/bpf-lazy-mmap";
/// The cache inside the root, relative to it: the default under the
/// `HOME` of `inner_env`, which sets no cache variable.
pub const CACHE_IN_ROOT: &str = "root/.cache/bpflab";

/// Which commands run inside: README's two (`Full`), or a shorter form
/// that still installs everything and builds one kernel and test_progs.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Form {
    Full,
    Quick,
    /// The caller's own command (`fresh-root -- CMD`): never recorded.
    Custom,
}

impl Form {
    pub fn name(self) -> &'static str {
        match self {
            Form::Full => "full",
            Form::Quick => "quick",
            Form::Custom => "custom",
        }
    }

    /// The commands, in order; the first that fails ends the run.
    pub fn commands(self) -> &'static [&'static str] {
        match self {
            // ci first, so that it starts with an empty cache as on a
            // new CI machine and its times are a cold run's; vmtest
            // then boots the kernels ci built.
            Form::Full => &["cargo xtask ci", "cargo xtask vmtest"],
            // ci's cheap steps install every host tool they need; the
            // kselftest run (ci's runners: test_maps alone takes 11
            // minutes) installs clang/LLVM/lld and virtiofsd, builds
            // the mainline kernel and test_progs and boots it, vmtest boots
            // it with the plan, the fuzzer builds its libbpf client, and
            // the developer flags' tests install gdb.
            Form::Quick => &[
                "cargo xtask ci --step fmt,clippy,unit,workflow-lint,patches",
                "cargo xtask kselftest --kernel mainline --runner test_progs,test_verifier",
                "cargo xtask vmtest --kernel mainline",
                "cargo xtask fuzz --kernel mainline --seconds 30 --seed 1",
                "cargo xtask ci --step devflags",
            ],
            Form::Custom => &[],
        }
    }
}

/// The host side of the root: where it is and where the toolchain comes from.
#[derive(Debug, Clone)]
pub struct RootPlan {
    pub root: PathBuf,
    pub rustup_home: PathBuf,
    pub cargo_bin: PathBuf,
}

/// mmdebstrap's arguments: Debian's minimal base (essential and required
/// packages, apt) plus `ROOT_PACKAGES`, from the machine's apt sources
/// and with its apt settings.
pub fn mmdebstrap_args(
    suite: &str,
    root: &Path,
    sources: &[PathBuf],
    apt_conf: &[PathBuf],
) -> Vec<String> {
    let mut args = vec![
        "--variant=minbase".to_string(),
        "--mode=root".to_string(),
        format!("--include={}", ROOT_PACKAGES.join(",")),
    ];
    args.extend(apt_conf.iter().map(|c| format!("--aptopt={}", c.display())));
    args.push(suite.to_string());
    args.push(root.display().to_string());
    args.extend(sources.iter().map(|s| s.display().to_string()));
    args
}

/// Single-quotes `s` for sh.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The environment inside: a login's basics, the toolchain through the
/// read-only mounts, a writable CARGO_HOME of the root's own, and the CA
/// variables the host sets.
pub fn inner_env(form: Form, host: impl Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    let mut env = vec![
        ("HOME".to_string(), "/root".to_string()),
        ("USER".to_string(), "root".to_string()),
        (
            "PATH".to_string(),
            format!("/root/.cargo/bin:{CARGO_BIN_IN_ROOT}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
        ),
        ("RUSTUP_HOME".to_string(), RUSTUP_IN_ROOT.to_string()),
        ("CARGO_HOME".to_string(), "/root/.cargo".to_string()),
        (INSIDE_ENV.to_string(), form.name().to_string()),
    ];
    for name in CA_ENV.iter().chain(&["TERM", "LANG", "CI"]) {
        if let Some(value) = host(name) {
            env.push((name.to_string(), value));
        }
    }
    env
}

/// What a read-only bind mount into the root binds.
#[derive(Clone, Copy)]
enum Bound {
    /// A directory with the mounts below it.
    Tree,
    Dir,
    File,
}

/// The script `unshare --mount --pid --fork` runs: private mounts (gone
/// with the namespace, whatever way it ends), the root bound onto itself,
/// /dev, /sys and the
/// toolchain bound read-only, a /proc of the new PID namespace, then the
/// command chrooted with exactly `env`.
pub fn enter_script(plan: &RootPlan, env: &[(String, String)], command: &str) -> String {
    let r = plan.root.display().to_string();
    let at = |p: &str| quote(&format!("{r}{p}"));
    let bind_ro = |from: &Path, to: &str, what: Bound| {
        let dst = at(to);
        let (point, bind) = match what {
            Bound::Tree => ("mkdir -p", "rbind"),
            Bound::Dir => ("mkdir -p", "bind"),
            Bound::File => ("touch", "bind"),
        };
        format!(
            "{point} {dst}\nmount --{bind} {src} {dst}\nmount -o remount,bind,ro {dst}\n",
            src = quote(&from.display().to_string()),
        )
    };
    let mut s = String::from("set -eu\nmount --make-rprivate /\n");
    // The root a mount of its own, as / is on a machine: virtiofsd, which
    // shares /, needs every mount's root inside what it shares.
    s += &format!("mount --bind {} {}\n", quote(&r), quote(&r));
    s += &bind_ro(Path::new("/dev"), "/dev", Bound::Tree);
    s += &bind_ro(Path::new("/sys"), "/sys", Bound::Tree);
    s += &format!(
        "mkdir -p {p}\nmount -t proc -o ro,nosuid,nodev,noexec proc {p}\n",
        p = at("/proc")
    );
    s += &bind_ro(&plan.rustup_home, RUSTUP_IN_ROOT, Bound::Dir);
    // Only rustup and its proxies: whatever else the host installed into
    // its cargo bin (virtiofsd) must be installed again inside.
    s += &format!("mkdir -p {}\n", at(CARGO_BIN_IN_ROOT));
    s += &bind_ro(
        &plan.cargo_bin.join("rustup"),
        &format!("{CARGO_BIN_IN_ROOT}/rustup"),
        Bound::File,
    );
    for proxy in RUSTUP_PROXIES {
        s += &format!(
            "ln -sfn rustup {}\n",
            at(&format!("{CARGO_BIN_IN_ROOT}/{proxy}"))
        );
    }
    let vars: Vec<String> = env
        .iter()
        .map(|(k, v)| quote(&format!("{k}={v}")))
        .collect();
    s += &format!(
        "exec chroot {} /usr/bin/env -i {} /bin/bash -c {}\n",
        quote(&r),
        vars.join(" "),
        quote(command)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> RootPlan {
        RootPlan {
            root: "/c/fresh-root/root".into(),
            rustup_home: "/home/u/.rustup".into(),
            cargo_bin: "/home/u/.cargo/bin".into(),
        }
    }

    #[test]
    fn mmdebstrap_takes_the_machines_sources_and_apt_settings() {
        let a = mmdebstrap_args(
            "bookworm",
            Path::new("/r"),
            &["/etc/apt/sources.list.d/debian.sources".into()],
            &["/etc/apt/apt.conf.d/99x".into()],
        );
        assert_eq!(
            a,
            [
                "--variant=minbase",
                "--mode=root",
                "--include=gcc,libc6-dev,make,git,python3,ca-certificates",
                "--aptopt=/etc/apt/apt.conf.d/99x",
                "bookworm",
                "/r",
                "/etc/apt/sources.list.d/debian.sources",
            ]
        );
    }

    #[test]
    fn quoting_survives_single_quotes() {
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn inside_only_the_toolchain_and_ca_variables_come_from_the_host() {
        let host = |k: &str| match k {
            "SSL_CERT_FILE" => Some("/etc/ssl/certs/ca-certificates.crt".to_string()),
            "PATH" | "RUSTUP_HOME" | "BPFLAB_CACHE" => Some("/host/thing".to_string()),
            _ => None,
        };
        let env = inner_env(Form::Quick, host);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(
            get("SSL_CERT_FILE"),
            Some("/etc/ssl/certs/ca-certificates.crt")
        );
        assert_eq!(get("RUSTUP_HOME"), Some(RUSTUP_IN_ROOT));
        assert!(get("PATH")
            .unwrap()
            .starts_with("/root/.cargo/bin:/opt/rust/cargo-bin:"));
        assert_eq!(get("BPFLAB_CACHE"), None, "the cache inside starts empty");
        assert_eq!(get(INSIDE_ENV), Some("quick"));
    }

    #[test]
    fn the_script_mounts_read_only_then_chroots_with_exactly_env() {
        let env = vec![("HOME".to_string(), "/root".to_string())];
        let s = enter_script(&plan(), &env, "cargo xtask ci");
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[1], "mount --make-rprivate /", "before any mount");
        assert_eq!(
            lines[2], "mount --bind '/c/fresh-root/root' '/c/fresh-root/root'",
            "the root is a mount root, then the rest is mounted in it"
        );
        for dst in [
            "/dev",
            "/sys",
            "/opt/rust/rustup",
            "/opt/rust/cargo-bin/rustup",
        ] {
            let ro = format!("mount -o remount,bind,ro '/c/fresh-root/root{dst}'");
            assert!(lines.contains(&ro.as_str()), "{dst} not read-only:\n{s}");
        }
        assert!(s.contains("mount --bind '/home/u/.rustup' '/c/fresh-root/root/opt/rust/rustup'"));
        assert!(
            !s.contains("'/home/u/.cargo/bin' "),
            "the host's cargo bin (virtiofsd) is not shown whole:\n{s}"
        );
        assert!(s.contains("ln -sfn rustup '/c/fresh-root/root/opt/rust/cargo-bin/cargo'"));
        assert!(s.contains("mount -t proc -o ro,"));
        assert_eq!(
            *lines.last().unwrap(),
            "exec chroot '/c/fresh-root/root' /usr/bin/env -i 'HOME=/root' /bin/bash -c 'cargo xtask ci'"
        );
    }

    #[test]
    fn the_quick_forms_kselftest_runs_cis_runners() {
        // The quick form spells ci's runner list out (its commands are
        // static strings): this holds the two together.
        let want = format!("--runner {}", crate::ci::steps::CI_RUNNERS);
        assert!(
            Form::Quick
                .commands()
                .iter()
                .any(|c| c.starts_with("cargo xtask kselftest ") && c.ends_with(&want)),
            "the quick form's kselftest does not run ci's runners ({want})"
        );
    }

    #[test]
    fn the_full_form_is_readmes_two_commands() {
        let readme = std::fs::read_to_string(crate::project::root().join("README.md")).unwrap();
        for c in Form::Full.commands() {
            assert!(
                readme.contains(&format!("\n{c} ")),
                "README does not give `{c}`"
            );
        }
    }
}
