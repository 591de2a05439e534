//! `--threads T`: rounds of racing faults. Two maps, each mapped twice,
//! are shared by T threads; in each round some of them, released by one
//! barrier at once, load, store, populate and zap pages near one hot spot,
//! and wait at another. Then the round is checked against the model of
//! every order its events can run in (`bounds`):
//!
//! - no access or madvise failed or raised a signal: none may, in any
//!   order (every mapping is writable, and base, where a zapped page is a
//!   hole, has no zaps);
//! - each thread owns the words whose index is its own modulo T and is
//!   their only writer: its loads read what it last stored, and after the
//!   round every word stored reads so through the syscall and through each
//!   mapping where its page is present;
//! - each mapping's present pages hold what every order leaves and
//!   nothing no order maps; the model then takes them as they are;
//! - the kernel log stays clean.

pub mod bounds;
mod catch;
pub mod round;
pub mod script;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use selftests::kmsg::Kmsg;
use selftests::proc::pagemap_present;
use selftests::runner::model::Fill;
use selftests::sys::bpf::{Map, MapSpec};
use selftests::sys::mm;

use self::bounds::{bounds, Effect};
use self::round::{Event, Round, Vma};
use self::script::Script;
use crate::model::inject::show_pages;
use crate::model::{Ret, PAGE};
use crate::rng::Rng;
use crate::run::{show, Settings};

/// The maps' sizes in pages; each is mapped twice.
const MAPS: [usize; 2] = [100, 16];

/// The mappings: each map twice, v0 and v1 of map 0, v2 and v3 of map 1.
pub const VMAS: usize = 2 * MAPS.len();

/// The most threads a round has: each owns words of a page.
pub const MAX_THREADS: usize = 64;

/// The pages of mapping `v`.
pub fn vma_pages(v: usize) -> usize {
    MAPS[v / 2]
}

/// The last rounds kept for shrinking (between this and twice as many):
/// replaying more would outlast a shrinking try.
const HISTORY: usize = 1024;

/// Rounds between progress reports.
const PROGRESS_ROUNDS: usize = 50;

/// What the threads did, and the first thing that broke.
#[derive(Debug, Default)]
pub struct ThreadsOutcome {
    pub threads: usize,
    /// Events done, over all threads and rounds.
    pub ops: usize,
    pub rounds: usize,
    /// Times a script's rounds were run on fresh maps.
    pub repetitions: usize,
    pub elapsed: Duration,
    pub failure: Option<Broken>,
    /// The last rounds run on the last maps (HISTORY or more), the
    /// broken one last.
    pub history: Vec<Round>,
}

/// A round that broke: which check (`returns`, `presence`, `word`,
/// `log`: a replay recurs when the same one breaks) and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    pub check: &'static str,
    pub what: String,
}

/// Where a run's rounds come from.
pub enum Rounds {
    /// Drawn from the seed until the budget is spent.
    Draw { seed: u64 },
    /// A reproducer's, in order on fresh maps, and again until one breaks
    /// or the budget is spent.
    Script(Vec<Round>),
}

/// What the coordinator and the threads share: the round to do, what
/// each thread's events returned, and the barriers around a round.
struct Shared {
    round: Mutex<Round>,
    results: Mutex<Vec<Vec<Ret>>>,
    start: Barrier,
    end: Barrier,
    stop: AtomicBool,
}

/// The words the threads own, by (map, byte offset): what was last
/// stored (0 if nothing).
type Owned = HashMap<(usize, usize), u64>;

/// Runs rounds of `threads` threads for `budget`; `progress` hears of the
/// events done every PROGRESS_ROUNDS rounds, with digest 0 (the order
/// they ran in is the scheduler's: no two runs have one to compare).
pub fn run(
    settings: &Settings,
    rounds: Rounds,
    budget: Duration,
    threads: usize,
    progress: &mut dyn FnMut(usize, u64) -> Result<(), String>,
) -> Result<ThreadsOutcome, String> {
    let started = Instant::now();
    let mut out = ThreadsOutcome {
        threads,
        ..Default::default()
    };
    match rounds {
        Rounds::Draw { seed } => {
            let mut rng = Rng::new(seed);
            // Base maps every page at mmap(): a zapped one is a hole.
            let zaps = settings.kernel.fill() != Fill::Eager;
            let mut next = |vmas: &[Vma]| {
                (started.elapsed() < budget).then(|| round::draw(&mut rng, vmas, threads, zaps))
            };
            on_fresh_maps(settings, &mut out, &mut next, progress)?;
        }
        Rounds::Script(script) => loop {
            let mut rounds = script.iter().cloned();
            on_fresh_maps(settings, &mut out, &mut |_| rounds.next(), progress)?;
            out.repetitions += 1;
            if out.failure.is_some() || started.elapsed() >= budget {
                break;
            }
        },
    }
    out.elapsed = started.elapsed();
    progress(out.ops, 0)?;
    Ok(out)
}

