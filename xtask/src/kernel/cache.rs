//! The kernel cache: a directory outside the checkout, shared by runs and
//! guarded by a lock so that two runs never write it at once.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

pub struct Cache {
    root: PathBuf,
    // Held for the life of the run; dropping it releases the lock.
    _lock: File,
}

impl Cache {
    /// Opens (creating if needed) the cache at `root` and takes its lock,
    /// waiting for another run that holds it.
    pub fn open(root: &Path) -> Result<Cache> {
        fs::create_dir_all(root)
            .with_context(|| format!("creating the cache directory {}", root.display()))?;
        let lock_path = root.join("lock");
        let mut lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&lock_path)
            .with_context(|| format!("opening the cache lock {}", lock_path.display()))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                let holder = fs::read_to_string(&lock_path).unwrap_or_default();
                crate::status!(
                    "cache",
                    "waiting for the lock on {} (held by {})",
                    root.display(),
                    holder.trim()
                );
                lock.lock()
                    .with_context(|| format!("locking {}", lock_path.display()))?;
            }
            Err(fs::TryLockError::Error(err)) => {
                return Err(err).with_context(|| format!("locking {}", lock_path.display()))
            }
        }
        lock.set_len(0)?;
        writeln!(lock, "pid {}", std::process::id())?;
        Ok(Cache {
            root: root.to_path_buf(),
            _lock: lock,
        })
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
}
