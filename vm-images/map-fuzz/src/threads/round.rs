//! A round of `--threads`: what each thread does at once, drawn from the
//! seed. Most of a round lands on one hot spot (a mapping and a few pages
//! of it), so that faults race on the same pages and windows.

use std::fmt;

use crate::model::WORDS;
use crate::rng::Rng;

/// The most events of a round, over all threads: every order of them is
/// modelled (720 orders for six events of six threads).
pub const MAX_EVENTS: usize = 6;

/// One mapping the threads share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vma {
    pub addr: usize,
    pub pages: usize,
    /// Which of the maps it maps (all of it, from page 0).
    pub map: usize,
}

/// One thing a thread does in a round. Pages are the mapping's (and, as
/// every mapping maps its map from its start, the map's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A load of one of the thread's own words.
    Load {
        vma: usize,
        page: usize,
        word: usize,
    },
    /// A store to one of them.
    Store {
        vma: usize,
        page: usize,
        word: usize,
        value: u64,
    },
    /// MADV_POPULATE_READ or _WRITE of pages `at..at + pages`.
    Populate {
        vma: usize,
        at: usize,
        pages: usize,
        write: bool,
    },
    /// MADV_DONTNEED of them (not on base: a hole there in any order).
    Zap { vma: usize, at: usize, pages: usize },
}

impl Event {
    pub fn vma(&self) -> usize {
        match *self {
            Event::Load { vma, .. }
            | Event::Store { vma, .. }
            | Event::Populate { vma, .. }
            | Event::Zap { vma, .. } => vma,
        }
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Event::Load { vma, page, word } => write!(f, "load v{vma} @{page}.{word}"),
            Event::Store {
                vma,
                page,
                word,
                value,
            } => write!(f, "store v{vma} @{page}.{word}={value:x}"),
            Event::Populate {
                vma,
                at,
                pages,
                write,
            } => write!(
                f,
                "populate_{} v{vma} @{at}+{pages}",
                if write { "write" } else { "read" }
            ),
            Event::Zap { vma, at, pages } => write!(f, "dontneed v{vma} @{at}+{pages}"),
        }
    }
}

/// Each thread's events, in its order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Round(pub Vec<Vec<Event>>);

impl fmt::Display for Round {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let threads: Vec<String> = self
            .0
            .iter()
            .enumerate()
            .filter(|(_, e)| !e.is_empty())
            .map(|(t, events)| {
                let e: Vec<String> = events.iter().map(Event::to_string).collect();
                format!("t{t}: {}", e.join(", "))
            })
            .collect();
        f.write_str(&threads.join("; "))
    }
}

impl std::str::FromStr for Event {
    type Err = String;

    /// An event as Display writes it: `load v0 @3.5`, `store v0 @3.5=ff`,
    /// `populate_read v1 @2+4`, `populate_write ...`, `dontneed ...`.
    fn from_str(text: &str) -> Result<Event, String> {
        let bad = || {
            format!("{text:?}: not an event (load, store, populate_read, populate_write, dontneed)")
        };
        let (verb, rest) = text.trim().split_once(' ').ok_or_else(bad)?;
        let (vma, place) = rest.split_once(" @").ok_or_else(bad)?;
        let num = |t: &str| t.parse::<usize>().map_err(|_| bad());
        let vma = num(vma.strip_prefix('v').ok_or_else(bad)?)?;
        let word = |place: &str| -> Result<(usize, usize), String> {
            let (page, word) = place.split_once('.').ok_or_else(bad)?;
            Ok((num(page)?, num(word)?))
        };
        let run = || -> Result<(usize, usize), String> {
            let (at, pages) = place.split_once('+').ok_or_else(bad)?;
            Ok((num(at)?, num(pages)?))
        };
        Ok(match verb {
            "load" => {
                let (page, word) = word(place)?;
                Event::Load { vma, page, word }
            }
            "store" => {
                let (place, value) = place.split_once('=').ok_or_else(bad)?;
                let (page, word) = word(place)?;
                let value = u64::from_str_radix(value, 16).map_err(|_| bad())?;
                Event::Store {
                    vma,
                    page,
                    word,
                    value,
                }
            }
            "populate_read" | "populate_write" => {
                let (at, pages) = run()?;
                Event::Populate {
                    vma,
                    at,
                    pages,
                    write: verb == "populate_write",
                }
            }
            "dontneed" => {
                let (at, pages) = run()?;
                Event::Zap { vma, at, pages }
            }
            _ => return Err(bad()),
        })
    }
}

