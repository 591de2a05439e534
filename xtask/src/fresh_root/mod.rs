//! The fresh-root check (`cargo xtask fresh-root`): proves that the harness installs everything
//! it needs. A minimal Debian root (mmdebstrap, from this machine's apt
//! sources) holds only what a new machine comes with; the Rust toolchain
//! is bound in read-only; README's commands run there from a fresh clone
//! with an empty cache. Nothing of the host's packages is visible inside.

mod certs;
mod plan;
mod record;

pub use plan::{Form, INSIDE_ENV};

use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::project;
use crate::util::spawn_tied;
use plan::{RootPlan, CACHE_IN_ROOT, PROJECT_IN_ROOT};
use record::CommandResult;
pub use record::Summary;

/// One fresh-root check: which commands, where the root goes, and what
/// the harness declares (recorded with the result).
pub struct Check {
    pub form: Form,
    pub commands: Vec<String>,
    /// Holds the root, the lock and each check's logs (`runs/`).
    pub base: PathBuf,
    pub declared: Vec<String>,
    /// Keep the root after a passing check (a failing one's is kept).
    pub keep: bool,
}

/// A finished check: its summary, and where its log and summary are.
pub struct Checked {
    pub summary: Summary,
    pub run_dir: PathBuf,
    pub log: PathBuf,
}

/// Makes the root, clones the project into it, runs the commands there
/// (stopping at the first that fails) and sums up.
pub fn check(c: &Check) -> Result<Checked> {
    let started = Instant::now();
    fs::create_dir_all(&c.base).with_context(|| format!("creating {}", c.base.display()))?;
    let _lock = lock(&c.base)?;
    let run_dir = project::new_run_dir(&c.base, c.form.name())?;
    let plan = RootPlan {
        root: c.base.join("root"),
        rustup_home: toolchain_dir("RUSTUP_HOME", ".rustup")?,
        cargo_bin: toolchain_dir("CARGO_HOME", ".cargo")?.join("bin"),
    };
    let commit = head_commit()?;
    let bootstrap_secs = bootstrap(&plan, &run_dir)?;
    clone_project(&plan.root)?;
    let env = plan::inner_env(c.form, |k| std::env::var(k).ok());
    let before = query(&plan, &env, "apt-mark showmanual")?;
    let at_start = query(&plan, &env, PACKAGES)?.len();
    crate::status!(
        "fresh-root",
        "{at_start} packages in the root; running {:?}",
        c.commands
    );
    let log = run_dir.join("log.txt");
    let mut results = Vec::new();
    for command in &c.commands {
        let result = run_inside(&plan, &env, command, &log)?;
        let ok = result.exit == Some(0);
        results.push(result);
        if !ok {
            break;
        }
    }
    let after = query(&plan, &env, "apt-mark showmanual")?;
    let at_end = query(&plan, &env, PACKAGES)?.len();
    let passed = results.len() == c.commands.len() && results.iter().all(|r| r.exit == Some(0));
    let summary = Summary {
        form: c.form,
        commit,
        date: today()?,
        bootstrap_secs,
        packages_at_start: at_start,
        packages_at_end: at_end,
        commands: results,
        installed: record::added(&before, &after),
        declared: c.declared.clone(),
        passed,
        total_secs: started.elapsed().as_secs(),
        // Only the full form runs the whole ci; the quick one's partial
        // ci runs are no cold run.
        ci_times: (c.form == Form::Full)
            .then(|| record::last_ci_times(&plan.root.join(CACHE_IN_ROOT)))
            .flatten(),
    };
    if passed && !c.keep {
        crate::status!("fresh-root", "removing the root {}", plan.root.display());
        fs::remove_dir_all(&plan.root)
            .with_context(|| format!("removing {}", plan.root.display()))?;
    } else {
        crate::status!("fresh-root", "the root is kept at {}", plan.root.display());
    }
    Ok(Checked {
        summary,
        run_dir,
        log,
    })
}

/// Every installed package, one a line.
const PACKAGES: &str = "dpkg-query -W -f '${Package}\\n'";

