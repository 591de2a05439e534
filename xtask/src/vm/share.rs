//! Sharing the host with the guest: virtiofs when virtiofsd is there and
//! starts, 9p (built into QEMU) otherwise, said in one line; `--share
//! virtiofs|9p` forces one. (Installing virtiofsd is the command's.)

use std::path::Path;

use anyhow::{bail, Result};
use guest_common::request::{Share, ShareKind};

use super::qemu::ShareDevices;
use super::virtiofsd::{self, Virtiofsd};

/// A share ready for one guest. Holding it keeps virtiofsd running;
/// dropping it stops virtiofsd and removes its sockets.
pub struct ActiveShare {
    pub kind: ShareKind,
    pub devices: ShareDevices,
    /// Keeps virtiofsd running while the share is held.
    daemon: Option<Virtiofsd>,
}

impl ActiveShare {
    /// Removes virtiofsd's sockets once QEMU is connected to them.
    pub fn release_sockets(&self) {
        if let Some(d) = &self.daemon {
            d.release_sockets();
        }
    }

    /// Why the share's virtiofsd is gone, if it is.
    pub fn daemon_exited(&mut self) -> Option<String> {
        self.daemon.as_mut().and_then(Virtiofsd::exited)
    }

    /// What the guest is told about it.
    pub fn request(&self, project: &Path, bindir: Option<&Path>) -> Share {
        Share {
            kind: self.kind,
            project: project.display().to_string(),
            bindir: bindir.map(|b| b.display().to_string()),
        }
    }
}

/// What a guest gets of the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sharing {
    /// The hermetic initramfs: the guest's programs packed in, nothing of
    /// the host.
    #[default]
    Hermetic,
    /// The host's root and the project shared, as `choice` says.
    Host(ShareChoice),
}

/// Starts the share of the host's root and `project`. With `Auto` a
/// virtiofs failure falls back to 9p.
pub fn start(choice: ShareChoice, project: &Path, log: &Path) -> Result<ActiveShare> {
    let forced = choice.forced();
    if forced == Some(ShareKind::NineP) {
        return Ok(nine_p(project));
    }
    match start_virtiofs(project, log) {
        Ok(share) => Ok(share),
        Err(why) if forced.is_none() => {
            crate::status!("share", "{why}; sharing over 9p instead");
            Ok(nine_p(project))
        }
        Err(why) => bail!("--share virtiofs: {why}; use --share 9p or install virtiofsd"),
    }
}

fn nine_p(project: &Path) -> ActiveShare {
    ActiveShare {
        kind: ShareKind::NineP,
        devices: ShareDevices::NineP {
            project: project.to_path_buf(),
        },
        daemon: None,
    }
}

/// virtiofsd found and started. Err is one line on why virtiofs cannot
/// be used.
fn start_virtiofs(project: &Path, log: &Path) -> Result<ActiveShare, String> {
    let bin = match virtiofsd::find() {
        Ok(bin) => bin,
        Err(why) if std::env::var_os(virtiofsd::VIRTIOFSD_ENV).is_some() => {
            return Err(format!("{why} (from ${})", virtiofsd::VIRTIOFSD_ENV))
        }
        Err(why) => return Err(why),
    };
    let daemon = Virtiofsd::start(&bin, project, log).map_err(|e| format!("{e:#}"))?;
    Ok(ActiveShare {
        kind: ShareKind::Virtiofs,
        devices: ShareDevices::Virtiofs {
            root: daemon.root_socket.clone(),
            project: daemon.project_socket.clone(),
        },
        daemon: Some(daemon),
    })
}

/// clap's words for `--share`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ShareChoice {
    /// virtiofs, or 9p when virtiofsd is missing or does not start.
    Auto,
    Virtiofs,
    #[value(name = "9p")]
    NineP,
}

impl ShareChoice {
    /// The transport forced, if any.
    pub fn forced(self) -> Option<ShareKind> {
        match self {
            ShareChoice::Auto => None,
            ShareChoice::Virtiofs => Some(ShareKind::Virtiofs),
            ShareChoice::NineP => Some(ShareKind::NineP),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forced_9p_starts_no_server() {
        let s = start(
            ShareChoice::NineP,
            Path::new("/w/p"),
            Path::new("/nonexistent/log"),
        )
        .unwrap();
        assert_eq!(s.kind, ShareKind::NineP);
        assert!(s.daemon.is_none());
        assert_eq!(
            s.request(Path::new("/w/p"), None),
            Share {
                kind: ShareKind::NineP,
                project: "/w/p".into(),
                bindir: None
            }
        );
    }

    #[test]
    fn choices_name_their_kinds() {
        assert_eq!(ShareChoice::NineP.forced(), Some(ShareKind::NineP));
        assert_eq!(ShareChoice::Virtiofs.forced(), Some(ShareKind::Virtiofs));
        assert_eq!(ShareChoice::Auto.forced(), None);
    }
}
