//! What the host asks of a guest beyond the kernel command line: which
//! host directories are shared in and how, and the host command to run
//! (argv, working directory, environment, terminal). It does not fit the
//! kernel command line (2048 bytes, no spaces in values), so the host
//! writes it as a file into the run's initramfs ([`REQUEST_PATH`]) and
//! /init reads it back. Pure code: one encoding, both sides.
//!
//! The encoding is NUL-separated `key`, `value` pairs: argv words and
//! environment values may hold any byte but NUL, as on Unix.

/// Where /init finds the request.
pub const REQUEST_PATH: &str = "/bpflab/request";
/// Tag of the host's root file system, shared read-only.
pub const ROOT_TAG: &str = "bpflab-root";
/// Tag of the project directory, shared read-write at its host path.
pub const PROJECT_TAG: &str = "bpflab-project";
/// Where /init mounts the host's root (and, inside it, the project).
pub const HOST_ROOT: &str = "/host";
/// The virtio-serial port names that carry the command's output.
pub const STDOUT_PORT: &str = "bpflab.stdout";
pub const STDERR_PORT: &str = "bpflab.stderr";
/// The virtio-serial port that carries the host's piped stdin.
pub const STDIN_PORT: &str = "bpflab.stdin";
/// The virtio console of `--shell`.
pub const SHELL_TTY: &str = "/dev/hvc0";

/// How the host's directories reach the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareKind {
    Virtiofs,
    NineP,
}

impl ShareKind {
    pub const ALL: [ShareKind; 2] = [ShareKind::Virtiofs, ShareKind::NineP];

    pub fn name(self) -> &'static str {
        match self {
            ShareKind::Virtiofs => "virtiofs",
            ShareKind::NineP => "9p",
        }
    }

    pub fn parse(name: &str) -> Option<ShareKind> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// The shares: the host's root read-only at [`HOST_ROOT`], the project
/// read-write at its own path inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Share {
    pub kind: ShareKind,
    /// The project directory's absolute host path.
    pub project: String,
    /// Where the guest programs (selftests, bench) are, as a host path,
    /// when they come from the share instead of the initramfs.
    pub bindir: Option<String>,
}

/// A host command to run inside the shared root.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HostCommand {
    pub argv: Vec<String>,
    pub cwd: String,
    pub env: Vec<(String, String)>,
    /// An interactive shell on [`SHELL_TTY`] instead of output ports.
    pub shell: bool,
    /// The command reads [`STDIN_PORT`] (the host's piped stdin, to its
    /// end) instead of /dev/null.
    pub stdin: bool,
    /// The host terminal's size, passed to the shell's terminal.
    pub rows: u16,
    pub cols: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Request {
    pub share: Option<Share>,
    pub command: Option<HostCommand>,
}

