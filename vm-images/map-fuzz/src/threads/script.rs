//! A race reproducer: the rounds up to one that broke, with their
//! threads, as the text the host writes to a file and `--replay` reads:
//!
//! ```text
//! threads 4
//! round t0: load v0 @3.5; t1: populate_write v0 @2+4
//! ```
//!
//! A replay runs the rounds in order on fresh maps, and again, until one
//! breaks or its time is up: a race need not recur on each try.

use super::round::{Event, Round};
use super::{vma_pages, MAX_THREADS, VMAS};
use crate::model::WORDS;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    pub threads: usize,
    pub rounds: Vec<Round>,
}

impl Script {
    /// The reproducer's lines.
    pub fn lines(&self) -> Vec<String> {
        let rounds = self.rounds.iter().map(|r| format!("round {r}"));
        std::iter::once(format!("threads {}", self.threads))
            .chain(rounds)
            .collect()
    }

    /// The script `text` holds; None when it is not a race reproducer
    /// (its first line but comments is not `threads N`: operations).
    pub fn parse(text: &str) -> Result<Option<Script>, String> {
        let mut lines = text
            .lines()
            .enumerate()
            .map(|(i, l)| (i + 1, l.trim()))
            .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
        let Some(threads) = lines.next().and_then(|(_, l)| l.strip_prefix("threads ")) else {
            return Ok(None);
        };
        let threads = threads
            .parse::<usize>()
            .ok()
            .filter(|t| (2..=MAX_THREADS).contains(t))
            .ok_or(format!(
                "threads {threads:?}: not a number of threads from 2 to {MAX_THREADS}"
            ))?;
        let mut rounds = Vec::new();
        for (n, line) in lines {
            let round = line
                .strip_prefix("round ")
                .ok_or("not `round ...`".to_string())
                .and_then(|r| Round::parse(r, threads))
                .and_then(|r| fits(&r, threads).map(|()| r))
                .map_err(|e| format!("line {n}: {e}"))?;
            rounds.push(round);
        }
        if rounds.is_empty() {
            return Err("a race reproducer with no round".to_string());
        }
        Ok(Some(Script { threads, rounds }))
    }
}

/// Whether every event of `round` stays in its mapping and on its
/// thread's own words, as drawn rounds do.
fn fits(round: &Round, threads: usize) -> Result<(), String> {
    for (t, events) in round.0.iter().enumerate() {
        for e in events {
            let v = e.vma();
            let pages = (v < VMAS)
                .then(|| vma_pages(v))
                .ok_or(format!("{e}: no mapping v{v} (v0 to v{})", VMAS - 1))?;
            let (first, end, word) = match *e {
                Event::Load { page, word, .. } | Event::Store { page, word, .. } => {
                    (page, page + 1, Some(word))
                }
                Event::Populate { at, pages, .. } | Event::Zap { at, pages, .. } => {
                    (at, at + pages.max(1), None)
                }
            };
            if end > pages || first >= end {
                return Err(format!("{e}: past mapping v{v}'s {pages} pages"));
            }
            if let Some(w) = word.filter(|w| *w >= WORDS || w % threads != t) {
                return Err(format!("{e}: word {w} is not thread {t}'s"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_reads_back_from_its_lines() {
        let text = "# a comment\nthreads 3\nround t0: load v0 @3.0; t2: dontneed v1 @0+2\n\
                    round t1: store v3 @15.4=ff, populate_write v2 @8+8\n";
        let script = Script::parse(text).unwrap().unwrap();
        assert_eq!((script.threads, script.rounds.len()), (3, 2));
        let again = Script::parse(&script.lines().join("\n")).unwrap();
        assert_eq!(again, Some(script));
        assert_eq!(Script::parse("create m0 value=8 entries=1\n"), Ok(None));
    }

    #[test]
    fn a_script_that_leaves_its_mappings_or_words_is_refused() {
        for (bad, says) in [
            (
                "threads 1\nround t0: load v0 @0.0",
                "not a number of threads",
            ),
            ("threads 2", "no round"),
            ("threads 2\nround t0: load v4 @0.0", "no mapping v4"),
            (
                "threads 2\nround t0: load v2 @16.0",
                "past mapping v2's 16 pages",
            ),
            ("threads 2\nround t1: load v0 @0.2", "not thread 1's"),
            ("threads 2\nround t0: dontneed v0 @98+3", "past mapping"),
            ("threads 2\nload v0 @0.0", "line 2: not `round"),
        ] {
            let err = Script::parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
