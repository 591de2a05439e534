//! A bundle's manifest (`<bundle>/manifest.json`): what its kernels and
//! test programs were made from. `cargo xtask bundle` writes it last, and
//! every run that takes a bundle checks it against what this checkout
//! would build: a bundle of another commit, series, source,
//! configuration or LLVM is refused in one line that names what differs,
//! and a bundle without one (made before bundles carried it) is refused
//! too. Without the check a bundle left in `$BPFLAB_BUNDLE` boots old
//! kernels under a new checkout's name.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::manifest::{PatchInfo, SourceInfo};
use super::series::Series;
use super::{kconfig, KernelConfig, SourceConfig};
use crate::util::write_atomic;

/// The manifest's file in a bundle.
pub const FILE: &str = "manifest.json";

/// What decides a bundle's kernels, as this checkout would build them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// HEAD's commit, `-dirty` when tracked files differ from it.
    pub commit: String,
    /// The source asked for: `--source debian:7.3`, `--kernel-src PATH`.
    pub source: String,
    /// The patches (names and contents, a baseline's first) and the
    /// variants they make.
    pub series: String,
    /// `lean` or `bpf-ci`.
    pub config: String,
    /// kconfig/'s fragments, the debug one with them.
    pub config_digest: String,
}

/// The manifest: the origin, the LLVM of the selftests, and what the
/// kernel build's own manifest (`kernel::manifest`) records.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BundleManifest {
    #[serde(flatten)]
    pub origin: Origin,
    /// The LLVM that built the BPF selftests; None when it holds none.
    pub llvm: Option<u32>,
    /// The source as built: its kind, and Debian's exact upload.
    pub built_from: SourceInfo,
    pub kernels: Vec<BundledKernel>,
}

/// One kernel of a bundle, as its build recorded it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BundledKernel {
    pub name: String,
    pub version: String,
    pub patches: Vec<PatchInfo>,
}

/// Where a bundle's manifest is.
pub fn path(bundle: &Path) -> PathBuf {
    bundle.join(FILE)
}

/// What this checkout would build a bundle of `config` from, with
/// `source`.
pub fn origin(source: &SourceConfig, config: KernelConfig) -> Result<Origin> {
    let series = source
        .series()
        .context("reading the series for the bundle's origin")?;
    let fragments: Vec<kconfig::Fragment> = kconfig::fragments(true)
        .into_iter()
        .map(|p| kconfig::Fragment::new(p, kconfig::Origin::Ours))
        .collect();
    let digest = kconfig::fragments_hash(&fragments).context("hashing kconfig/'s fragments")?;
    Ok(Origin {
        commit: checkout_commit(),
        source: source_request(source),
        series: series_digest(&series),
        config: config_name(config).to_string(),
        config_digest: digest,
    })
}

/// Writes `manifest` into `bundle`.
pub fn write(bundle: &Path, manifest: &BundleManifest) -> Result<()> {
    let text = serde_json::to_string_pretty(manifest).context("serializing the bundle manifest")?;
    write_atomic(&path(bundle), text.as_bytes())
        .with_context(|| format!("writing {}", path(bundle).display()))
}

/// The manifest of `bundle`; one line naming the fix when it has none.
pub fn load(bundle: &Path) -> Result<BundleManifest> {
    let file = path(bundle);
    let text = match fs::read_to_string(&file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "the bundle {} has no {FILE}: it was made before bundles recorded what they \
             were built from; rebuild it with `cargo xtask bundle --out {}`",
            bundle.display(),
            bundle.display()
        ),
        Err(e) => return Err(e).with_context(|| format!("reading {}", file.display())),
    };
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a bundle manifest of this harness; rebuild the bundle with \
             `cargo xtask bundle --out {}`",
            file.display(),
            bundle.display()
        )
    })
}

/// Loads `bundle`'s manifest and refuses it unless it was made from
/// `now`.
pub fn check(bundle: &Path, now: &Origin) -> Result<BundleManifest> {
    let manifest = load(bundle)?;
    refuse_differences(bundle, differences(&manifest.origin, now), now, None)?;
    Ok(manifest)
}