/// One check at a time per directory: a second would remove the first's root.
fn lock(base: &Path) -> Result<File> {
    let path = base.join("lock");
    let file = File::create(&path).with_context(|| format!("opening {}", path.display()))?;
    file.try_lock().map_err(|_| {
        anyhow::anyhow!(
            "another fresh-root check is running in {}: wait for it",
            base.display()
        )
    })?;
    Ok(file)
}

/// `$VAR`, else `~/<fallback>`: where rustup keeps the toolchain.
fn toolchain_dir(var: &str, fallback: &str) -> Result<PathBuf> {
    let dir = match std::env::var_os(var) {
        Some(v) => PathBuf::from(v),
        None => PathBuf::from(std::env::var_os("HOME").context("HOME is not set")?).join(fallback),
    };
    if !dir.is_dir() {
        bail!(
            "{} is missing: the fresh root binds the host's rustup toolchain from there",
            dir.display()
        );
    }
    Ok(dir)
}

fn head_commit() -> Result<String> {
    let sh = project::shell()?;
    let commit = xshell::cmd!(sh, "git rev-parse HEAD")
        .read()
        .context("reading the project's HEAD")?;
    let dirty = xshell::cmd!(sh, "git status --porcelain --untracked-files=no")
        .read()
        .context("reading the project's git status")?;
    if !dirty.is_empty() {
        crate::status!(
            "fresh-root",
            "uncommitted changes are not in the fresh clone: it checks {commit}"
        );
    }
    Ok(commit)
}

fn today() -> Result<String> {
    let sh = project::shell()?;
    xshell::cmd!(sh, "date -u +%Y-%m-%d")
        .read()
        .context("reading the date")
}

/// A new root in place of any old one: mmdebstrap, then the machine's
/// configuration. Returns how long mmdebstrap took.
fn bootstrap(plan: &RootPlan, run_dir: &Path) -> Result<u64> {
    if plan.root.exists() {
        crate::status!(
            "fresh-root",
            "removing the previous root {}",
            plan.root.display()
        );
        fs::remove_dir_all(&plan.root)
            .with_context(|| format!("removing {}", plan.root.display()))?;
    }
    let suite = debian_suite()?;
    let args = plan::mmdebstrap_args(&suite, &plan.root, &apt_sources()?, &own_apt_settings()?);
    let log = run_dir.join("mmdebstrap.log");
    crate::status!(
        "fresh-root",
        "mmdebstrap {} (log: {})",
        args.join(" "),
        log.display()
    );
    let t = Instant::now();
    let out = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let status = Command::new("mmdebstrap")
        .args(&args)
        .stdout(out.try_clone()?)
        .stderr(out)
        .status()
        .context("running mmdebstrap")?;
    if !status.success() {
        let text = fs::read_to_string(&log).unwrap_or_default();
        bail!(
            "mmdebstrap failed ({status}): {}",
            crate::util::last_lines(&text, 5)
        );
    }
    let secs = t.elapsed().as_secs();
    copy_machine_config(&plan.root)?;
    crate::status!("fresh-root", "root made in {secs}s");
    Ok(secs)
}

/// This machine's Debian release (`VERSION_CODENAME`), which the root gets.
fn debian_suite() -> Result<String> {
    let text = fs::read_to_string("/etc/os-release").context("reading /etc/os-release")?;
    let field = |k: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(k))
            .map(|v| v.trim_matches('"').to_string())
    };
    if field("ID=").as_deref() != Some("debian") {
        bail!("fresh-root builds a Debian root from this machine's apt sources; this machine is not Debian");
    }
    field("VERSION_CODENAME=").context("/etc/os-release has no VERSION_CODENAME")
}

/// The enabled apt source files: sources.list if it has an entry, and
/// every `*.list`/`*.sources` in sources.list.d.
fn apt_sources() -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let main = Path::new("/etc/apt/sources.list");
    if fs::read_to_string(main)
        .unwrap_or_default()
        .lines()
        .any(|l| l.trim_start().starts_with("deb"))
    {
        found.push(main.to_path_buf());
    }
    found.extend(
        files_in("/etc/apt/sources.list.d")?
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "list" || e == "sources")),
    );
    if found.is_empty() {
        bail!("this machine has no apt sources (/etc/apt/sources.list, /etc/apt/sources.list.d)");
    }
    Ok(found)
}

