//! Outcomes kept across runs (`<cache>/mutants/ledger.json`), so a long
//! run that stops resumes where it was. An outcome holds for one mutated
//! series and one state of the tests: its key hashes the patches the
//! mutant's kernel is built from and every source file of the guest's
//! tests, so editing a test or a patch runs the mutant again.

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

/// The key of a mutant's outcome: its kernel's patches (the mutated one
/// included) and the tests' sources.
pub fn key(patches: &[&[u8]], tests: &str) -> String {
    let mut h = Sha256::new();
    for p in patches {
        h.update(Sha256::digest(p));
    }
    h.update(tests.as_bytes());
    hex::encode(h.finalize())
}

/// One hash over every file under `dirs` (build outputs aside), by path
/// and content.
pub fn tests_digest(root: &Path, dirs: &[&str]) -> Result<String> {
    let mut files = Vec::new();
    for d in dirs {
        collect(&root.join(d), &mut files)?;
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
        let k = key(&[b"0001", b"0002 mutated"], "tests");
        assert_ne!(k, key(&[b"0001", b"0002 mutated"], "tests edited"));
        assert_ne!(k, key(&[b"0001", b"0002 other"], "tests"));
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