/// Refuses `manifest` unless its selftests were built with LLVM `llvm`.
pub fn check_llvm(bundle: &Path, manifest: &BundleManifest, llvm: u32) -> Result<()> {
    let differs = match manifest.llvm {
        Some(made) if made == llvm => return Ok(()),
        Some(made) => format!("its BPF selftests were built with LLVM {made} (this run: {llvm})"),
        None => format!("it holds no BPF selftests (this run: LLVM {llvm})"),
    };
    refuse_differences(bundle, vec![differs], &manifest.origin, Some(llvm))
}

/// What differs between the origin a bundle was `made` from and the one
/// it would be made from `now`, one phrase each.
pub fn differences(made: &Origin, now: &Origin) -> Vec<String> {
    let fields: [(&str, &str, &str); 5] = [
        ("commit", &made.commit, &now.commit),
        ("source", &made.source, &now.source),
        ("series digest", &made.series, &now.series),
        ("kernel configuration", &made.config, &now.config),
        ("kconfig digest", &made.config_digest, &now.config_digest),
    ];
    fields
        .iter()
        .filter(|(_, m, n)| m != n)
        .map(|(what, m, n)| format!("its {what} is {} (this checkout: {})", short(m), short(n)))
        .collect()
}

/// One line: the bundle, what differs, and the command that remakes it.
fn refuse_differences(
    bundle: &Path,
    differs: Vec<String>,
    now: &Origin,
    llvm: Option<u32>,
) -> Result<()> {
    if differs.is_empty() {
        return Ok(());
    }
    let mut fix = format!("cargo xtask bundle --out {}", bundle.display());
    if now.config != config_name(KernelConfig::Lean) {
        fix.push_str(&format!(" --kernel-config {}", now.config));
    }
    if let Some(n) = llvm {
        fix.push_str(&format!(" --llvm {n}"));
    }
    bail!(
        "the bundle {} is not what this checkout builds: {}; rebuild it with `{fix}`",
        bundle.display(),
        differs.join(", ")
    )
}

/// A digest's first 12 characters; anything else whole.
fn short(text: &str) -> &str {
    let hex = text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit());
    if hex {
        &text[..12]
    } else {
        text
    }
}

/// `--kernel-config`'s word for `config`.
fn config_name(config: KernelConfig) -> &'static str {
    match config {
        KernelConfig::Lean => "lean",
        KernelConfig::BpfCi => "bpf-ci",
    }
}

/// The source as its flags name it.
fn source_request(source: &SourceConfig) -> String {
    match (&source.kernel_src, &source.git) {
        (Some(src), Some(range)) => {
            format!("--kernel-src {} --base {}", src.display(), range.base)
        }
        (Some(src), None) => format!("--kernel-src {}", src.display()),
        (None, _) => match &source.debian.pinned {
            Some(upload) => format!("--source debian:{}@{upload}", source.debian.series),
            None => format!("--source debian:{}", source.debian.series),
        },
    }
}

/// The series' patches with the variants they make: a patch moved from
/// one variant to the next changes it too.
fn series_digest(series: &Series) -> String {
    let mut h = Sha256::new();
    h.update(series.hash().as_bytes());
    h.update(series.base.name.as_str().as_bytes());
    for v in &series.variants {
        h.update(format!("\n{}={}", v.name, v.patches).as_bytes());
    }
    hex::encode(h.finalize())
}