/// Rounds from `next` on maps made for them, until it has none or one
/// breaks; the rounds are kept in `out.history`.
fn on_fresh_maps(
    settings: &Settings,
    out: &mut ThreadsOutcome,
    next: &mut dyn FnMut(&[Vma]) -> Option<Round>,
    progress: &mut dyn FnMut(usize, u64) -> Result<(), String>,
) -> Result<(), String> {
    let threads = out.threads;
    let (maps, mappings, vmas) = shared_maps()?;
    let kernel = settings.kernel;
    let mut state = State {
        fill: kernel.fill(),
        // mmap() maps every page on eager, and on adaptive a mapping of
        // up to POPULATE_PAGES pages (all of these are).
        present: vmas
            .iter()
            .map(|v| match kernel.populates(v.pages) {
                true => (0..v.pages).collect(),
                false => BTreeSet::new(),
            })
            .collect(),
        owned: Owned::new(),
        kmsg: Kmsg::open_at_end().map_err(|e| format!("opening /dev/kmsg: {e}"))?,
    };
    let shared = Shared {
        round: Mutex::new(Round(Vec::new())),
        results: Mutex::new(vec![Vec::new(); threads]),
        start: Barrier::new(threads + 1),
        end: Barrier::new(threads + 1),
        stop: AtomicBool::new(false),
    };
    let _handler = catch::Installed::new();
    out.history.clear();
    std::thread::scope(|s| -> Result<(), String> {
        for t in 0..threads {
            let (shared, vmas) = (&shared, &vmas);
            s.spawn(move || worker(t, shared, vmas));
        }
        // Released however the loop ends, so that the scope can join them.
        let _release = Release(&shared);
        while let Some(round) = next(&vmas) {
            let results = race(&shared, &round);
            out.rounds += 1;
            out.ops += round.0.iter().map(Vec::len).sum::<usize>();
            let checked = state.check(&round, &results, (&vmas, &maps));
            out.history.push(round);
            if out.history.len() > 2 * HISTORY {
                out.history.drain(..HISTORY);
            }
            if let Err(mut broken) = checked {
                let last = out.history.last().expect("just pushed");
                broken.what = format!("round {} ({last}): {}", out.rounds, broken.what);
                out.failure = Some(broken);
                break;
            }
            if out.rounds.is_multiple_of(PROGRESS_ROUNDS) {
                progress(out.ops, 0)?;
            }
        }
        Ok(())
    })?;
    drop(mappings);
    Ok(())
}

/// The maps the threads share, their mappings (kept while they are used)
/// and where those are.
type SharedMaps = (Vec<Map>, Vec<mm::Mapping>, Vec<Vma>);

/// The shared maps and their mappings (`VMAS` of them).
fn shared_maps() -> Result<SharedMaps, String> {
    let maps: Vec<Map> = MAPS
        .iter()
        .map(|&pages| MapSpec::mmapable_array(PAGE as u32, pages as u32).create())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("creating the shared maps: {e}"))?;
    let mut vmas = Vec::new();
    let mut mappings = Vec::new();
    for (map, (m, &pages)) in maps.iter().zip(&MAPS).enumerate() {
        for _ in 0..2 {
            let mapping = mm::map_shared(m.fd(), pages * PAGE, mm::RW, 0)
                .map_err(|e| format!("mapping map {map}: {e}"))?;
            vmas.push(Vma {
                addr: mapping.addr(),
                pages,
                map,
            });
            mappings.push(mapping);
        }
    }
    Ok((maps, mappings, vmas))
}

