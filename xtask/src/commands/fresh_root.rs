//! `cargo xtask fresh-root`: README's commands (or the quick form, or a
//! command of the caller's) from a fresh clone in a minimal Debian root
//! with an empty cache (the work is in `fresh_root/`).

use std::process::ExitCode;

use anyhow::{bail, Context, Result};

use crate::cli::FreshRootArgs;
use crate::fresh_root::{self, Check, Form};
use crate::{hostdeps, project};

pub fn run(args: FreshRootArgs) -> Result<ExitCode> {
    let (form, commands) = match (&args.command[..], args.quick) {
        ([], false) => (Form::Full, strings(Form::Full.commands())),
        ([], true) => (Form::Quick, strings(Form::Quick.commands())),
        (own, _) => (Form::Custom, vec![own.join(" ")]),
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bail!("fresh-root needs root (mmdebstrap --mode=root, mounts, chroot): run it as root");
    }
    hostdeps::ensure(hostdeps::FRESH_ROOT).context("checking the host tools for the fresh root")?;
    let base = match &args.dir {
        Some(d) => d.clone(),
        None => project::cache_dir(args.cache.cache_dir.as_deref())?.join("fresh-root"),
    };
    let checked = fresh_root::check(&Check {
        form,
        commands,
        base,
        declared: hostdeps::declared_packages(),
        keep: args.keep,
    })?;
    fresh_root::report(&checked, args.record)?;
    Ok(if checked.summary.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(project::EXIT_TESTS_FAILED)
    })
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}
