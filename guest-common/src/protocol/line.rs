//! One line of the results channel, typed: the guest writes a `Line`
//! with `Display` and the host reads it back with `FromStr`, so the two
//! sides cannot spell the protocol differently.

use std::fmt;
use std::str::FromStr;

use super::{ResultWord, BENCH, FUZZ, PLAN, RESULT, START, VERDICT};

/// How the guest program's run ended, as /init judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail,
    /// The program could not run, or broke: not a test result.
    Error,
}

impl Outcome {
    pub const ALL: [Outcome; 3] = [Outcome::Pass, Outcome::Fail, Outcome::Error];

    pub fn word(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Error => "error",
        }
    }

    pub fn parse(word: &str) -> Option<Outcome> {
        Self::ALL.into_iter().find(|o| o.word() == word)
    }
}

/// What the verdict says beyond its outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detail {
    /// The guest program's exit code: `exit=N`.
    Exit(i32),
    /// The signal that ended it: `signal=SIGSEGV`.
    Signal(String),
    /// A host command's exit status, as a shell gives it (128+N for a
    /// signal): `status=N`.
    Status(u8),
    /// Why /init could not run the program, on one line.
    Text(String),
}

impl fmt::Display for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Detail::Exit(code) => write!(f, "exit={code}"),
            Detail::Signal(name) => write!(f, "signal={name}"),
            Detail::Status(status) => write!(f, "status={status}"),
            Detail::Text(text) if one_line(text).is_empty() => f.write_str("-"),
            Detail::Text(text) => f.write_str(&one_line(text)),
        }
    }
}

impl Detail {
    fn parse(text: &str) -> Detail {
        if let Some(code) = text.strip_prefix("exit=").and_then(|n| n.parse().ok()) {
            return Detail::Exit(code);
        }
        if let Some(status) = text.strip_prefix("status=").and_then(|n| n.parse().ok()) {
            return Detail::Status(status);
        }
        match text.strip_prefix("signal=") {
            Some(name) if !name.is_empty() => Detail::Signal(name.into()),
            _ if text == "-" => Detail::Text(String::new()),
            _ => Detail::Text(text.to_string()),
        }
    }
}

/// The one verdict /init writes at the end of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub outcome: Outcome,
    pub detail: Detail,
}

impl Verdict {
    pub fn error(text: impl Into<String>) -> Verdict {
        Verdict {
            outcome: Outcome::Error,
            detail: Detail::Text(text.into()),
        }
    }

    /// A host command's exit status, if this verdict carries one.
    pub fn status(&self) -> Option<u8> {
        match self.detail {
            Detail::Status(s) => Some(s),
            _ => None,
        }
    }
}

/// One test's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestLine {
    pub name: String,
    pub word: ResultWord,
    pub millis: u64,
    /// On one line (squashed when written); empty for a pass.
    pub message: String,
}

/// One line of the results channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    /// The tests about to run: how many, and their names in order (a
    /// plan may give the count alone).
    Plan {
        count: usize,
        names: Vec<String>,
    },
    /// A test begins: it names the culprit if the kernel dies during it.
    Start(String),
    Result(TestLine),
    /// One benchmark record, JSON.
    Bench(String),
    /// One fuzzer record (progress, a divergence, the summary), JSON.
    Fuzz(String),
    Verdict(Verdict),
}

/// `text` with control characters as spaces, trimmed: a message never
/// splits the line it is on.
fn one_line(text: &str) -> String {
    let s: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    s.trim().to_string()
}

impl fmt::Display for Line {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Line::Plan { count, names } => {
                write!(f, "{PLAN} {count}")?;
                names.iter().try_for_each(|n| write!(f, " {n}"))
            }
            Line::Start(name) => write!(f, "{START} {name}"),
            Line::Result(t) => {
                write!(f, "{RESULT} {} {} {}", t.name, t.word.word(), t.millis)?;
                match one_line(&t.message) {
                    m if m.is_empty() => Ok(()),
                    m => write!(f, " {m}"),
                }
            }
            Line::Bench(json) => write!(f, "{BENCH} {}", one_line(json)),
            Line::Fuzz(json) => write!(f, "{FUZZ} {}", one_line(json)),
            Line::Verdict(v) => write!(f, "{VERDICT} {} {}", v.outcome.word(), v.detail),
        }
    }
}

impl FromStr for Line {
    type Err = String;

    /// One line without its newline (a trailing `\r` is allowed).
    fn from_str(line: &str) -> Result<Line, String> {
        let line = line.trim_end_matches('\r');
        let (tag, rest) = line.split_once(' ').unwrap_or((line, ""));
        let parsed = match tag {
            PLAN => parse_plan(rest),
            START if !rest.trim().is_empty() => Some(Line::Start(rest.trim().to_string())),
            RESULT => parse_result(rest).map(Line::Result),
            BENCH => Some(Line::Bench(rest.to_string())),
            FUZZ => Some(Line::Fuzz(rest.to_string())),
            VERDICT => parse_verdict(rest).map(Line::Verdict),
            _ => None,
        };
        parsed.ok_or_else(|| format!("malformed results line: {line:?}"))
    }
}

