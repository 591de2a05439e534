//! Kernel sources from Debian's package registry, by version
//! (`--source debian:7.3`): `linux-source-7.3` fetched with apt's own
//! client under a private configuration in the cache (its own sources
//! list, index lists and archive directory; the host's apt sources are
//! never read or written), its signatures checked by apt as usual against
//! Debian's archive keyring, and its tarball kept for `source` to unpack.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use xshell::cmd;

/// The source when neither `--source` nor `--kernel-src` says otherwise:
/// the kernel the series is posted against.
pub const DEFAULT: &str = "debian:7.3";

/// The suites whose indexes are fetched: every one that has carried a
/// linux-source of 6.1 or later for amd64. A version is taken from
/// whichever carries its newest upload.
const SUITES: &[(&str, &str)] = &[
    ("debian", "bookworm"),
    ("debian", "bookworm-updates"),
    ("debian", "bookworm-backports"),
    ("debian-security", "bookworm-security"),
    ("debian", "trixie"),
    ("debian", "trixie-updates"),
    ("debian", "trixie-backports"),
    ("debian-security", "trixie-security"),
    ("debian", "sid"),
];

const MIRROR: &str = "http://deb.debian.org";
const KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// Indexes older than this are fetched again before a version is chosen.
const INDEX_MAX_AGE: Duration = Duration::from_secs(6 * 3600);

/// `debian:MAJOR.MINOR`, optionally pinned to one upload
/// (`debian:7.3@7.3.4-1~bpo13+1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Spec {
    /// "7.3": the package is linux-source-7.3.
    pub series: String,
    /// One upload of it; None takes the newest the registry carries.
    pub pinned: Option<String>,
}

impl Spec {
    /// Parses a `--source` value; the error says what it takes.
    pub fn parse(text: &str) -> Result<Spec> {
        let usage = "take debian:MAJOR.MINOR (e.g. debian:7.3 or debian:6.12), \
                     optionally @VERSION for one upload";
        let Some(rest) = text.strip_prefix("debian:") else {
            bail!("--source {text}: {usage}; a tree or tarball of your own goes to --kernel-src");
        };
        let (series, pinned) = match rest.split_once('@') {
            Some((s, v)) if !v.is_empty() => (s, Some(v.to_string())),
            Some(_) => bail!("--source {text}: nothing after @; {usage}"),
            None => (rest, None),
        };
        let numbers: Vec<&str> = series.split('.').collect();
        let numeric = |s: &&str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
        if numbers.len() != 2 || !numbers.iter().all(numeric) {
            bail!("--source {text}: {usage}");
        }
        Ok(Spec {
            series: series.to_string(),
            pinned,
        })
    }

    pub fn package(&self) -> String {
        format!("linux-source-{}", self.series)
    }

    /// What the user wrote, for messages and the manifest.
    pub fn text(&self) -> String {
        match &self.pinned {
            Some(v) => format!("debian:{}@{v}", self.series),
            None => format!("debian:{}", self.series),
        }
    }
}

impl Default for Spec {
    fn default() -> Spec {
        Spec::parse(DEFAULT).expect("the default source parses")
    }
}

/// One upload, fetched: its package, its exact version and its tarball.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Release {
    pub package: String,
    /// Debian's version of the upload, e.g. 7.3.4-1~bpo13+1.
    pub version: String,
    /// The suite it came from.
    pub suite: String,
    pub tarball: PathBuf,
}

impl Release {
    /// A short, stable name for the cache: debian-7.3.4-1_bpo13_1.
    pub fn cache_key(&self) -> String {
        format!("debian-{}", crate::util::name_safe(&self.version))
    }
}

/// The private apt configuration under `<cache>/debian`.
struct Apt {
    dir: PathBuf,
}

