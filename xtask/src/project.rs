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

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the project root")
        .to_path_buf()
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