impl Request {
    pub fn encode(&self) -> Vec<u8> {
        let mut pairs: Vec<(&str, String)> = Vec::new();
        if let Some(s) = &self.share {
            pairs.push(("share", s.kind.name().into()));
            pairs.push(("project", s.project.clone()));
            if let Some(b) = &s.bindir {
                pairs.push(("bindir", b.clone()));
            }
        }
        if let Some(c) = &self.command {
            pairs.extend(c.argv.iter().map(|a| ("arg", a.clone())));
            pairs.push(("cwd", c.cwd.clone()));
            pairs.extend(c.env.iter().map(|(k, v)| ("env", format!("{k}={v}"))));
            if c.shell {
                pairs.push(("shell", "1".into()));
            }
            if c.stdin {
                pairs.push(("stdin", "1".into()));
            }
            pairs.push(("rows", c.rows.to_string()));
            pairs.push(("cols", c.cols.to_string()));
        }
        let mut out = Vec::new();
        for (k, v) in pairs {
            out.extend_from_slice(k.as_bytes());
            out.push(0);
            out.extend_from_slice(v.as_bytes());
            out.push(0);
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<Request, String> {
        let text = std::str::from_utf8(bytes).map_err(|e| format!("request: {e}"))?;
        let words: Vec<&str> = text
            .strip_suffix('\0')
            .unwrap_or(text)
            .split('\0')
            .collect();
        if text.is_empty() {
            return Ok(Request::default());
        }
        if !words.len().is_multiple_of(2) {
            return Err("request: a key without a value".into());
        }
        let mut share_kind = None;
        let mut project = None;
        let mut bindir = None;
        let mut cmd = HostCommand::default();
        let mut has_command = false;
        for pair in words.chunks(2) {
            let (key, value) = (pair[0], pair[1]);
            let number = || {
                value
                    .parse::<u16>()
                    .map_err(|_| format!("request: {key}={value:?}"))
            };
            match key {
                "share" => {
                    share_kind =
                        Some(ShareKind::parse(value).ok_or(format!("request: share={value:?}"))?)
                }
                "project" => project = Some(value.to_string()),
                "bindir" => bindir = Some(value.to_string()),
                "arg" => cmd.argv.push(value.to_string()),
                "cwd" => {
                    has_command = true;
                    cmd.cwd = value.to_string();
                }
                "env" => {
                    let (k, v) = value
                        .split_once('=')
                        .ok_or(format!("request: env {value:?} has no '='"))?;
                    cmd.env.push((k.to_string(), v.to_string()));
                }
                "shell" => cmd.shell = value == "1",
                "stdin" => cmd.stdin = value == "1",
                "rows" => cmd.rows = number()?,
                "cols" => cmd.cols = number()?,
                _ => return Err(format!("request: unknown key {key:?}")),
            }
        }
        let share = match (share_kind, project) {
            (Some(kind), Some(project)) => Some(Share {
                kind,
                project,
                bindir,
            }),
            (None, None) => None,
            _ => return Err("request: a share needs both its kind and the project".into()),
        };
        if has_command && cmd.argv.is_empty() && !cmd.shell {
            return Err("request: a command without argv".into());
        }
        Ok(Request {
            share,
            command: has_command.then_some(cmd),
        })
    }
}

/// The shell-style exit status of a command: its code, or 128 + the
/// signal that killed it.
pub fn exit_status(code: Option<i32>, signal: Option<i32>) -> i32 {
    match (code, signal) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        (None, None) => 255,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> Request {
        Request {
            share: Some(Share {
                kind: ShareKind::NineP,
                project: "/home/dev/my project".into(),
                bindir: Some("/home/dev/my project/target/guest".into()),
            }),
            command: Some(HostCommand {
                argv: vec!["sh".into(), "-c".into(), "echo a=b, c\n".into(), "".into()],
                cwd: "/home/dev/my project/sub".into(),
                env: vec![
                    ("PATH".into(), "/usr/bin:/bin".into()),
                    ("X".into(), "1=2".into()),
                ],
                shell: false,
                stdin: true,
                rows: 40,
                cols: 120,
            }),
        }
    }

    #[test]
    fn what_the_host_writes_the_guest_reads() {
        let r = full();
        assert_eq!(Request::decode(&r.encode()).unwrap(), r);
        let shell = Request {
            share: None,
            command: Some(HostCommand {
                shell: true,
                cwd: "/".into(),
                ..HostCommand::default()
            }),
        };
        assert_eq!(Request::decode(&shell.encode()).unwrap(), shell);
        assert_eq!(Request::decode(b"").unwrap(), Request::default());
        for k in ShareKind::ALL {
            assert_eq!(ShareKind::parse(k.name()), Some(k));
        }
    }

    #[test]
    fn malformed_requests_are_errors() {
        assert!(Request::decode(b"share\0virtiofs\0").is_err(), "no project");
        assert!(Request::decode(b"share\0nfs\0project\0/p\0").is_err());
        assert!(Request::decode(b"cwd\0/\0").is_err(), "no argv");
        assert!(Request::decode(b"arg\0x\0cwd\0/\0env\0NOEQ\0").is_err());
        assert!(Request::decode(b"arg\0x\0cwd\0/\0rows\0many\0").is_err());
        assert!(Request::decode(b"colour\0red\0").is_err());
        assert!(Request::decode(b"arg\0").is_err());
    }

    #[test]
    fn statuses_follow_the_shell() {
        assert_eq!(exit_status(Some(0), None), 0);
        assert_eq!(exit_status(Some(3), None), 3);
        assert_eq!(exit_status(None, Some(9)), 137);
    }
}