/// The shortest run of `history`'s last rounds that breaks the same
/// check again when replayed on fresh maps (doubling from the broken
/// round alone), each tried for up to `each` and all for `budget`; the
/// script found, and the tries.
pub fn shrink(
    settings: &Settings,
    out: &ThreadsOutcome,
    each: Duration,
    budget: Duration,
) -> (Option<Script>, usize) {
    let Some(broken) = &out.failure else {
        return (None, 0);
    };
    let started = Instant::now();
    let mut tries = 0;
    let mut len = 1;
    while started.elapsed() < budget {
        let take = len.min(out.history.len());
        let rounds = out.history[out.history.len() - take..].to_vec();
        let left = budget.saturating_sub(started.elapsed());
        tries += 1;
        let replay = run(
            settings,
            Rounds::Script(rounds.clone()),
            each.min(left),
            out.threads,
            &mut |_, _| Ok(()),
        );
        if replay.is_ok_and(|r| r.failure.is_some_and(|b| b.check == broken.check)) {
            let script = Script {
                threads: out.threads,
                rounds,
            };
            return (Some(script), tries);
        }
        if take == out.history.len() {
            break;
        }
        len *= 2;
    }
    (None, tries)
}

/// Stops the threads and lets them out of their barrier on drop.
struct Release<'a>(&'a Shared);

impl Drop for Release<'_> {
    fn drop(&mut self) {
        self.0.stop.store(true, Ordering::SeqCst);
        self.0.start.wait();
    }
}

/// One round: the threads released at once; what each event returned.
fn race(shared: &Shared, round: &Round) -> Vec<Vec<Ret>> {
    *shared.round.lock().expect("round") = round.clone();
    shared.start.wait();
    shared.end.wait();
    let slots = vec![Vec::new(); round.0.len()];
    std::mem::replace(&mut *shared.results.lock().expect("results"), slots)
}

/// Thread `t`: each round, its events, between the barriers.
fn worker(t: usize, shared: &Shared, vmas: &[Vma]) {
    loop {
        shared.start.wait();
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let events = shared.round.lock().expect("round").0[t].clone();
        let rets: Vec<Ret> = events.iter().map(|e| run_event(e, vmas)).collect();
        shared.results.lock().expect("results")[t] = rets;
        shared.end.wait();
    }
}

fn run_event(e: &Event, vmas: &[Vma]) -> Ret {
    let word_addr = |vma: usize, page: usize, word: usize| vmas[vma].addr + page * PAGE + word * 8;
    let advise = |vma: usize, at: usize, pages: usize, advice: i32| match mm::madvise(
        vmas[vma].addr + at * PAGE,
        pages * PAGE,
        advice,
    ) {
        Ok(()) => Ret::Ok,
        Err(e) => Ret::Errno(e.raw_os_error().unwrap_or(-1)),
    };
    match *e {
        Event::Load { vma, page, word } => match catch::load(word_addr(vma, page, word)) {
            Ok(v) => Ret::Value(v),
            Err(sig) => Ret::Signal(sig),
        },
        Event::Store {
            vma,
            page,
            word,
            value,
        } => match catch::store(word_addr(vma, page, word), value) {
            Ok(()) => Ret::Ok,
            Err(sig) => Ret::Signal(sig),
        },
        Event::Populate {
            vma,
            at,
            pages,
            write,
        } => {
            let advice = if write { 23 } else { 22 };
            advise(vma, at, pages, advice)
        }
        Event::Zap { vma, at, pages } => advise(vma, at, pages, libc::MADV_DONTNEED),
    }
}

/// The model between rounds: each mapping's present pages, the owned
/// words' values, and the log read so far.
struct State {
    fill: Fill,
    present: Vec<BTreeSet<usize>>,
    owned: Owned,
    kmsg: Kmsg,
}

impl State {
    /// The round's returns, the mappings' presence, the words stored and
    /// the log, against the model; the presence seen is taken.
    fn check(
        &mut self,
        round: &Round,
        results: &[Vec<Ret>],
        (vmas, maps): (&[Vma], &[Map]),
    ) -> Result<(), Broken> {
        let broke = |check: &'static str| move |what: String| Broken { check, what };
        let stored = self
            .returns(round, results, vmas)
            .map_err(broke("returns"))?;
        for (v, vma) in vmas.iter().enumerate() {
            let seen = present_pages(vma).map_err(broke("presence"))?;
            self.presence((v, vma.pages), round, &seen)
                .map_err(broke("presence"))?;
            self.present[v] = seen;
        }
        for &(map, page, word) in &stored {
            self.word(map, page, word, (vmas, maps))
                .map_err(broke("word"))?;
        }
        crate::check::log(&mut self.kmsg).map_err(broke("log"))
    }