impl Apt {
    fn new(cache_root: &Path) -> Result<Apt> {
        let dir = cache_root.join("debian");
        for sub in ["lists/partial", "archives/partial", "tarballs"] {
            fs::create_dir_all(dir.join(sub))
                .with_context(|| format!("creating {}", dir.join(sub).display()))?;
        }
        crate::util::write_atomic(&dir.join("sources.list"), sources_list().as_bytes())?;
        Ok(Apt { dir })
    }

    /// The options that keep apt off the host's configuration and state.
    fn options(&self) -> Vec<String> {
        let d = self.dir.display();
        [
            format!("Dir::Etc::sourcelist={d}/sources.list"),
            "Dir::Etc::sourceparts=-".into(),
            format!("Dir::State::Lists={d}/lists"),
            format!("Dir::Cache={d}"),
            format!("Dir::Cache::archives={d}/archives"),
            "Dir::State::status=/dev/null".into(),
            "APT::Architectures=amd64".into(),
            // The cache is root's: apt's _apt user could not write to it.
            "APT::Sandbox::User=root".into(),
            "Acquire::Languages=none".into(),
            "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false".into(),
            "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false".into(),
            "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false".into(),
            "Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled=false".into(),
        ]
        .into_iter()
        .flat_map(|o| ["-o".to_string(), o])
        .collect()
    }

    fn stamp(&self) -> PathBuf {
        self.dir.join("lists/updated")
    }

    /// Fetches the indexes when they are missing or old. A failed fetch
    /// with indexes at hand goes on with them, said in one line.
    fn update(&self) -> Result<()> {
        let age = fs::metadata(self.stamp())
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok());
        if age.is_some_and(|a| a < INDEX_MAX_AGE) {
            return Ok(());
        }
        crate::status!("source", "fetching Debian's package indexes");
        let sh = crate::project::shell()?;
        let opts = self.options();
        let out = cmd!(sh, "apt-get {opts...} -q update")
            .quiet()
            .ignore_status()
            .output()
            .context("running apt-get update")?;
        if out.status.success() {
            return fs::write(self.stamp(), b"").context("marking the indexes fresh");
        }
        let why = crate::util::last_lines(&String::from_utf8_lossy(&out.stderr), 3);
        if age.is_some() {
            crate::status!(
                "source",
                "apt-get update failed, using the indexes at hand: {why}"
            );
            return Ok(());
        }
        bail!("fetching Debian's package indexes failed (apt-get update): {why}")
    }

    /// Every upload of `package` the indexes list, newest first, with the
    /// suite each came from.
    fn uploads(&self, package: &str) -> Result<Vec<(String, String)>> {
        let sh = crate::project::shell()?;
        let opts = self.options();
        let out = cmd!(sh, "apt-cache {opts...} madison {package}")
            .quiet()
            .ignore_status()
            .read()
            .context("running apt-cache madison")?;
        Ok(parse_madison(&out))
    }

    /// The linux-source series the indexes carry, oldest first.
    fn carried(&self) -> Result<Vec<String>> {
        let sh = crate::project::shell()?;
        let opts = self.options();
        let out = cmd!(sh, "apt-cache {opts...} pkgnames linux-source-")
            .quiet()
            .read()
            .context("running apt-cache pkgnames")?;
        Ok(series_names(&out))
    }

    /// Downloads the upload into the archive directory; apt checks its
    /// hash against the signed index.
    fn download(&self, package: &str, version: &str) -> Result<PathBuf> {
        let sh = crate::project::shell()?;
        let opts = self.options();
        let archives = self.dir.join("archives");
        sh.change_dir(&archives);
        let what = format!("{package}={version}");
        crate::status!("source", "downloading {what} from Debian");
        cmd!(sh, "apt-get {opts...} -q download {what}")
            .quiet()
            .run()
            .with_context(|| format!("downloading {what}"))?;
        let prefix = format!("{package}_");
        let deb = fs::read_dir(&archives)?
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                let name = p.file_name().unwrap_or_default().to_string_lossy();
                name.starts_with(&prefix) && name.ends_with(".deb")
            });
        deb.with_context(|| {
            format!(
                "apt-get download left no {package} .deb in {}",
                archives.display()
            )
        })
    }
}

