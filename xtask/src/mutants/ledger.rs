//! Outcomes kept across runs (`<cache>/mutants/ledger.json`), so a long
//! run that stops resumes where it was. An outcome holds for one mutated
//! series and one state of everything that decides it (`Decides`): its
//! key hashes the patches the mutant's kernel is built from, every source
//! file of the guest's tests, the host's judge, the kernel source and its
//! version, the series' variants and the accelerator, so a change to any
//! of them runs the mutant again.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::outcome::Outcome;
use crate::util::{gone_is_none, write_atomic};

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Ledger {
    #[serde(skip)]
    path: PathBuf,
    entries: BTreeMap<String, Entry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Entry {
    id: String,
    outcome: Outcome,
    seconds: f64,
}

impl Ledger {
    pub fn open(cache_dir: &Path) -> Result<Ledger> {
        let path = cache_dir.join("mutants").join("ledger.json");
        let entries = read_entries(&path)?;
        Ok(Ledger { path, entries })
    }

    pub fn get(&self, key: &str) -> Option<(&Outcome, f64)> {
        self.entries.get(key).map(|e| (&e.outcome, e.seconds))
    }

    /// Records an outcome and writes the ledger at once: a run killed
    /// after this mutant keeps it. Under the ledger's lock, over what is
    /// on disk now: two runs at once in one cache each keep the other's
    /// outcomes.
    pub fn put(&mut self, key: String, id: &str, outcome: Outcome, seconds: f64) -> Result<()> {
        let entry = Entry {
            id: id.to_string(),
            outcome,
            seconds,
        };
        let dir = self
            .path
            .parent()
            .context("the ledger's path has no directory")?;
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let lock_path = dir.join("ledger.lock");
        let lock = fs::File::create(&lock_path)
            .with_context(|| format!("creating {}", lock_path.display()))?;
        lock.lock()
            .with_context(|| format!("locking {}", lock_path.display()))?;
        self.entries.extend(read_entries(&self.path)?);
        self.entries.insert(key, entry);
        write_atomic(&self.path, serde_json::to_string_pretty(self)?.as_bytes())
    }
}

/// The outcomes in the ledger at `path`; none when it is not there.
fn read_entries(path: &Path) -> Result<BTreeMap<String, Entry>> {
    let text = gone_is_none(fs::read_to_string(path))
        .with_context(|| format!("reading {}", path.display()))?;
    let Some(text) = text else {
        return Ok(BTreeMap::new());
    };
    let ledger: Ledger = serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is corrupt: remove it (outcomes are run again)",
            path.display()
        )
    })?;
    Ok(ledger.entries)
}

/// What besides the mutated series decides a mutant's outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decides {
    /// The guest's side: its tests, its image, the kernels' configuration
    /// (a `tests_digest`).
    pub tests: String,
    /// The host's judge: `plan/`, `vm/assess.rs`, `vm/console.rs` and
    /// `vm/process.rs` (splats and panics), `report/protocol.rs`,
    /// `mutants/outcome.rs` and `mutants/on_kernel.rs` (a
    /// `tests_digest`).
    pub host_judge: String,
    /// The kernel source and its version (`kernel::source_identity`).
    pub source: String,
    /// The series' base and variants, each with how many patches it has:
    /// what decides the variant a mutant is held to.
    pub variants: String,
    /// The accelerator the boots take (`--accel`, `auto` resolved by
    /// `judge::accel_key`).
    pub accel: String,
    /// How it is judged: debug kernels or not, the fuzzer's host side,
    /// seed and seconds.
    pub judge: String,
}

impl Decides {
    fn parts(&self) -> [(&str, &str); 6] {
        [
            ("tests", &self.tests),
            ("host judge", &self.host_judge),
            ("source", &self.source),
            ("variants", &self.variants),
            ("accel", &self.accel),
            ("judge", &self.judge),
        ]
    }
}

/// The key of a mutant's outcome: its kernel's patches (the mutated one
/// included) and what else decides it.
pub fn key(patches: &[&[u8]], decides: &Decides) -> String {
    let mut h = Sha256::new();
    for p in patches {
        h.update(Sha256::digest(p));
    }
    for (name, value) in decides.parts() {
        h.update(name.as_bytes());
        h.update([0]);
        h.update(value.as_bytes());
        h.update([0]);
    }
    hex::encode(h.finalize())
}

/// The files of the host's judge, from the project's root.
pub const HOST_JUDGE: &[&str] = &[
    "xtask/src/plan",
    "xtask/src/vm/assess.rs",
    "xtask/src/vm/console.rs",
    "xtask/src/vm/process.rs",
    "xtask/src/report/protocol.rs",
    "xtask/src/mutants/outcome.rs",
    "xtask/src/mutants/on_kernel.rs",
];