impl Round {
    /// A round as Display writes it (`t0: load v0 @3.5, ...; t2: ...`),
    /// for `threads` threads.
    pub fn parse(text: &str, threads: usize) -> Result<Round, String> {
        let mut round = vec![Vec::new(); threads];
        for part in text.split(';') {
            let (t, events) = part
                .trim()
                .split_once(": ")
                .ok_or(format!("{part:?}: not `tN: events`"))?;
            let t: usize = t
                .strip_prefix('t')
                .and_then(|t| t.parse().ok())
                .filter(|&t| t < threads)
                .ok_or(format!("{t:?}: not a thread of {threads}"))?;
            for e in events.split(", ") {
                round[t].push(e.parse()?);
            }
        }
        Ok(Round(round))
    }
}

/// One of thread `t`'s words (those whose index is `t` modulo `threads`).
pub fn own_word(rng: &mut Rng, t: usize, threads: usize) -> usize {
    t + threads * rng.below((WORDS - t).div_ceil(threads))
}

/// Draws a round for `threads` threads over `vmas`: at least two threads
/// busy, at most MAX_EVENTS events; `zaps` whether DONTNEED may be drawn.
pub fn draw(rng: &mut Rng, vmas: &[Vma], threads: usize, zaps: bool) -> Round {
    let hot = rng.below(vmas.len());
    let hot_page = rng.below(vmas[hot].pages);
    let mut round = vec![Vec::new(); threads];
    let busy = rng.between(2.min(threads), threads.min(MAX_EVENTS));
    let mut order: Vec<usize> = (0..threads).collect();
    for i in 0..busy {
        // A random `busy` of the threads (a partial shuffle).
        let j = rng.between(i, threads - 1);
        order.swap(i, j);
    }
    // One event each, and a second for some while the round has room.
    let mut extra = MAX_EVENTS - busy;
    for &t in &order[..busy] {
        let n = if extra > 0 && rng.chance(1, 2) {
            extra -= 1;
            2
        } else {
            1
        };
        for _ in 0..n {
            round[t].push(event(rng, vmas, (hot, hot_page), (t, threads), zaps));
        }
    }
    Round(round)
}

fn event(
    rng: &mut Rng,
    vmas: &[Vma],
    (hot, hot_page): (usize, usize),
    (t, threads): (usize, usize),
    zaps: bool,
) -> Event {
    let (vma, page) = if rng.chance(3, 4) {
        let pages = vmas[hot].pages;
        let near = hot_page.saturating_sub(8) + rng.below(17);
        (hot, near.min(pages - 1))
    } else {
        let v = rng.below(vmas.len());
        (v, rng.below(vmas[v].pages))
    };
    let pages = vmas[vma].pages;
    let run = |rng: &mut Rng| rng.between(1, (pages - page).min(8));
    match rng.weighted(&[5, 4, 3, if zaps { 2 } else { 0 }]) {
        0 => Event::Load {
            vma,
            page,
            word: own_word(rng, t, threads),
        },
        1 => Event::Store {
            vma,
            page,
            word: own_word(rng, t, threads),
            value: rng.next_u64(),
        },
        2 => Event::Populate {
            vma,
            at: page,
            pages: run(rng),
            write: rng.chance(1, 2),
        },
        _ => Event::Zap {
            vma,
            at: page,
            pages: run(rng),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mapping of each map, as the threads' rounds see them.
    fn two_vmas() -> [Vma; 2] {
        [(100, 0), (16, 1)].map(|(pages, map)| Vma {
            addr: 0,
            pages,
            map,
        })
    }

    #[test]
    fn a_round_keeps_two_threads_busy_and_its_events_few() {
        let vmas = two_vmas();
        let mut rng = Rng::new(3);
        for threads in [2, 4, 8] {
            for _ in 0..500 {
                let Round(r) = draw(&mut rng, &vmas, threads, true);
                let busy = r.iter().filter(|e| !e.is_empty()).count();
                let events: usize = r.iter().map(Vec::len).sum();
                assert!(busy >= 2 && events <= MAX_EVENTS, "{r:?}");
                for (t, events) in r.iter().enumerate() {
                    for e in events {
                        if let Event::Load { word, .. } | Event::Store { word, .. } = e {
                            assert_eq!(word % threads, t, "{e}: not thread {t}'s word");
                            assert!(*word < WORDS);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_round_reads_back_from_its_text() {
        let vmas = two_vmas();
        let mut rng = Rng::new(5);
        for threads in [2, 4] {
            for _ in 0..300 {
                let round = draw(&mut rng, &vmas, threads, true);
                let text = round.to_string();
                assert_eq!(Round::parse(&text, threads).as_ref(), Ok(&round), "{text}");
            }
        }
        for bad in [
            "t9: load v0 @1.2",
            "t0: lod v0 @1.2",
            "t0: store v0 @1.2",
            "t0: populate_read v0 @1",
            "load v0 @1.2",
        ] {
            assert!(Round::parse(bad, 4).is_err(), "{bad}");
        }
    }
}
