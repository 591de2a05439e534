//! The kernel cache: a directory outside the checkout, shared by runs.
//! Two kinds of lock keep runs from writing one thing at once: the
//! cache's own (`lock`), held for what every run shares (the pristine
//! tree, the manifest, a prune), and one per tree (`locks/<source>/<tree>`),
//! held while a kernel tree is prepared, built and read. A run never waits
//! for a tree's lock while it holds the cache's, so a run that builds one
//! kernel never holds up a run that boots another.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

pub struct Cache {
    root: PathBuf,
    // Held until `release` or the end of the run; dropping it unlocks.
    lock: Option<File>,
}

/// The lock of one tree of the cache, held while the value lives.
#[derive(Debug)]
pub struct TreeLock {
    _file: File,
}

impl Cache {
    /// Opens (creating if needed) the cache at `root` and takes its lock,
    /// waiting for another run that holds it.
    pub fn open(root: &Path) -> Result<Cache> {
        fs::create_dir_all(root)
            .with_context(|| format!("creating the cache directory {}", root.display()))?;
        let lock = take(&root.join("lock"), &root.display().to_string())?;
        Ok(Cache {
            root: root.to_path_buf(),
            lock: Some(lock),
        })
    }

    /// Lets other runs take the cache's lock; what this run goes on
    /// writing is under tree locks (`lock_tree`).
    pub fn release(&mut self) {
        self.lock = None;
    }

    /// Takes the cache's lock again after `release`.
    pub fn relock(&mut self) -> Result<()> {
        if self.lock.is_none() {
            let root = self.root.display().to_string();
            self.lock = Some(take(&self.root.join("lock"), &root)?);
        }
        Ok(())
    }

    /// Takes the lock of the tree `name` of the source `key`, waiting for
    /// a run that holds it. Never called with the cache's lock held.
    pub fn lock_tree(&self, key: &str, name: &str) -> Result<TreeLock> {
        debug_assert!(
            self.lock.is_none(),
            "a tree lock waited for under the cache's"
        );
        let path = tree_lock_path(&self.root, key, name);
        let dir = path.parent().expect("locks/<source>");
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let what = self.source_dir(key).join(name).display().to_string();
        Ok(TreeLock {
            _file: take(&path, &what)?,
        })
    }

    /// The lock of the tree `name` of the source `key` if no run holds
    /// it: for a first build from a copy, which does without rather than
    /// wait (two runs copying from each other's trees would wait forever).
    pub fn try_lock_tree(&self, key: &str, name: &str) -> Result<Option<TreeLock>> {
        let path = tree_lock_path(&self.root, key, name);
        let dir = path.parent().expect("locks/<source>");
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(try_take(&path)?.map(|file| TreeLock { _file: file }))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn ccache_dir(&self) -> PathBuf {
        self.root.join("ccache")
    }

    /// Directory holding everything derived from one kernel source.
    pub fn source_dir(&self, key: &str) -> PathBuf {
        self.root.join("sources").join(key)
    }

    pub fn manifest_path(&self) -> PathBuf {
        self.root.join("manifest.json")
    }
}

/// Where the lock of the tree `name` of the source `key` is.
pub fn tree_lock_path(cache: &Path, key: &str, name: &str) -> PathBuf {
    cache.join("locks").join(key).join(name)
}

/// Whether a run holds the lock of the tree `name` of the source `key`.
pub fn tree_in_use(cache: &Path, key: &str, name: &str) -> bool {
    let Ok(file) = File::open(tree_lock_path(cache, key, name)) else {
        return false;
    };
    matches!(file.try_lock(), Err(fs::TryLockError::WouldBlock))
}

/// Takes the lock at `path` (of `what`, named when waiting for it).
fn open_lock(path: &Path) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .with_context(|| format!("opening the lock {}", path.display()))
}

/// The lock at `path`, or None if another run holds it.
fn try_take(path: &Path) -> Result<Option<File>> {
    let mut lock = open_lock(path)?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => return Ok(None),
        Err(fs::TryLockError::Error(err)) => {
            return Err(err).with_context(|| format!("locking {}", path.display()))
        }
    }
    lock.set_len(0)?;
    writeln!(lock, "pid {}", std::process::id())?;
    Ok(Some(lock))
}

fn take(path: &Path, what: &str) -> Result<File> {
    let mut lock = open_lock(path)?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            let holder = fs::read_to_string(path).unwrap_or_default();
            crate::status!(
                "cache",
                "waiting for the lock on {what} (held by {})",
                holder.trim()
            );
            lock.lock()
                .with_context(|| format!("locking {}", path.display()))?;
        }
        Err(fs::TryLockError::Error(err)) => {
            return Err(err).with_context(|| format!("locking {}", path.display()))
        }
    }
    lock.set_len(0)?;
    writeln!(lock, "pid {}", std::process::id())?;
    Ok(lock)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_open_waits_for_the_first() {
        let dir = crate::util::tempdir();
        let first = Cache::open(&dir).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let d2 = dir.clone();
        let waiter = std::thread::spawn(move || {
            let _second = Cache::open(&d2).unwrap();
            tx.send(()).unwrap();
        });
        // The second open must not get through while the first holds the lock.
        assert!(rx
            .recv_timeout(std::time::Duration::from_millis(300))
            .is_err());
        drop(first);
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("second open should proceed once the first lock is dropped");
        waiter.join().unwrap();
        fs::remove_dir_all(dir).unwrap();
    }

    /// A run building one tree holds up a run on another tree not at all,
    /// and one on the same tree until it is done.
    #[test]
    fn a_tree_lock_holds_its_tree_and_no_other() {
        let dir = crate::util::tempdir();
        let mut first = Cache::open(&dir).unwrap();
        first.release();
        let mutant = first.lock_tree("src", "mutant").unwrap();
        assert!(tree_in_use(&dir, "src", "mutant"));
        assert!(!tree_in_use(&dir, "src", "base"));
        let (tx, rx) = std::sync::mpsc::channel();
        let d2 = dir.clone();
        let waiter = std::thread::spawn(move || {
            // The cache's own lock is free while the first builds.
            let mut second = Cache::open(&d2).unwrap();
            second.release();
            let _base = second.lock_tree("src", "base").unwrap();
            tx.send("base").unwrap();
            let _mutant = second.lock_tree("src", "mutant").unwrap();
            tx.send("mutant").unwrap();
        });
        let wait = std::time::Duration::from_secs(10);
        assert_eq!(rx.recv_timeout(wait), Ok("base"));
        assert!(rx
            .recv_timeout(std::time::Duration::from_millis(300))
            .is_err());
        drop(mutant);
        assert_eq!(rx.recv_timeout(wait), Ok("mutant"));
        waiter.join().unwrap();
        assert!(!tree_in_use(&dir, "src", "mutant"));
        fs::remove_dir_all(dir).unwrap();
    }
}