    /// Each event's return; the words stored, as (map, page, word).
    fn returns(
        &mut self,
        round: &Round,
        results: &[Vec<Ret>],
        vmas: &[Vma],
    ) -> Result<Vec<(usize, usize, usize)>, String> {
        let mut stored = Vec::new();
        for (t, events) in round.0.iter().enumerate() {
            for (i, e) in events.iter().enumerate() {
                let got = results
                    .get(t)
                    .and_then(|r| r.get(i))
                    .ok_or(format!("thread {t} returned nothing for {e}"))?;
                let want = match *e {
                    Event::Load { vma, page, word } => {
                        let key = (vmas[vma].map, page * PAGE + word * 8);
                        Ret::Value(self.owned.get(&key).copied().unwrap_or(0))
                    }
                    Event::Store {
                        vma,
                        page,
                        word,
                        value,
                    } => {
                        self.owned
                            .insert((vmas[vma].map, page * PAGE + word * 8), value);
                        stored.push((vmas[vma].map, page, word));
                        Ret::Ok
                    }
                    Event::Populate { .. } | Event::Zap { .. } => Ret::Ok,
                };
                if *got != want {
                    return Err(format!(
                        "thread {t}'s {e} returned {}; every order gives {}",
                        show(got),
                        show(&want)
                    ));
                }
            }
        }
        Ok(stored)
    }

    /// Mapping `v`'s present pages after the round against every order's.
    fn presence(
        &self,
        (v, pages): (usize, usize),
        round: &Round,
        seen: &BTreeSet<usize>,
    ) -> Result<(), String> {
        let effects: Vec<Vec<Effect>> = round
            .0
            .iter()
            .map(|events| events.iter().filter(|e| e.vma() == v).map(effect).collect())
            .collect();
        let b = bounds(self.fill, &(0..pages), &self.present[v], &effects);
        let missing: BTreeSet<usize> = b.every.difference(seen).copied().collect();
        let extra: BTreeSet<usize> = seen.difference(&b.some).copied().collect();
        if missing.is_empty() && extra.is_empty() {
            return Ok(());
        }
        Err(format!(
            "mapping v{v}: present map pages {}, before the round {}; every order leaves {} \
             (missing {}), some order leaves {} (beyond it {})",
            show_pages(seen),
            show_pages(&self.present[v]),
            show_pages(&b.every),
            show_pages(&missing),
            show_pages(&b.some),
            show_pages(&extra)
        ))
    }

    /// A stored word, through the syscall and each mapping of its map
    /// where its page is present (reading there faults nothing).
    fn word(
        &self,
        map: usize,
        page: usize,
        word: usize,
        (vmas, maps): (&[Vma], &[Map]),
    ) -> Result<(), String> {
        let off = page * PAGE + word * 8;
        let want = self.owned[&(map, off)];
        let value = maps[map]
            .lookup_idx(page as u32)
            .map_err(|e| format!("BPF_MAP_LOOKUP_ELEM of map {map}: {e}"))?;
        let mut seen = vec![(
            u64::from_ne_bytes(value[word * 8..word * 8 + 8].try_into().expect("8 bytes")),
            "BPF_MAP_LOOKUP_ELEM".to_string(),
        )];
        for (v, vma) in vmas.iter().enumerate() {
            if vma.map == map && self.present[v].contains(&page) {
                // SAFETY: a present page of a writable mapping of ours.
                let got = unsafe { mm::peek(vma.addr + off) };
                seen.push((got, format!("mapping v{v}")));
            }
        }
        match seen.into_iter().find(|(got, _)| *got != want) {
            Some((got, how)) => Err(format!(
                "word {word} of page {page} of map {map} reads {got:#x} through {how}; \
                 its owner stored {want:#x}"
            )),
            None => Ok(()),
        }
    }
}

fn effect(e: &Event) -> Effect {
    match *e {
        Event::Load { page, .. } | Event::Store { page, .. } => Effect::Access(page),
        Event::Populate { at, pages, .. } => Effect::Populate(at..at + pages),
        Event::Zap { at, pages, .. } => Effect::Zap(at..at + pages),
    }
}

/// The present pages of `vma` (map pages: it maps its map from page 0).
fn present_pages(vma: &Vma) -> Result<BTreeSet<usize>, String> {
    let present =
        pagemap_present(vma.addr, vma.pages).map_err(|e| format!("reading pagemap: {e}"))?;
    Ok((0..vma.pages).filter(|&i| present[i]).collect())
}
