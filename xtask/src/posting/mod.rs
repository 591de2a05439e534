//! A posting of the series as bpf-next takes it: `git format-patch`
//! output on the tree's base (`--base`), versioned and prefixed, under
//! the author's own identity, with a cover letter from the template kept
//! with the series, each mail addressed by the tree's get_maintainer.pl,
//! written to a directory, with the patches as one mbox for `git am` and
//! the whole thread as another for b4. Each patch is held to checkpatch
//! --strict as posted. Nothing is sent.

pub mod cover;
pub mod identity;
pub mod recipients;

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use xshell::cmd;

use self::cover::Cover;
use self::identity::Identity;
use self::recipients::Recipients;
use crate::kernel::hygiene::{self, CheckpatchResult};
use crate::kernel::{self, own_series, SourceConfig};
use crate::project;

/// What a posting is: its version and whether it asks for comments only.
#[derive(Debug, Clone)]
pub struct PostingOptions {
    /// None: the newest `vN:` of the changelog, else 1.
    pub version: Option<u32>,
    /// `[RFC PATCH bpf-next]`, whatever the cover letter's `Prefix:`.
    pub rfc: bool,
    /// Where to write it; None: `target/posting/v<N>`.
    pub out: Option<PathBuf>,
    /// The cover letter's template (a series of your own's; its
    /// changelog, if any, is `changelog.txt` beside it); None: this
    /// project's, for its own series.
    pub cover: Option<PathBuf>,
}

/// The subject's prefix without a `Prefix:` line or --rfc, and with
/// --rfc.
const PREFIX: &str = "PATCH bpf-next";
const RFC_PREFIX: &str = "RFC PATCH bpf-next";

/// What the mails' subjects say: the version and the prefix.
struct Subjects<'a> {
    version: u32,
    prefix: &'a str,
}

/// A posting written.
pub struct Posting {
    pub dir: PathBuf,
    /// The cover letter first, then each patch.
    pub mails: Vec<PathBuf>,
    /// The patches, for `git am` (which stops at an empty mail: the cover
    /// letter).
    pub mbox: PathBuf,
    /// The cover letter and the patches, as the list gets them (b4).
    pub thread: PathBuf,
    /// The commit the series applies to, as `base-commit:` names it.
    pub base: String,
    /// Everyone the cover letter goes to.
    pub recipients: Recipients,
    pub checkpatch: Vec<CheckpatchResult>,
}

/// The two mboxes: the patches (`git am`), the whole thread (b4).
const MBOX: &str = "series.mbox";
const THREAD: &str = "thread.mbox";

/// What marks a directory as a posting this command wrote, which it may
/// replace.
const MARK: &str = ".bpflab-posting";

/// Writes the posting of the source's series.
pub fn write(source: &SourceConfig, options: &PostingOptions) -> Result<Posting> {
    if options.version == Some(0) {
        bail!("--version 0: a posting's versions start at 1");
    }
    let who = Identity::from_git_config(&project::root())?;
    let letter = Letter::read(options)?;
    let dir = options.out.clone().unwrap_or_else(|| {
        project::root()
            .join("target/posting")
            .join(format!("v{}", letter.version))
    });
    let trees = kernel::prepare_trees(source)?;
    let other = own_series::other_series(source, &trees.series);
    let table = match (&options.cover, other) {
        (Some(_), _) => None,
        (None, None) => {
            let head = trees.series.whole().name.clone();
            Some(cover::bench_table(&crate::bench::recorded()?, &head)?)
        }
        (None, Some(what)) => bail!(
            "{what}: the project's cover letter is its own series'; give yours with --cover FILE \
             (a subject line, Cc: lines, a blank line, the body)"
        ),
    };
    let cover = cover::fill(&letter.template, table.as_deref(), &letter.changes)?;
    let subjects = Subjects {
        version: letter.version,
        prefix: match (options.rfc, &cover.prefix) {
            (true, _) => RFC_PREFIX,
            (false, Some(p)) => p,
            (false, None) => PREFIX,
        },
    };
    clear(&dir)?;
    let written = write_mails(&trees, &cover, (&who, &subjects), &dir);
    if written.is_err() {
        // Nothing half-written is left for a reader to send.
        let _ = fs::remove_dir_all(&dir);
    }
    let (base, mails, recipients) = written?;
    let (mbox, thread) = (dir.join(MBOX), dir.join(THREAD));
    let patches: Vec<(String, PathBuf)> = mails[1..]
        .iter()
        .map(|m| (file_name(m), m.clone()))
        .collect();
    let checkpatch = hygiene::checkpatch_files(&trees.pristine, &patches)?;
    Ok(Posting {
        dir,
        mails,
        mbox,
        thread,
        base,
        recipients,
        checkpatch,
    })
}

/// The mails of the posting in `dir`, addressed, and its two mboxes: the
/// base commit, the mails (cover letter first) and everyone they go to.
fn write_mails(
    trees: &kernel::PreparedTrees,
    cover: &Cover,
    (who, subjects): (&Identity, &Subjects),
    dir: &Path,
) -> Result<(String, Vec<PathBuf>, Recipients)> {
    let repo = hygiene::source_repo(&trees.pristine, &trees.source_dir)?;
    let work = trees.source_dir.join("posting-work");
    let made = format_patches(&repo, &work, &trees.series, (who, subjects), dir);
    let _ = fs::remove_dir_all(&work);
    let (base, mails) = made?;
    let recipients = address(&trees.pristine, &mails, cover)?;
    write_mbox(&dir.join(MBOX), &mails[1..])?;
    write_mbox(&dir.join(THREAD), &mails)?;
    Ok((base, mails, recipients))
}

