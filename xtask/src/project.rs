//! Where things are: the project root, the cache directory and each run's
//! own directory in it; and what the exit codes mean.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use xshell::Shell;

/// Tests ran and at least one failed.
pub const EXIT_TESTS_FAILED: u8 = 1;
/// The VM could not do its job: boot failure, timeout, panic, missing or
/// doubled verdict.
pub const EXIT_INFRA: u8 = 2;
/// Nothing could be run: bad input, a missing tool, a failed build.
pub const EXIT_SETUP: u8 = 3;

/// Environment variable that overrides the cache directory.
pub const CACHE_ENV: &str = "BPFLAB_CACHE";
/// The project's one machine-facing name: the cache directory, environment
/// variables, the results protocol (`BPFLAB-`) and kernel parameters.
const CACHE_NAME: &str = "bpflab";

/// Environment variable naming the harness's checkout, for a binary run
/// away from it (`cargo install --path xtask`).
pub const ROOT_ENV: &str = "BPFLAB_ROOT";

/// The harness's checkout, found at run time (once): `$BPFLAB_ROOT`, else
/// the checkout around the current directory, else the one the binary
/// was built from if it is still there. A binary that finds none says
/// how to name it, and exits.
pub fn root() -> PathBuf {
    static ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ROOT.get_or_init(|| {
        let built = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .map(Path::to_path_buf);
        let cwd = std::env::current_dir().ok();
        let env = std::env::var_os(ROOT_ENV).map(PathBuf::from);
        match find_root(env, cwd.as_deref(), built) {
            Ok(root) => root,
            Err(err) => {
                eprintln!("error: {err:#}");
                std::process::exit(EXIT_SETUP.into());
            }
        }
    })
    .clone()
}

/// Whether `dir` is a checkout of the harness: its xtask and its series.
fn is_checkout(dir: &Path) -> bool {
    dir.join("xtask/Cargo.toml").is_file() && dir.join("patches/series").is_file()
}

fn find_root(env: Option<PathBuf>, cwd: Option<&Path>, built: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(dir) = env.filter(|d| !d.as_os_str().is_empty()) {
        anyhow::ensure!(
            is_checkout(&dir),
            "{ROOT_ENV}={}: not a checkout of the harness (no xtask/Cargo.toml and patches/series there)",
            dir.display()
        );
        return Ok(dir);
    }
    let around = cwd.and_then(|c| c.ancestors().find(|d| is_checkout(d)));
    if let Some(dir) = around
        .map(Path::to_path_buf)
        .or(built.filter(|b| is_checkout(b)))
    {
        return Ok(dir);
    }
    anyhow::bail!(
        "cannot find the harness's checkout (it holds xtask/ and patches/): run from inside it, or set {ROOT_ENV} to it"
    )
}

/// A shell whose current directory is the project root.
pub fn shell() -> Result<Shell> {
    let sh = Shell::new().context("creating a shell")?;
    sh.change_dir(root());
    Ok(sh)
}

/// The cache directory: the flag, then $BPFLAB_CACHE, then
/// $XDG_CACHE_HOME/bpflab, then ~/.cache/bpflab.
pub fn cache_dir(flag: Option<&Path>) -> Result<PathBuf> {
    resolve_cache_dir(
        flag,
        std::env::var_os(CACHE_ENV).as_deref().map(Path::new),
        std::env::var_os("XDG_CACHE_HOME").as_deref().map(Path::new),
        std::env::var_os("HOME").as_deref().map(Path::new),
    )
}

fn non_empty(p: Option<&Path>) -> Option<&Path> {
    p.filter(|p| !p.as_os_str().is_empty())
}

fn resolve_cache_dir(
    flag: Option<&Path>,
    env: Option<&Path>,
    xdg: Option<&Path>,
    home: Option<&Path>,
) -> Result<PathBuf> {
    if let Some(dir) = non_empty(flag).or(non_empty(env)) {
        return Ok(dir.to_path_buf());
    }
    if let Some(xdg) = non_empty(xdg) {
        return Ok(xdg.join(CACHE_NAME));
    }
    let home = non_empty(home).context(
        "cannot place the kernel cache: HOME is not set; pass --cache-dir DIR or set BPFLAB_CACHE",
    )?;
    Ok(home.join(".cache").join(CACHE_NAME))
}

/// A fresh directory for one vmtest or bench run's logs and reports. Its
/// name is unique to the run, so no lock is needed: a run never waits for
/// another run's kernel build just to write its logs.
pub fn new_run_dir(cache_root: &Path, what: &str) -> Result<PathBuf> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis();
    let dir = cache_root
        .join("runs")
        .join(format!("{what}-{stamp}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn checkout(dir: &Path) {
        fs::create_dir_all(dir.join("xtask")).unwrap();
        fs::create_dir_all(dir.join("patches")).unwrap();
        fs::write(dir.join("xtask/Cargo.toml"), "").unwrap();
        fs::write(dir.join("patches/series"), "").unwrap();
    }

    #[test]
    fn the_checkout_is_the_env_s_then_the_one_around_here_then_the_built_one() {
        let tmp = crate::util::tempdir();
        let (a, b) = (tmp.join("a"), tmp.join("b"));
        checkout(&a);
        checkout(&b);
        let deep = a.join("docs/bench");
        fs::create_dir_all(&deep).unwrap();
        let found = |env: Option<&Path>, cwd: &Path, built: &Path| {
            find_root(
                env.map(Path::to_path_buf),
                Some(cwd),
                Some(built.to_path_buf()),
            )
        };
        assert_eq!(found(Some(&b), &deep, &b).unwrap(), b);
        assert_eq!(found(None, &deep, &b).unwrap(), a);
        assert_eq!(found(None, tmp.as_path(), &b).unwrap(), b);
        let moved = tmp.as_path().join("moved");
        let err = found(None, tmp.as_path(), &moved).unwrap_err().to_string();
        assert!(err.contains(ROOT_ENV), "{err}");
        let err = found(Some(tmp.as_path()), &deep, &b)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a checkout"), "{err}");
    }

    #[test]
    fn cache_dir_precedence() {
        fn p(s: &'static str) -> Option<&'static Path> {
            Some(Path::new(s))
        }
        let got = |f, e, x, h| resolve_cache_dir(f, e, x, h).unwrap();
        assert_eq!(got(p("/f"), p("/e"), p("/x"), p("/h")), Path::new("/f"));
        assert_eq!(got(None, p("/e"), p("/x"), p("/h")), Path::new("/e"));
        assert_eq!(got(None, p(""), p("/x"), p("/h")), Path::new("/x/bpflab"));
        assert_eq!(
            got(None, None, None, p("/h")),
            Path::new("/h/.cache/bpflab")
        );
        assert!(resolve_cache_dir(None, None, None, None).is_err());
    }
}