/// `<n> [names...]`: the count must match the names when they are given.
fn parse_plan(rest: &str) -> Option<Line> {
    let mut words = rest.split_whitespace();
    let count: usize = words.next()?.parse().ok()?;
    let names: Vec<String> = words.map(str::to_string).collect();
    (names.is_empty() || names.len() == count).then_some(Line::Plan { count, names })
}

fn parse_result(rest: &str) -> Option<TestLine> {
    let mut parts = rest.splitn(4, ' ');
    let name = parts.next().filter(|n| !n.is_empty())?.to_string();
    let word = ResultWord::parse(parts.next()?)?;
    let millis = parts.next()?.parse().ok()?;
    let message = parts.next().unwrap_or("").trim().to_string();
    Some(TestLine {
        name,
        word,
        millis,
        message,
    })
}

fn parse_verdict(rest: &str) -> Option<Verdict> {
    let (word, detail) = rest.split_once(' ').unwrap_or((rest, ""));
    Some(Verdict {
        outcome: Outcome::parse(word)?,
        detail: Detail::parse(detail.trim()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(name: &str, word: ResultWord, millis: u64, message: &str) -> Line {
        Line::Result(TestLine {
            name: name.into(),
            word,
            millis,
            message: message.into(),
        })
    }

    #[test]
    fn every_kind_of_line_round_trips() {
        let lines = [
            Line::Plan {
                count: 2,
                names: vec!["t01_a".into(), "t02_b".into()],
            },
            Line::Plan {
                count: 3,
                names: vec![],
            },
            Line::Start("t01_a".into()),
            result("t01_a", ResultWord::Pass, 12, ""),
            result("t02_b", ResultWord::Fail, 7, "expected 3 pages | got 2048"),
            result("t03_c", ResultWord::Skip, 0, "one NUMA node"),
            result("t04_d", ResultWord::NotRun, 0, "the runner stopped"),
            Line::Bench("{\"kind\":\"scenario\"}".into()),
            Line::Fuzz("{\"kind\":\"progress\"}".into()),
            Line::Verdict(Verdict {
                outcome: Outcome::Pass,
                detail: Detail::Exit(0),
            }),
            Line::Verdict(Verdict {
                outcome: Outcome::Error,
                detail: Detail::Signal("SIGSEGV".into()),
            }),
            Line::Verdict(Verdict {
                outcome: Outcome::Fail,
                detail: Detail::Status(137),
            }),
            Line::Verdict(Verdict {
                outcome: Outcome::Error,
                detail: Detail::Signal("signal 40".into()),
            }),
            Line::Verdict(Verdict::error("exec /bin/selftests: ENOENT")),
        ];
        for line in lines {
            let text = line.to_string();
            assert!(!text.contains('\n'), "{text:?}");
            assert_eq!(text.parse::<Line>(), Ok(line), "{text}");
        }
    }

    #[test]
    fn the_spelling_on_the_wire() {
        let v = |outcome, detail| Line::Verdict(Verdict { outcome, detail }).to_string();
        assert_eq!(
            v(Outcome::Pass, Detail::Exit(0)),
            "BPFLAB-VERDICT pass exit=0"
        );
        assert_eq!(
            v(Outcome::Fail, Detail::Status(137)),
            "BPFLAB-VERDICT fail status=137"
        );
        assert_eq!(
            Line::Verdict(Verdict::error("init panic: a\nb\r\n")).to_string(),
            "BPFLAB-VERDICT error init panic: a b"
        );
        assert_eq!(
            Line::Verdict(Verdict::error("")).to_string(),
            "BPFLAB-VERDICT error -"
        );
        assert_eq!(
            result("t01", ResultWord::Fail, 3, "x\ny").to_string(),
            "BPFLAB-RESULT t01 fail 3 x y"
        );
        assert_eq!(Line::Start("t01".into()).to_string(), "BPFLAB-START t01");
    }

    #[test]
    fn what_cannot_be_trusted_is_refused() {
        for bad in [
            "BPFLAB-PLAN 3 t01_a",
            "BPFLAB-PLAN x",
            "BPFLAB-START",
            "BPFLAB-RESULT t01 maybe 1",
            "BPFLAB-RESULT t01 pass",
            "BPFLAB-RESULT  pass 1",
            "BPFLAB-VERDICT perhaps exit=0",
            "BPFLAB-NOISE 1",
        ] {
            assert!(bad.parse::<Line>().is_err(), "{bad}");
        }
        let status = |d: &str| match format!("BPFLAB-VERDICT fail {d}").parse::<Line>() {
            Ok(Line::Verdict(v)) => v.status(),
            other => panic!("{other:?}"),
        };
        assert_eq!(status("status=0"), Some(0));
        assert_eq!(status("status=999"), None, "not an exit status");
        assert_eq!(status("exit=1"), None);
    }
}
