//! The verdict /init reports to the host, and how a child's fate maps to it
//! (pure code).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail,
    Error,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub outcome: Outcome,
    /// One line of detail, e.g. `exit=1` or `signal=SIGSEGV`.
    pub detail: String,
}

impl Verdict {
    pub fn error(detail: impl Into<String>) -> Self {
        Verdict {
            outcome: Outcome::Error,
            detail: detail.into(),
        }
    }

    /// The single line written to the results port, newline included. The
    /// detail is squashed onto one line so the host's line parser can't be
    /// confused by it.
    pub fn line(&self) -> String {
        let outcome = match self.outcome {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Error => "error",
        };
        let detail: String = self
            .detail
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let detail = detail.trim();
        let detail = if detail.is_empty() { "-" } else { detail };
        format!("{} {outcome} {detail}\n", guest_common::protocol::VERDICT)
    }
}

/// How the program ended, as reported by wait().
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

/// Exit 0 passes, exit 1 is a test failure; anything else means the
/// program itself broke, which must not be mistaken for a test result.
pub fn from_exit(exit: Exit) -> Verdict {
    match exit {
        Exit::Code(0) => Verdict {
            outcome: Outcome::Pass,
            detail: "exit=0".into(),
        },
        Exit::Code(1) => Verdict {
            outcome: Outcome::Fail,
            detail: "exit=1".into(),
        },
        Exit::Code(code) => Verdict::error(format!("exit={code}")),
        Exit::Signal(sig) => Verdict::error(format!("signal={}", guest_common::signal_label(sig))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_mapping() {
        assert_eq!(from_exit(Exit::Code(0)).outcome, Outcome::Pass);
        assert_eq!(from_exit(Exit::Code(1)).outcome, Outcome::Fail);
        let v = from_exit(Exit::Code(2));
        assert_eq!((v.outcome, v.detail.as_str()), (Outcome::Error, "exit=2"));
        let v = from_exit(Exit::Code(101));
        assert_eq!(v.outcome, Outcome::Error);
        let v = from_exit(Exit::Signal(libc::SIGSEGV));
        assert_eq!(
            (v.outcome, v.detail.as_str()),
            (Outcome::Error, "signal=SIGSEGV")
        );
        assert_eq!(from_exit(Exit::Signal(40)).detail, "signal=signal 40");
    }

    #[test]
    fn lines() {
        assert_eq!(
            from_exit(Exit::Code(0)).line(),
            "BPFLAB-VERDICT pass exit=0\n"
        );
        assert_eq!(
            from_exit(Exit::Code(1)).line(),
            "BPFLAB-VERDICT fail exit=1\n"
        );
        assert_eq!(
            Verdict::error("mount /proc: ENODEV").line(),
            "BPFLAB-VERDICT error mount /proc: ENODEV\n"
        );
    }

    #[test]
    fn detail_is_one_line() {
        let v = Verdict::error("init panic: a\nb\r\n");
        assert_eq!(v.line(), "BPFLAB-VERDICT error init panic: a b\n");
        assert_eq!(Verdict::error("").line(), "BPFLAB-VERDICT error -\n");
    }
}