fn sources_list() -> String {
    let mut text =
        String::from("# Written by the harness: the suites it takes kernel sources from.\n");
    for (archive, suite) in SUITES {
        text.push_str(&format!(
            "deb [signed-by={KEYRING}] {MIRROR}/{archive} {suite} main\n"
        ));
    }
    text
}

/// `apt-cache madison` lines (`pkg | version | uri suite/main amd64
/// Packages`) as (version, suite), each version once, in apt's order
/// (newest first).
fn parse_madison(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split('|').map(str::trim).collect();
        let [_, version, origin] = fields[..] else {
            continue;
        };
        let suite = origin
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.split('/').next())
            .unwrap_or_default();
        if !out.iter().any(|(v, _)| v == version) {
            out.push((version.to_string(), suite.to_string()));
        }
    }
    out
}

/// The series of `linux-source-X.Y` package names, sorted by version.
fn series_names(text: &str) -> Vec<String> {
    let mut series: Vec<String> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("linux-source-"))
        .filter(|s| Spec::parse(&format!("debian:{s}")).is_ok())
        .map(str::to_string)
        .collect();
    let key = |s: &String| -> Vec<u32> { s.split('.').map(|n| n.parse().unwrap_or(0)).collect() };
    series.sort_by_key(key);
    series.dedup();
    series
}

/// The upload `spec` names, fetched (once: a tarball in the cache is
/// reused), from the registry's current indexes.
pub fn fetch(cache_root: &Path, spec: &Spec) -> Result<Release> {
    let apt = Apt::new(cache_root)?;
    apt.update()?;
    let package = spec.package();
    let uploads = apt.uploads(&package)?;
    let chosen = match &spec.pinned {
        None => uploads.first(),
        Some(v) => uploads.iter().find(|(version, _)| version == v),
    };
    let Some((version, suite)) = chosen.cloned() else {
        bail!("{}", not_carried(spec, &uploads, &apt.carried()?));
    };
    let tarball = apt
        .dir
        .join("tarballs")
        .join(format!("{package}_{version}.tar.xz"));
    if !tarball.is_file() {
        let deb = apt.download(&package, &version)?;
        extract_tarball(&deb, &package, &tarball)?;
        fs::remove_file(&deb).with_context(|| format!("removing {}", deb.display()))?;
    }
    crate::status!("source", "{package} {version} ({suite})");
    Ok(Release {
        package,
        version,
        suite,
        tarball,
    })
}

/// The one line for a version the registry does not carry.
fn not_carried(spec: &Spec, uploads: &[(String, String)], series: &[String]) -> String {
    if let (Some(pin), false) = (&spec.pinned, uploads.is_empty()) {
        let have: Vec<&str> = uploads.iter().map(|(v, _)| v.as_str()).collect();
        return format!(
            "--source {}: Debian's registry no longer carries {} {pin}; it carries {} (or drop @{pin} for the newest)",
            spec.text(),
            spec.package(),
            have.join(", ")
        );
    }
    let have: Vec<String> = series.iter().map(|s| format!("debian:{s}")).collect();
    format!(
        "--source {}: Debian's registry carries no {}; it carries {}",
        spec.text(),
        spec.package(),
        have.join(", ")
    )
}

