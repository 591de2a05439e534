//! Who each mail goes to: the tree's own `scripts/get_maintainer.pl` on
//! the patch (its lists To:, its people Cc:), with the template's own
//! Cc, written into the mail's headers; the cover letter goes to all of
//! them.

use std::path::Path;

use anyhow::{bail, Context, Result};
use xshell::cmd;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recipients {
    pub to: Vec<String>,
    pub cc: Vec<String>,
}

impl Recipients {
    /// What `get_maintainer.pl --no-rolestats` printed: a line with an
    /// address in angle brackets is a person, a bare address a list.
    pub fn of_output(output: &str) -> Recipients {
        let mut r = Recipients::default();
        for line in output.lines().map(str::trim).filter(|l| l.contains('@')) {
            let into = if line.contains('<') {
                &mut r.cc
            } else {
                &mut r.to
            };
            if !into.iter().any(|x| x == line) {
                into.push(line.to_string());
            }
        }
        r
    }

    /// Both, each address once, `self`'s first.
    pub fn merged(&self, other: &Recipients) -> Recipients {
        let mut r = self.clone();
        for (from, into) in [(&other.to, &mut r.to), (&other.cc, &mut r.cc)] {
            for a in from {
                if !into.contains(a) {
                    into.push(a.clone());
                }
            }
        }
        r
    }
}

/// get_maintainer.pl of `tree` on the mail at `patch`; the tree is only
/// read.
pub fn of_patch(tree: &Path, patch: &Path) -> Result<Recipients> {
    let script = tree.join("scripts/get_maintainer.pl");
    if !script.is_file() {
        bail!(
            "{} is missing: the kernel source has no get_maintainer.pl",
            script.display()
        );
    }
    let sh = crate::project::shell()?;
    sh.change_dir(tree);
    let out = cmd!(
        sh,
        "perl {script} --no-rolestats --no-git --no-git-fallback {patch}"
    )
    .quiet()
    .output()
    .with_context(|| format!("running get_maintainer.pl on {}", patch.display()))?;
    Ok(Recipients::of_output(&String::from_utf8_lossy(&out.stdout)))
}

/// `mail` with `To:` and `Cc:` headers for `r` after its `Subject:`
/// header (and the lines that continue it).
pub fn with_headers(mail: &str, r: &Recipients) -> Result<String> {
    let headers_end = mail
        .find("\n\n")
        .context("a mail with no end of its headers")?;
    let (head, rest) = mail.split_at(headers_end);
    let mut lines: Vec<&str> = head.lines().collect();
    let subject = lines
        .iter()
        .position(|l| l.starts_with("Subject:"))
        .context("a mail with no Subject: header")?;
    let mut at = subject + 1;
    while lines.get(at).is_some_and(|l| l.starts_with(' ')) {
        at += 1;
    }
    let to = header("To", &r.to);
    let cc = header("Cc", &r.cc);
    for h in [&cc, &to].into_iter().flatten() {
        lines.insert(at, h);
    }
    Ok(lines.join("\n") + rest)
}

/// One header over several lines, an address a line; None for none.
fn header(name: &str, addresses: &[String]) -> Option<String> {
    (!addresses.is_empty()).then(|| format!("{name}: {}", addresses.join(",\n    ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAID: &str = "Alexei Starovoitov <ast@kernel.org>\nDaniel Borkmann <daniel@iogearbox.net>\nbpf@vger.kernel.org\nlinux-kernel@vger.kernel.org\n";

    #[test]
    fn lists_go_to_and_people_cc() {
        let r = Recipients::of_output(SAID);
        assert_eq!(
            r.to,
            ["bpf@vger.kernel.org", "linux-kernel@vger.kernel.org"]
        );
        assert_eq!(r.cc.len(), 2);
        let extra = Recipients {
            to: vec![],
            cc: vec![
                "linux-mm@kvack.org".into(),
                "Alexei Starovoitov <ast@kernel.org>".into(),
            ],
        };
        let all = r.merged(&extra);
        assert_eq!(all.cc.len(), 3, "{all:?}");
    }

    #[test]
    fn the_headers_follow_the_subject_and_its_continuation() {
        let mail = "From abc Mon Sep 17 00:00:00 2001\nFrom: A <a@b>\nSubject: [PATCH 1/2] bpf: a\n long subject\n\nBody.\n";
        let r = Recipients::of_output(SAID);
        let out = with_headers(mail, &r).unwrap();
        assert!(
            out.contains(" long subject\nTo: bpf@vger.kernel.org,\n    linux-kernel@vger.kernel.org\nCc: Alexei"),
            "{out}"
        );
        assert!(out.ends_with("\n\nBody.\n"), "{out}");
        assert_eq!(with_headers(mail, &Recipients::default()).unwrap(), mail);
    }
}
