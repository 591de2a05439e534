//! Whose posting it is: the author and `Signed-off-by:` from the user's
//! git configuration, in place of the placeholder identity the project's
//! patches carry (the DCO wants a real name; submitting-patches.rst).

use std::path::Path;

use anyhow::{bail, Context, Result};
use xshell::cmd;

/// The identity the project's patches are kept under until posted.
pub const PLACEHOLDER: &str = "bpf-lazy-mmap <bpf-lazy-mmap@localhost>";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub email: String,
}

impl Identity {
    /// `user.name` and `user.email` as git sees them in `dir`.
    pub fn from_git_config(dir: &Path) -> Result<Identity> {
        let sh = crate::project::shell()?;
        sh.change_dir(dir);
        let get = |key: &str| -> Result<Option<String>> {
            let out = cmd!(sh, "git config --get {key}")
                .quiet()
                .ignore_status()
                .output()
                .with_context(|| format!("running git config --get {key}"))?;
            let value = String::from_utf8_lossy(&out.stdout).trim().to_string();
            Ok(Some(value).filter(|v| !v.is_empty()))
        };
        Identity::of(get("user.name")?, get("user.email")?)
    }

    /// The identity of `name` and `email`, refused in one line when
    /// either is missing or is the placeholder's.
    pub fn of(name: Option<String>, email: Option<String>) -> Result<Identity> {
        let Some(name) = name else {
            bail!(
                "git config user.name is not set: the posting's From: and Signed-off-by: need \
                 your real name; set it with `git config --global user.name \"Your Name\"`"
            );
        };
        let Some(email) = email else {
            bail!(
                "git config user.email is not set: the posting's From: and Signed-off-by: need \
                 your address; set it with `git config --global user.email you@example.org`"
            );
        };
        let who = Identity { name, email };
        if PLACEHOLDER.contains(&who.email) {
            bail!(
                "git config user.email is {}, the project's placeholder: set your own with \
                 `git config --global user.email you@example.org`",
                who.email
            );
        }
        Ok(who)
    }

    /// `Name <email>`, as a mail header has it.
    pub fn address(&self) -> String {
        format!("{} <{}>", self.name, self.email)
    }
}

/// `patch` with the placeholder's `From:` and `Signed-off-by:` lines made
/// `who`'s; a patch someone else wrote keeps its own.
pub fn as_author(patch: &str, who: &Identity) -> String {
    let from = format!("From: {PLACEHOLDER}");
    let signed = format!("Signed-off-by: {PLACEHOLDER}");
    let mut out: Vec<String> = Vec::new();
    for line in patch.split_inclusive('\n') {
        let bare = line.trim_end_matches('\n');
        if bare == from {
            out.push(format!("From: {}\n", who.address()));
        } else if bare == signed {
            out.push(format!("Signed-off-by: {}\n", who.address()));
        } else {
            out.push(line.to_string());
        }
    }
    out.concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ada() -> Identity {
        Identity::of(Some("Ada Lovelace".into()), Some("ada@example.org".into())).unwrap()
    }

    #[test]
    fn a_missing_name_or_address_is_refused_in_one_line_that_says_how() {
        let no_name = Identity::of(None, Some("a@b".into()))
            .unwrap_err()
            .to_string();
        assert!(
            no_name.starts_with("git config user.name is not set")
                && no_name.contains("git config --global user.name")
                && !no_name.contains('\n'),
            "{no_name}"
        );
        let no_mail = Identity::of(Some("A".into()), None)
            .unwrap_err()
            .to_string();
        assert!(no_mail.contains("user.email is not set"), "{no_mail}");
        let placeholder = Identity::of(Some("A".into()), Some("bpf-lazy-mmap@localhost".into()));
        assert!(placeholder.unwrap_err().to_string().contains("placeholder"));
    }

    #[test]
    fn the_placeholder_becomes_the_author_and_nobody_else_changes() {
        let patch = format!(
            "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n\
             From: {PLACEHOLDER}\nSubject: [PATCH] x\n\nWhy.\n\n\
             Reviewed-by: Someone Else <se@example.org>\n\
             Signed-off-by: {PLACEHOLDER}\n---\n"
        );
        let posted = as_author(&patch, &ada());
        assert!(!posted.contains(PLACEHOLDER), "{posted}");
        assert!(posted.contains("\nFrom: Ada Lovelace <ada@example.org>\n"));
        assert!(posted.contains("\nSigned-off-by: Ada Lovelace <ada@example.org>\n"));
        assert!(posted.contains("Reviewed-by: Someone Else <se@example.org>\n"));
        let theirs =
            "From: Someone Else <se@example.org>\nSigned-off-by: Someone Else <se@example.org>\n";
        assert_eq!(as_author(theirs, &ada()), theirs);
    }
}
