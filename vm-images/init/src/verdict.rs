//! How the program's fate maps to the verdict /init reports (pure code).
//! The verdict itself is the protocol's type, written as one `Line`.

use guest_common::protocol::{Detail, Line, Outcome, Verdict};

/// The verdict as the line written to the results port, newline included.
pub fn wire(verdict: &Verdict) -> String {
    format!("{}\n", Line::Verdict(verdict.clone()))
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
    let (outcome, detail) = match exit {
        Exit::Code(0) => (Outcome::Pass, Detail::Exit(0)),
        Exit::Code(1) => (Outcome::Fail, Detail::Exit(1)),
        Exit::Code(code) => (Outcome::Error, Detail::Exit(code)),
        Exit::Signal(sig) => (
            Outcome::Error,
            Detail::Signal(guest_common::signal_label(sig)),
        ),
    };
    Verdict { outcome, detail }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_mapping() {
        assert_eq!(from_exit(Exit::Code(0)).outcome, Outcome::Pass);
        assert_eq!(from_exit(Exit::Code(1)).outcome, Outcome::Fail);
        let v = from_exit(Exit::Code(2));
        assert_eq!((v.outcome, v.detail), (Outcome::Error, Detail::Exit(2)));
        assert_eq!(from_exit(Exit::Code(101)).outcome, Outcome::Error);
        let v = from_exit(Exit::Signal(libc::SIGSEGV));
        assert_eq!(
            (v.outcome, v.detail),
            (Outcome::Error, Detail::Signal("SIGSEGV".into()))
        );
        assert_eq!(
            from_exit(Exit::Signal(40)).detail,
            Detail::Signal("signal 40".into())
        );
    }

    #[test]
    fn lines() {
        assert_eq!(
            wire(&from_exit(Exit::Code(0))),
            "BPFLAB-VERDICT pass exit=0\n"
        );
        assert_eq!(
            wire(&from_exit(Exit::Code(1))),
            "BPFLAB-VERDICT fail exit=1\n"
        );
        assert_eq!(
            wire(&Verdict::error("mount proc on /proc: ENODEV")),
            "BPFLAB-VERDICT error mount proc on /proc: ENODEV\n"
        );
        assert_eq!(
            wire(&Verdict::error("init panic: a\nb\r\n")),
            "BPFLAB-VERDICT error init panic: a b\n"
        );
        assert_eq!(wire(&Verdict::error("")), "BPFLAB-VERDICT error -\n");
    }
}