/// One hash over every file under `dirs` (build outputs aside), or that
/// a path of `dirs` names, by path and content.
pub fn tests_digest(root: &Path, dirs: &[&str]) -> Result<String> {
    let mut files = Vec::new();
    for d in dirs {
        let path = root.join(d);
        if path.is_file() {
            files.push(path);
        } else {
            collect(&path, &mut files)?;
        }
    }
    files.sort();
    let mut h = Sha256::new();
    for f in files {
        let body = fs::read(&f).with_context(|| format!("reading {}", f.display()))?;
        h.update(
            f.strip_prefix(root)
                .unwrap_or(&f)
                .to_string_lossy()
                .as_bytes(),
        );
        h.update([0]);
        h.update(Sha256::digest(&body));
    }
    Ok(hex::encode(h.finalize()))
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for e in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = e?.path();
        if p.file_name().is_some_and(|n| n == "target") {
            continue;
        }
        if p.is_dir() {
            collect(&p, out)?;
        } else {
            out.push(p);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::tempdir;

    #[test]
    fn an_outcome_comes_back_for_its_key_and_survives_a_reopen() {
        let t = tempdir();
        let mut l = Ledger::open(&t).unwrap();
        let c = Decides::default();
        let k = key(&[b"0001", b"0002 mutated"], &c);
        assert_ne!(k, key(&[b"0001", b"0002 other"], &c));
        assert!(l.get(&k).is_none());
        l.put(k.clone(), "0002.1.cmp1", Outcome::Survived, 3.0)
            .unwrap();
        let again = Ledger::open(&t).unwrap();
        assert_eq!(again.get(&k), Some((&Outcome::Survived, 3.0)));
        fs::write(t.join("mutants/ledger.json"), "{").unwrap();
        let err = format!("{:#}", Ledger::open(&t).unwrap_err());
        assert!(err.contains("is corrupt: remove it"), "{err}");
        fs::remove_dir_all(t).unwrap();
    }

    /// Each thing that decides an outcome is in its key: a change to any
    /// one of them runs the mutant again.
    #[test]
    fn the_key_changes_with_everything_that_decides() {
        let base = Decides {
            tests: "t".into(),
            host_judge: "h".into(),
            source: "debian-7.3.4-1 linux-source-7.3 7.3.4-1".into(),
            variants: "eager mainline:1 direct:3".into(),
            accel: "Kvm".into(),
            judge: "lean".into(),
        };
        let patches: [&[u8]; 2] = [b"0001", b"0002 mutated"];
        let k = key(&patches, &base);
        type Edit = fn(&mut Decides);
        let edits: [(&str, Edit); 6] = [
            ("tests", |c| c.tests.push('!')),
            ("host judge", |c| c.host_judge.push('!')),
            ("source", |c| {
                c.source = "debian-7.3.5-1 linux-source-7.3 7.3.5-1".into()
            }),
            ("variants", |c| {
                c.variants = "eager mainline:1 direct:2".into()
            }),
            ("accel", |c| c.accel = "Tcg".into()),
            ("judge", |c| c.judge.push_str(" debug")),
        ];
        for (what, edit) in edits {
            let mut c = base.clone();
            edit(&mut c);
            assert_ne!(key(&patches, &c), k, "{what} is not in the key");
        }
        // Parts do not run into each other.
        let mut moved = base.clone();
        moved.tests = "th".into();
        moved.host_judge = String::new();
        assert_ne!(key(&patches, &moved), k);
    }

    #[test]
    fn the_host_judges_files_are_there_and_counted() {
        let root = crate::project::root();
        for f in HOST_JUDGE {
            assert!(root.join(f).exists(), "{f}");
        }
        let t = tempdir();
        fs::create_dir_all(t.join("d")).unwrap();
        fs::write(t.join("one.rs"), "a").unwrap();
        let d1 = tests_digest(&t, &["one.rs", "d"]).unwrap();
        fs::write(t.join("one.rs"), "b").unwrap();
        assert_ne!(tests_digest(&t, &["one.rs", "d"]).unwrap(), d1);
        fs::remove_dir_all(t).unwrap();
    }

    #[test]
    fn two_runs_at_once_keep_each_others_outcomes() {
        let t = tempdir();
        let (mut a, mut b) = (Ledger::open(&t).unwrap(), Ledger::open(&t).unwrap());
        a.put("ka".into(), "0001.1.cmp1", Outcome::Survived, 1.0)
            .unwrap();
        b.put("kb".into(), "0001.2.cmp1", Outcome::Survived, 2.0)
            .unwrap();
        a.put("kc".into(), "0001.3.cmp1", Outcome::Survived, 3.0)
            .unwrap();
        let l = Ledger::open(&t).unwrap();
        for k in ["ka", "kb", "kc"] {
            assert!(l.get(k).is_some(), "{k} lost");
        }
        fs::remove_dir_all(t).unwrap();
    }

    #[test]
    fn the_tests_digest_follows_an_edit() {
        let t = tempdir();
        fs::create_dir_all(t.join("s/src")).unwrap();
        fs::create_dir_all(t.join("s/target")).unwrap();
        fs::write(t.join("s/src/a.rs"), "a").unwrap();
        let d1 = tests_digest(&t, &["s"]).unwrap();
        fs::write(t.join("s/target/out"), "built").unwrap();
        assert_eq!(
            tests_digest(&t, &["s"]).unwrap(),
            d1,
            "build outputs do not count"
        );
        fs::write(t.join("s/src/a.rs"), "b").unwrap();
        assert_ne!(tests_digest(&t, &["s"]).unwrap(), d1);
        fs::remove_dir_all(t).unwrap();
    }
}
