//! virtiofsd, the vhost-user file server behind a virtiofs share: found
//! (installing it is `hostdeps::ensure_virtiofsd`'s), one instance per
//! shared directory with its socket in a private temporary directory, and
//! stopped, socket and all, on every path out of a run.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::util::spawn_tied;

/// The virtiofsd to use instead of the one on PATH (or in ~/.cargo/bin).
pub const VIRTIOFSD_ENV: &str = "BPFLAB_VIRTIOFSD";
/// Socket directories are named so a later run can find and remove those
/// of a harness that was killed before it could.
const SOCKET_DIR_PREFIX: &str = "bpflab-vfs-";
/// How long virtiofsd may take to create its socket.
const SOCKET_WAIT: Duration = Duration::from_secs(10);

/// The virtiofsd binary, if there is one we can use: `$BPFLAB_VIRTIOFSD`,
/// else `virtiofsd` on PATH, else cargo's bin directory. Err says why none
/// is usable, in a few words.
pub fn find() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(VIRTIOFSD_ENV) {
        let path = PathBuf::from(path);
        return usable(&path).map(|()| path);
    }
    let candidates = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain(cargo_bin_dir())
        // Where distributions install it, off PATH.
        .chain(["/usr/libexec", "/usr/lib/qemu"].map(PathBuf::from))
        .map(|dir| dir.join("virtiofsd"));
    let mut why = "virtiofsd is not installed".to_string();
    for path in candidates.filter(|p| p.is_file()) {
        match usable(&path) {
            Ok(()) => return Ok(path),
            Err(e) => why = e,
        }
    }
    Err(why)
}

fn cargo_bin_dir() -> Option<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))?;
    Some(home.join("bin"))
}

/// The Rust virtiofsd has `--readonly`; older (C) ones cannot share the
/// host's root safely.
fn usable(path: &Path) -> Result<(), String> {
    let out = Command::new(path)
        .arg("--help")
        .output()
        .map_err(|e| format!("{} cannot run ({e})", path.display()))?;
    let help = crate::util::output_text(&out);
    if !help.contains("--readonly") {
        return Err(format!(
            "{} has no --readonly (too old; install 1.13 or later)",
            path.display()
        ));
    }
    Ok(())
}

/// virtiofsd's arguments for one shared directory. The tag is the QEMU
/// device's, never virtiofsd's (`--tag` breaks QEMU 7.1–8.0).
pub fn args(socket: &Path, dir: &Path, readonly: bool, root: bool) -> Vec<String> {
    let mut args = vec![
        format!("--socket-path={}", socket.display()),
        format!("--shared-dir={}", dir.display()),
        // chroot needs root; as a user, the directory is the only jail.
        format!("--sandbox={}", if root { "chroot" } else { "none" }),
    ];
    if readonly {
        // Nothing changes the host's root during a run: cache freely.
        // The root spans file systems: each becomes a submount in the
        // guest, so inode numbers of different file systems never meet.
        args.extend([
            "--readonly".into(),
            "--cache=always".into(),
            "--announce-submounts".into(),
        ]);
    } else {
        args.push("--cache=auto".into());
    }
    args
}

/// Two running virtiofsd (the host's root, read-only; the project,
/// read-write). Dropping it stops both and removes their sockets.
pub struct Virtiofsd {
    children: Vec<Child>,
    dir: PathBuf,
    log: PathBuf,
    pub root_socket: PathBuf,
    pub project_socket: PathBuf,
}

impl Virtiofsd {
    /// Starts both servers and waits for their sockets; their messages go
    /// to `log`.
    pub fn start(bin: &Path, project: &Path, log: &Path) -> Result<Virtiofsd> {
        sweep_stale_socket_dirs(&std::env::temp_dir());
        let dir = private_dir()?;
        let mut daemon = Virtiofsd {
            children: Vec::new(),
            root_socket: dir.join("root.sock"),
            project_socket: dir.join("project.sock"),
            dir,
            log: log.to_path_buf(),
        };
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let shares = [
            (daemon.root_socket.clone(), Path::new("/"), true),
            (daemon.project_socket.clone(), project, false),
        ];
        for (socket, dir, readonly) in shares {
            let log_file = fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .with_context(|| format!("creating {}", log.display()))?;
            let child = spawn_tied(
                Command::new(bin)
                    .args(args(&socket, dir, readonly, root))
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(log_file),
            )
            .with_context(|| format!("starting {}", bin.display()))?;
            daemon.children.push(child);
        }
        daemon.wait_for_sockets(log)?;
        Ok(daemon)
    }

