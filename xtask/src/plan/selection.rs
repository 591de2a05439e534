//! Choosing the tests of a vmtest run: filters checked against what the
//! kernel command line carries, and matched against the plan the static
//! selftests binary lists on the host.

use anyhow::{bail, Context, Result};

use crate::vm::guest_image;

pub fn check_filters(filters: &[String]) -> Result<()> {
    for f in filters {
        if f.is_empty()
            || !f
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            bail!(
                "test filter {f:?}: use letters, digits, '_' and '-' only (e.g. t14 or dontneed)"
            );
        }
    }
    Ok(())
}

/// The tests a run with `filters` plans, in plan order: the static
/// selftests binary lists them on the host too, so a typo in a filter
/// fails here rather than after a boot, and a run that stops early can
/// list what it did not run.
pub fn planned_tests(filters: &[String]) -> Result<Vec<String>> {
    let bin = guest_image::guest_bin_dir().join("selftests");
    let out = std::process::Command::new(&bin)
        .arg("--list")
        .output()
        .with_context(|| format!("listing the tests with {}", bin.display()))?;
    let names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    select(&names, filters).map_err(|f| {
        anyhow::anyhow!(
            "test filter {f:?} matches no test; `{} --list` lists them",
            bin.display()
        )
    })
}

/// The names any filter selects (all without filters), or the first
/// filter that selects nothing.
fn select(names: &[String], filters: &[String]) -> Result<Vec<String>, String> {
    if let Some(f) = filters
        .iter()
        .find(|f| !names.iter().any(|n| n.contains(f.as_str())))
    {
        return Err(f.clone());
    }
    Ok(names
        .iter()
        .filter(|n| filters.is_empty() || filters.iter().any(|f| n.contains(f.as_str())))
        .cloned()
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_select_like_the_guest_runner() {
        let names: Vec<String> = ["t01_a", "t02_b", "t14_c"].map(String::from).to_vec();
        assert_eq!(select(&names, &[]).unwrap(), names);
        assert_eq!(
            select(&names, &["t14".into(), "t01".into()]).unwrap(),
            ["t01_a", "t14_c"]
        );
        assert_eq!(select(&names, &["t99".into()]).unwrap_err(), "t99");
    }

    #[test]
    fn filters_must_fit_on_the_kernel_command_line() {
        assert!(check_filters(&["t14".into(), "dont_need-x".into()]).is_ok());
        assert!(check_filters(&["a b".into()]).is_err());
        assert!(check_filters(&["t1,t2".into()]).is_err());
    }
}