/// HEAD's commit, `-dirty` when a tracked file differs from it; `none`
/// outside a git checkout.
fn checkout_commit() -> String {
    let root = crate::project::root();
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(&root)
        .output()
        .ok()
        .filter(|o| o.status.success());
    let Some(head) = head else {
        return "none".to_string();
    };
    let commit = String::from_utf8_lossy(&head.stdout).trim().to_string();
    let clean = Command::new("git")
        .args(["diff", "--quiet", "HEAD", "--"])
        .current_dir(&root)
        .status()
        .is_ok_and(|s| s.success());
    if clean {
        commit
    } else {
        format!("{commit}-dirty")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin() -> Origin {
        Origin {
            commit: "c0ffee".into(),
            source: "--source debian:7.3".into(),
            series: "a".repeat(64),
            config: "lean".into(),
            config_digest: "b".repeat(64),
        }
    }

    fn manifest() -> BundleManifest {
        BundleManifest {
            origin: origin(),
            llvm: Some(19),
            built_from: SourceInfo {
                kind: "debian".into(),
                path: "/c/linux-source-7.3.tar.xz".into(),
                pristine: "/c/sources/x/pristine".into(),
                package: None,
            },
            kernels: vec![BundledKernel {
                name: "mainline".into(),
                version: "7.3.4".into(),
                patches: vec![],
            }],
        }
    }

    /// A bundle directory holding `m`'s manifest, or none.
    fn bundle_with(m: Option<&BundleManifest>) -> PathBuf {
        let dir = crate::util::tempdir();
        if let Some(m) = m {
            write(&dir, m).unwrap();
        }
        dir
    }

    #[test]
    fn a_bundle_of_this_checkout_is_taken() {
        let dir = bundle_with(Some(&manifest()));
        let taken = check(&dir, &origin()).unwrap();
        assert_eq!(taken.origin, origin());
        assert_eq!(taken.kernels[0].version, "7.3.4");
        check_llvm(&dir, &manifest(), 19).unwrap();
    }

    /// What the refusal says, and the change to the origin that makes it.
    type Change = (&'static str, fn(&mut Origin));

    #[test]
    fn each_difference_is_refused_by_name_with_the_fix() {
        let dir = bundle_with(Some(&manifest()));
        let changes: [Change; 5] = [
            ("its commit is c0ffee (this checkout: beef)", |o| {
                o.commit = "beef".into()
            }),
            (
                "its source is --source debian:7.3 (this checkout: --source debian:6.12)",
                |o| o.source = "--source debian:6.12".into(),
            ),
            (
                "its series digest is aaaaaaaaaaaa (this checkout: cccccccccccc)",
                |o| o.series = "c".repeat(64),
            ),
            (
                "its kernel configuration is lean (this checkout: bpf-ci)",
                |o| o.config = "bpf-ci".into(),
            ),
            (
                "its kconfig digest is bbbbbbbbbbbb (this checkout: dddddddddddd)",
                |o| o.config_digest = "d".repeat(64),
            ),
        ];
        for (says, change) in changes {
            let mut now = origin();
            change(&mut now);
            let e = check(&dir, &now).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
            assert!(!e.contains('\n'), "one line: {e}");
            assert!(
                e.contains("rebuild it with `cargo xtask bundle --out"),
                "{e}"
            );
            assert_eq!(differences(&manifest().origin, &now).len(), 1, "{e}");
        }
        let mut bpfci = origin();
        bpfci.config = "bpf-ci".into();
        let e = check(&dir, &bpfci).unwrap_err().to_string();
        assert!(e.contains("--kernel-config bpf-ci`"), "{e}");
    }

    #[test]
    fn selftests_of_another_llvm_are_refused() {
        let dir = bundle_with(Some(&manifest()));
        let e = check_llvm(&dir, &manifest(), 20).unwrap_err().to_string();
        assert!(
            e.contains("its BPF selftests were built with LLVM 19 (this run: 20)"),
            "{e}"
        );
        assert!(e.contains("--llvm 20`"), "{e}");
        let mut none = manifest();
        none.llvm = None;
        let e = check_llvm(&dir, &none, 19).unwrap_err().to_string();
        assert!(e.contains("it holds no BPF selftests"), "{e}");
    }

    #[test]
    fn a_bundle_without_a_manifest_is_refused() {
        let dir = bundle_with(None);
        let e = check(&dir, &origin()).unwrap_err().to_string();
        assert!(e.contains("has no manifest.json"), "{e}");
        assert!(
            e.contains("rebuild it with `cargo xtask bundle --out"),
            "{e}"
        );
        assert!(!e.contains('\n'), "one line: {e}");
    }

    #[test]
    fn a_moved_variant_boundary_changes_the_series_digest() {
        let dir = crate::util::tempdir();
        for (name, file) in [("1.patch", "a"), ("2.patch", "b"), ("3.patch", "c")] {
            let diff = format!("--- a/{file}\n+++ b/{file}\n@@ -1 +1 @@\n-x\n+y\n");
            fs::write(dir.join(name), diff).unwrap();
        }
        fs::write(dir.join("series"), "1.patch\n[two]\n2.patch\n3.patch\n").unwrap();
        let before = Series::load(&dir).unwrap();
        fs::write(dir.join("series"), "1.patch\n2.patch\n[two]\n3.patch\n").unwrap();
        let moved = Series::load(&dir).unwrap();
        assert_eq!(before.hash(), moved.hash(), "the same patches");
        assert_ne!(series_digest(&before), series_digest(&moved));
    }
}