    fn wait_for_sockets(&mut self, log: &Path) -> Result<()> {
        let started = Instant::now();
        while !(self.root_socket.exists() && self.project_socket.exists()) {
            for child in &mut self.children {
                if let Some(status) = child.try_wait()? {
                    let said = fs::read_to_string(log).unwrap_or_default();
                    bail!(
                        "virtiofsd exited ({status}) before serving: {}",
                        crate::util::last_lines(said.trim(), 2).replace('\n', " / ")
                    );
                }
            }
            if started.elapsed() > SOCKET_WAIT {
                bail!("virtiofsd did not create its socket within {SOCKET_WAIT:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }
}

impl Virtiofsd {
    /// Why a server has exited, if one has: virtiofsd can make its socket
    /// and only then fail to set up the shared directory, and QEMU is then
    /// refused.
    pub fn exited(&mut self) -> Option<String> {
        for child in &mut self.children {
            if let Ok(Some(status)) = child.try_wait() {
                let said = fs::read_to_string(&self.log).unwrap_or_default();
                return Some(format!(
                    "virtiofsd exited ({status}): {}",
                    crate::util::last_lines(said.trim(), 2).replace('\n', " / ")
                ));
            }
        }
        None
    }

    /// Removes the socket directory: once QEMU has connected, virtiofsd
    /// serves that connection and the sockets are never used again.
    pub fn release_sockets(&self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

impl Drop for Virtiofsd {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// A fresh mode-0700 directory for the sockets, with a short path (a
/// socket path must fit in 108 bytes). A name is never used twice in one
/// process: a share whose sockets are released removes its directory
/// again when it is dropped, and with guests side by side (`kselftest
/// --vms`) that second removal would take a newer share's sockets if the
/// name came back.
fn private_dir() -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let base = std::env::temp_dir();
    for _ in 0..100u32 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("{SOCKET_DIR_PREFIX}{}-{n}", std::process::id()));
        match fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
        }
    }
    bail!("no free socket directory name in {}", base.display())
}

/// Removes socket directories whose harness process is gone (killed with
/// SIGKILL, it could not remove them itself).
pub fn sweep_stale_socket_dirs(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(pid) = owner_pid(&name) {
            if !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
    }
}

/// `bpflab-vfs-<pid>-<n>` → pid.
fn owner_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(SOCKET_DIR_PREFIX)?;
    rest.split_once('-')?.0.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_directory_name_never_comes_back() {
        let first = private_dir().unwrap();
        fs::remove_dir_all(&first).unwrap();
        let second = private_dir().unwrap();
        fs::remove_dir_all(&second).unwrap();
        assert_ne!(first, second, "a released name was handed out again");
    }

    #[test]
    fn the_root_is_read_only_and_cached_the_project_writable() {
        let a = args(Path::new("/t/r.sock"), Path::new("/"), true, true);
        assert_eq!(
            a,
            [
                "--socket-path=/t/r.sock",
                "--shared-dir=/",
                "--sandbox=chroot",
                "--readonly",
                "--cache=always",
                "--announce-submounts"
            ]
        );
        let a = args(Path::new("/t/p.sock"), Path::new("/w/p"), false, false);
        assert_eq!(
            a,
            [
                "--socket-path=/t/p.sock",
                "--shared-dir=/w/p",
                "--sandbox=none",
                "--cache=auto"
            ]
        );
        assert!(!a.iter().any(|x| x.starts_with("--tag")));
    }

    #[test]
    fn stale_socket_dirs_of_dead_harnesses_are_removed() {
        let t = crate::util::tempdir();
        let mine = t.join(format!("{SOCKET_DIR_PREFIX}{}-0", std::process::id()));
        // No process has pid 2^22 + 1 (above the kernel's maximum).
        let dead = t.join(format!("{SOCKET_DIR_PREFIX}4194305-0"));
        let other = t.join("unrelated-4194305-0");
        for d in [&mine, &dead, &other] {
            fs::create_dir_all(d).unwrap();
        }
        sweep_stale_socket_dirs(&t);
        assert!(mine.exists() && other.exists());
        assert!(!dead.exists());
        assert_eq!(owner_pid("bpflab-vfs-12-3"), Some(12));
        assert_eq!(owner_pid("bpflab-vfs-x-3"), None);
        fs::remove_dir_all(t).unwrap();
    }

    #[test]
    fn socket_paths_fit_in_sun_path() {
        let dir = private_dir().unwrap();
        assert!(dir.join("project.sock").as_os_str().len() < 108);
        fs::remove_dir_all(dir).unwrap();
    }
}