/// The cover letter's template and the changes of this version, read
/// before anything is prepared.
struct Letter {
    template: String,
    changes: String,
    version: u32,
}

impl Letter {
    fn read(options: &PostingOptions) -> Result<Letter> {
        let (template, changelog) = match &options.cover {
            None => (
                project::root().join(cover::TEMPLATE),
                Some(project::root().join(cover::CHANGELOG)),
            ),
            Some(given) => {
                let beside = given.with_file_name("changelog.txt");
                (given.clone(), beside.is_file().then_some(beside))
            }
        };
        let log = changelog.map(|l| read(&l)).transpose()?;
        let newest = log.as_deref().and_then(cover::newest_version);
        let version = options.version.or(newest).unwrap_or(1);
        let changes = match log {
            Some(log) => cover::changes_for(&log, version)?,
            None if version > 1 => bail!(
                "--version {version}: say what changed since v{} in changelog.txt beside {} \
                 (`v{version}:` and the changes under it), and put @CHANGELOG@ in the cover letter",
                version - 1,
                template.display(),
            ),
            None => String::new(),
        };
        Ok(Letter {
            template: read(&template)?,
            changes,
            version,
        })
    }
}

/// Empties `dir` for a posting, and marks it this command's: one it
/// wrote is replaced, anything else refused.
fn clear(dir: &Path) -> Result<()> {
    if dir.exists() {
        let ours = dir.join(MARK).is_file();
        let empty = fs::read_dir(dir)
            .map(|mut d| d.next().is_none())
            .unwrap_or(false);
        if !ours && !empty {
            bail!(
                "{} holds files this command did not write: give --out an empty or new directory",
                dir.display()
            );
        }
        fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    fs::write(dir.join(MARK), b"").context("marking the posting's directory")
}

/// The series' own patches, made `who`'s, applied with git am in a
/// clone of the source's repository at `work`, and formatted into `dir`:
/// the base commit and the mails, cover letter first.
fn format_patches(
    repo: &Path,
    work: &Path,
    series: &kernel::series::Series,
    (who, subjects): (&Identity, &Subjects),
    dir: &Path,
) -> Result<(String, Vec<PathBuf>)> {
    hygiene::sparse_clone(repo, work, &series.touched_files())?;
    let sh = project::shell()?;
    sh.change_dir(work);
    let base = cmd!(sh, "git rev-parse HEAD").quiet().read()?;
    let incoming = work.join(".posting-in");
    fs::create_dir_all(&incoming)?;
    let mut patches = Vec::new();
    for p in series.own() {
        let text = read(&p.path)?;
        let path = incoming.join(&p.name);
        fs::write(&path, identity::as_author(&text, who))?;
        patches.push(path);
    }
    let (name, email) = (&who.name, &who.email);
    let _committer = (
        sh.push_env("GIT_COMMITTER_NAME", name),
        sh.push_env("GIT_COMMITTER_EMAIL", email),
    );
    let am = cmd!(sh, "git am --quiet {patches...}")
        .quiet()
        .ignore_status()
        .output()
        .context("running git am")?;
    if !am.status.success() {
        bail!(
            "git am does not apply the series onto its base {base}: {}",
            crate::util::output_text(&am).trim()
        );
    }
    let prefix = format!("--subject-prefix={}", subjects.prefix);
    let version = format!("-v{}", subjects.version);
    let versioned = (subjects.version > 1).then_some(version.as_str());
    let base_arg = format!("--base={base}");
    let range = format!("{base}..HEAD");
    let written = cmd!(
        sh,
        "git format-patch --cover-letter --thread=shallow {prefix} {versioned...} {base_arg} -o {dir} {range}"
    )
    .quiet()
    .read()
    .context("git format-patch")?;
    let mails = written.lines().map(PathBuf::from).collect();
    Ok((base, mails))
}

/// Addresses each mail (get_maintainer.pl on each patch, the template's
/// Cc on all) and writes the cover letter's text into its mail; who the
/// cover letter goes to: everyone.
fn address(tree: &Path, mails: &[PathBuf], cover: &Cover) -> Result<Recipients> {
    let extra = Recipients {
        to: Vec::new(),
        cc: cover.cc.clone(),
    };
    let mut everyone = Recipients::default();
    for mail in &mails[1..] {
        let r = recipients::of_patch(tree, mail)?.merged(&extra);
        everyone = everyone.merged(&r);
        let text = recipients::with_headers(&read(mail)?, &r)?;
        fs::write(mail, text).with_context(|| format!("writing {}", mail.display()))?;
    }
    let letter = cover::into_letter(&read(&mails[0])?, cover)?;
    let letter = recipients::with_headers(&letter, &everyone)?;
    fs::write(&mails[0], letter).with_context(|| format!("writing {}", mails[0].display()))?;
    Ok(everyone)
}

/// The mails at `mails`, in order, as one mbox at `path`.
fn write_mbox(path: &Path, mails: &[PathBuf]) -> Result<()> {
    let mut all = String::new();
    for m in mails {
        all += &read(m)?;
    }
    fs::write(path, all).with_context(|| format!("writing {}", path.display()))
}

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}