/// apt settings of the machine's own (no package owns them: a snapshot's
/// validity, a proxy, ...).
fn own_apt_settings() -> Result<Vec<PathBuf>> {
    let mut own = Vec::new();
    for path in files_in("/etc/apt/apt.conf.d")? {
        let owned = Command::new("dpkg")
            .arg("-S")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .context("running dpkg -S")?
            .success();
        if !owned {
            own.push(path);
        }
    }
    Ok(own)
}

fn files_in(dir: &str) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = match crate::util::gone_is_none(fs::read_dir(dir)) {
        Ok(None) => return Ok(Vec::new()),
        Ok(Some(entries)) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect(),
        Err(e) => return Err(e).with_context(|| format!("listing {dir}")),
    };
    files.sort();
    Ok(files)
}

/// Name resolution, the registries' settings and the machine's own CA
/// certificates, as a new machine has them.
fn copy_machine_config(root: &Path) -> Result<()> {
    let home_npmrc = std::env::var_os("HOME").map(|h| Path::new(&h).join(".npmrc"));
    let mut copies: Vec<(PathBuf, PathBuf)> = plan::MACHINE_CONFIG
        .iter()
        .map(|p| (PathBuf::from(p), root.join(p.trim_start_matches('/'))))
        .collect();
    copies.extend(home_npmrc.map(|p| (p, root.join("root/.npmrc"))));
    for (from, to) in copies.into_iter().filter(|(from, _)| from.is_file()) {
        fs::copy(&from, &to)
            .with_context(|| format!("copying {} into the root", from.display()))?;
    }
    let bundle = Path::new("/etc/ssl/certs/ca-certificates.crt");
    let Some(host) = crate::util::gone_is_none(fs::read_to_string(bundle))
        .with_context(|| format!("reading {}", bundle.display()))?
    else {
        return Ok(());
    };
    let mut packaged = String::new();
    for cert in crt_files(Path::new("/usr/share/ca-certificates"))? {
        packaged +=
            &fs::read_to_string(&cert).with_context(|| format!("reading {}", cert.display()))?;
    }
    let extra = certs::missing_from(&host, &packaged);
    if extra.is_empty() {
        return Ok(());
    }
    let dir = root.join("usr/local/share/ca-certificates");
    fs::create_dir_all(&dir)?;
    for (i, cert) in extra.iter().enumerate() {
        fs::write(dir.join(format!("machine-{}.crt", i + 1)), cert)?;
    }
    let status = Command::new("chroot")
        .arg(root)
        .args(["update-ca-certificates", "--fresh"])
        .stdout(Stdio::null())
        .status()
        .context("running update-ca-certificates in the root")?;
    if !status.success() {
        bail!("update-ca-certificates failed in the root ({status})");
    }
    crate::status!(
        "fresh-root",
        "{} CA certificate(s) of this machine's added to the root",
        extra.len()
    );
    Ok(())
}

/// The `*.crt` files under `dir`, recursively (none if it is missing).
fn crt_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut found = Vec::new();
    let Some(entries) = crate::util::gone_is_none(fs::read_dir(dir))
        .with_context(|| format!("listing {}", dir.display()))?
    else {
        return Ok(found);
    };
    for entry in entries {
        let path = entry?.path();
        if path.is_dir() {
            found.extend(crt_files(&path)?);
        } else if path.extension().is_some_and(|e| e == "crt") {
            found.push(path);
        }
    }
    Ok(found)
}

/// A fresh clone of the project's HEAD, inside the root.
fn clone_project(root: &Path) -> Result<()> {
    let dest = root.join(PROJECT_IN_ROOT.trim_start_matches('/'));
    let src = project::root();
    let sh = project::shell()?;
    xshell::cmd!(sh, "git clone --quiet --no-hardlinks {src} {dest}")
        .run()
        .context("cloning the project into the root")
}

/// `unshare` running the enter script for `command`: a mount and PID
/// namespace of its own, so mounts and processes go with it.
fn enter(plan: &RootPlan, env: &[(String, String)], command: &str) -> Command {
    let mut c = Command::new("unshare");
    c.args([
        "--mount",
        "--pid",
        "--fork",
        "--kill-child",
        "/bin/sh",
        "-c",
    ])
    .arg(plan::enter_script(plan, env, command))
    .stdin(Stdio::null());
    c
}