/// Takes `usr/src/<package>.tar.xz` out of the package into `tarball`,
/// through a temporary file, so a killed run leaves no half tarball.
fn extract_tarball(deb: &Path, package: &str, tarball: &Path) -> Result<()> {
    let sh = crate::project::shell()?;
    let tmp = tarball.with_extension("xz.part");
    let member = format!("./usr/src/{package}.tar.xz");
    let script = "dpkg-deb --fsys-tarfile \"$1\" | tar -xO \"$2\" > \"$3\"";
    cmd!(sh, "sh -c {script} sh {deb} {member} {tmp}")
        .quiet()
        .run()
        .with_context(|| format!("taking {member} out of {}", deb.display()))?;
    if fs::metadata(&tmp).map(|m| m.len()).unwrap_or(0) == 0 {
        bail!("{} holds no {member}", deb.display());
    }
    fs::rename(&tmp, tarball).with_context(|| format!("renaming {}", tmp.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_refuse_in_one_line() {
        assert_eq!(
            Spec::parse("debian:7.3").unwrap(),
            Spec {
                series: "7.3".into(),
                pinned: None
            }
        );
        let pinned = Spec::parse("debian:6.12@6.12.117-1~deb12u1").unwrap();
        assert_eq!(pinned.pinned.as_deref(), Some("6.12.117-1~deb12u1"));
        assert_eq!(pinned.package(), "linux-source-6.12");
        assert_eq!(pinned.text(), "debian:6.12@6.12.117-1~deb12u1");
        for bad in ["7.3", "debian:7", "debian:7.x", "debian:7.3@", "ubuntu:7.3"] {
            let err = Spec::parse(bad).unwrap_err().to_string();
            assert!(err.starts_with(&format!("--source {bad}: ")), "{err}");
            assert!(err.contains("debian:MAJOR.MINOR"), "{err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }

    #[test]
    fn madison_gives_each_upload_once_newest_first() {
        let text = "\
linux-source-6.12 | 6.12.118-1 | http://deb.debian.org/debian-security trixie-security/main amd64 Packages
linux-source-6.12 | 6.12.117-1 | http://deb.debian.org/debian trixie/main amd64 Packages
linux-source-6.12 | 6.12.117-1 | http://deb.debian.org/debian-security trixie-security/main amd64 Packages
linux-source-6.12 | 6.12.95-1~bpo12+1 | http://deb.debian.org/debian bookworm-backports/main amd64 Packages
";
        let got = parse_madison(text);
        assert_eq!(
            got,
            [
                ("6.12.118-1".to_string(), "trixie-security".to_string()),
                ("6.12.117-1".into(), "trixie".into()),
                ("6.12.95-1~bpo12+1".into(), "bookworm-backports".into()),
            ]
        );
        assert!(parse_madison("").is_empty());
    }

    #[test]
    fn a_version_not_carried_names_what_is() {
        let series = series_names(
            "linux-source-7.3\nlinux-source-6.12\nlinux-source-6.1\nlinux-source-7.2\n",
        );
        assert_eq!(series, ["6.1", "6.12", "7.2", "7.3"]);
        let missing = Spec::parse("debian:7.9").unwrap();
        assert_eq!(
            not_carried(&missing, &[], &series),
            "--source debian:7.9: Debian's registry carries no linux-source-7.9; \
             it carries debian:6.1, debian:6.12, debian:7.2, debian:7.3"
        );
        let old = Spec::parse("debian:7.3@7.3.1-1").unwrap();
        let uploads = [(
            "7.3.4-1~bpo13+1".to_string(),
            "trixie-backports".to_string(),
        )];
        assert_eq!(
            not_carried(&old, &uploads, &series),
            "--source debian:7.3@7.3.1-1: Debian's registry no longer carries linux-source-7.3 7.3.1-1; \
             it carries 7.3.4-1~bpo13+1 (or drop @7.3.1-1 for the newest)"
        );
    }

    #[test]
    fn the_cache_key_is_the_upload() {
        let r = Release {
            package: "linux-source-7.3".into(),
            version: "7.3.4-1~bpo13+1".into(),
            suite: "trixie-backports".into(),
            tarball: "/c/t.tar.xz".into(),
        };
        assert_eq!(r.cache_key(), "debian-7.3.4-1_bpo13_1");
        assert!(sources_list().contains("trixie-backports main"));
        assert!(sources_list().lines().skip(1).all(|l| l.contains(KEYRING)));
    }
}
