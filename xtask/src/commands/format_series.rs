//! `cargo xtask format-series`: the series written as a posting
//! (`posting`), each patch's checkpatch --strict said, and how to check
//! and send it. Nothing is sent.

use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::cli::FormatSeriesArgs;
use crate::posting::{self, PostingOptions};
use crate::{hostdeps, project};

pub fn run(args: FormatSeriesArgs) -> Result<ExitCode> {
    let source = args.source.config()?;
    hostdeps::ensure(hostdeps::PATCH_CHECKS).context("checking the host tools for the posting")?;
    let options = PostingOptions {
        version: args.series_version,
        rfc: args.rfc,
        out: args.out.clone(),
        cover: args.cover.clone(),
    };
    let posting = posting::write(&source, &options)?;
    let mut unclean = Vec::new();
    for r in &posting.checkpatch {
        crate::status!("checkpatch", "--strict {}: {}", r.patch, r.total);
        if !r.clean {
            eprintln!("{}", r.report.trim_end());
            unclean.push(r.patch.clone());
        }
    }
    let dir = posting.dir.display();
    println!(
        "wrote {} mails (the cover letter and {} patches) to {dir}: the patches in {} for git am, \
         the thread in {} for b4",
        posting.mails.len(),
        posting.mails.len() - 1,
        posting.mbox.display(),
        posting.thread.display()
    );
    println!(
        "base-commit: {} (the source tree as one commit)",
        posting.base
    );
    println!(
        "to: {}; cc: {} more",
        posting.recipients.to.join(", "),
        posting.recipients.cc.len()
    );
    println!("read them, then send: git send-email {dir}/*.patch");
    if !unclean.is_empty() {
        println!(
            "checkpatch --strict is not clean on: {}",
            unclean.join(", ")
        );
        return Ok(ExitCode::from(project::EXIT_TESTS_FAILED));
    }
    Ok(ExitCode::SUCCESS)
}