/// A short command's stdout lines, inside the root.
fn query(plan: &RootPlan, env: &[(String, String)], command: &str) -> Result<Vec<String>> {
    let out = enter(plan, env, command)
        .output()
        .with_context(|| format!("running `{command}` in the root"))?;
    if !out.status.success() {
        bail!(
            "`{command}` failed in the root: {}",
            crate::util::output_text(&out).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect())
}

/// One of the form's commands in the fresh clone, its output shown and
/// appended to the log.
fn run_inside(
    plan: &RootPlan,
    env: &[(String, String)],
    command: &str,
    log: &Path,
) -> Result<CommandResult> {
    let mut file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("opening {}", log.display()))?;
    let banner = format!("===== fresh root: {command} =====");
    println!("{banner}");
    writeln!(file, "{banner}")?;
    let t = Instant::now();
    let full = format!("exec 2>&1; cd {PROJECT_IN_ROOT} && {command}");
    let mut child = spawn_tied(enter(plan, env, &full).stdout(Stdio::piped()))
        .context("starting unshare for the fresh root")?;
    let mut closing = None;
    let stdout = child.stdout.take().context("no stdout from unshare")?;
    for line in BufReader::new(stdout).split(b'\n') {
        let line =
            String::from_utf8_lossy(&line.context("reading the command's output")?).into_owned();
        println!("{line}");
        writeln!(file, "{line}")?;
        if let Some(c) = record::closing_line(&line) {
            closing = Some(c.to_string());
        }
    }
    let status = child
        .wait()
        .context("waiting for the command in the root")?;
    let result = CommandResult {
        command: command.to_string(),
        exit: status.code(),
        secs: t.elapsed().as_secs(),
        closing,
    };
    crate::status!(
        "fresh-root",
        "`{command}`: exit {:?} after {}s",
        result.exit,
        result.secs
    );
    Ok(result)
}

/// Prints the table and what was installed, writes summary.json, and
/// with `record_it` puts a passing summary into docs/fresh-root/.
pub fn report(checked: &Checked, record_it: bool) -> Result<()> {
    let (summary, run_dir, log) = (&checked.summary, &checked.run_dir, &checked.log);
    let json = serde_json::to_string_pretty(summary)? + "\n";
    let path = run_dir.join("summary.json");
    crate::util::write_atomic(&path, json.as_bytes())?;
    println!("\n{}", record::table(summary));
    println!("installed by the harness: {}", summary.installed.join(" "));
    println!(
        "packages: {} at the start, {} at the end",
        summary.packages_at_start, summary.packages_at_end
    );
    println!("log: {}; summary: {}", log.display(), path.display());
    if record_it {
        if summary.form == Form::Custom {
            crate::status!(
                "fresh-root",
                "not recorded: a command of your own is not one of the forms"
            );
        } else if !summary.passed {
            crate::status!("fresh-root", "not recorded: the check failed");
        } else {
            let to = record::record_path(summary.form);
            fs::create_dir_all(to.parent().expect("docs/fresh-root"))?;
            crate::util::write_atomic(&to, json.as_bytes())?;
            crate::status!("fresh-root", "recorded in {}", to.display());
            match &summary.ci_times {
                Some(times) => record_cold_ci(times),
                None if summary.form == Form::Full => crate::status!(
                    "fresh-root",
                    "ci's run not recorded as the cold run: it left no {} in the root's cache",
                    crate::ci::times::FILE_NAME
                ),
                None => {}
            }
        }
    }
    let failed = usize::from(!summary.passed);
    println!("fresh-root: {} passed, {failed} failed", 1 - failed);
    Ok(())
}

/// The full form's ci, cold in the fresh root, put on record as the cold
/// run ci projects from; a run that cannot be (warm, failed) is said.
fn record_cold_ci(times: &crate::ci::times::CiTimes) {
    let to = project::root().join(crate::ci::times::COLD_RECORD);
    match crate::ci::times::record(times, &to) {
        Ok(()) => crate::status!("fresh-root", "ci's cold run recorded in {}", to.display()),
        Err(e) => crate::status!("fresh-root", "ci's run not recorded as the cold run: {e:#}"),
    }
}
