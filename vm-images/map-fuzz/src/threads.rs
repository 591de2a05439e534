//! `--threads T`: T threads fault, zap, populate and write the same
//! mappings at once. The order they interleave in is the scheduler's, so
//! only what holds in every order is checked: each thread owns the words
//! whose index is its own modulo T and is the only writer of them, so
//! their last values are known; no operation may fail (every mapping is
//! writable, every range valid); and the kernel log stays clean.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use selftests::kmsg::Kmsg;
use selftests::runner::model::Fill;
use selftests::sys::bpf::{self, Map, MapSpec};
use selftests::sys::mm;

use crate::exec::progs;
use crate::model::{PAGE, WORDS};
use crate::op::{Advice, Elem};
use crate::rng::Rng;
use crate::run::Settings;

/// The shared mappings: (map, pages) for each map, each mapped twice.
const MAPS: [usize; 2] = [100, 16];

/// What the threads did, and the first thing that broke.
#[derive(Debug, Default)]
pub struct ThreadsOutcome {
    pub threads: usize,
    pub ops: usize,
    pub elapsed: Duration,
    pub failure: Option<String>,
}

/// One mapping the threads share: its address, its map and map pages.
#[derive(Debug, Clone, Copy)]
struct Shared {
    addr: usize,
    pages: usize,
    map: usize,
}

/// A thread's own words: (map, byte offset) to the value it last wrote.
type Owned = HashMap<(usize, usize), u64>;

/// Runs `threads` threads for `budget`; `progress` hears of the
/// operations done once they are, with digest 0 (the order they ran in
/// is the scheduler's: no two runs have one to compare).
pub fn run(
    settings: &Settings,
    seed: u64,
    budget: Duration,
    threads: usize,
    progress: &mut dyn FnMut(usize, u64) -> Result<(), String>,
) -> Result<ThreadsOutcome, String> {
    let maps: Vec<Map> = MAPS
        .iter()
        .map(|&pages| MapSpec::mmapable_array(PAGE as u32, pages as u32).create())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("creating the shared maps: {e}"))?;
    let mut shared = Vec::new();
    let mut mappings = Vec::new();
    for (i, (m, &pages)) in maps.iter().zip(&MAPS).enumerate() {
        for _ in 0..2 {
            let mapping = mm::map_shared(m.fd(), pages * PAGE, mm::RW, 0)
                .map_err(|e| format!("mapping map {i}: {e}"))?;
            shared.push(Shared {
                addr: mapping.addr(),
                pages,
                map: i,
            });
            mappings.push(mapping);
        }
    }
    let mut kmsg = Kmsg::open_at_end().map_err(|e| format!("opening /dev/kmsg: {e}"))?;
    // On base a zapped page stays a hole (SIGBUS in any order): no zaps.
    let zaps = settings.kernel.fill() != Fill::Eager;
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let results: Vec<(usize, Owned, Option<String>)> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (shared, maps, stop) = (&shared, &maps, &stop);
                s.spawn(move || {
                    worker(
                        t,
                        threads,
                        seed,
                        (shared, maps),
                        zaps,
                        (stop, started, budget),
                    )
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a fuzz thread panicked"))
            .collect()
    });
    let mut out = ThreadsOutcome {
        threads,
        ops: results.iter().map(|r| r.0).sum(),
        elapsed: started.elapsed(),
        failure: results.iter().find_map(|r| r.2.clone()),
    };
    if out.failure.is_none() {
        out.failure = final_check(&results, &shared, &maps).err();
    }
    if out.failure.is_none() {
        out.failure = crate::check::log(&mut kmsg).err();
    }
    progress(out.ops, 0)?;
    drop(mappings);
    Ok(out)
}

/// One thread's loop until the budget is spent or another thread failed.
fn worker(
    t: usize,
    threads: usize,
    seed: u64,
    (shared, maps): (&[Shared], &[Map]),
    zaps: bool,
    (stop, started, budget): (&AtomicBool, Instant, Duration),
) -> (usize, Owned, Option<String>) {
    let mut rng = Rng::new(seed ^ (t as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let mut owned = Owned::new();
    let mut ops = 0;
    while !stop.load(Ordering::Relaxed) && started.elapsed() < budget {
        ops += 1;
        if let Err(e) = step(&mut rng, (t, threads), (shared, maps), zaps, &mut owned) {
            stop.store(true, Ordering::Relaxed);
            return (
                ops,
                owned,
                Some(format!("thread {t}, operation {ops}: {e}")),
            );
        }
    }
    (ops, owned, None)
}

/// One of thread `t`'s words on a page of `v`.
fn own_word(rng: &mut Rng, t: usize, threads: usize, v: &Shared) -> (usize, usize) {
    let page = rng.below(v.pages);
    let word = t + threads * rng.below((WORDS - t).div_ceil(threads));
    (page, word.min(WORDS - 1 - (WORDS - 1 - t) % threads))
}

fn step(
    rng: &mut Rng,
    (t, threads): (usize, usize),
    (shared, maps): (&[Shared], &[Map]),
    zaps: bool,
    owned: &mut Owned,
) -> Result<(), String> {
    let v = *rng.pick(shared);
    let (page, word) = own_word(rng, t, threads, &v);
    let off = page * PAGE + word * 8;
    let addr = v.addr + off;
    match rng.weighted(&[40, 20, 6, 6, 4, 4, 4]) {
        0 => {
            let value = rng.next_u64();
            // SAFETY: a word of a writable mapping of ours.
            unsafe { mm::poke(addr, value) };
            owned.insert((v.map, off), value);
        }
        1 => {
            // SAFETY: as above, read.
            let got = unsafe { mm::peek(addr) };
            expect_own(owned, (v.map, off), got, "a load")?;
        }
        2 | 3 => {
            let advice = match (rng.below(4), zaps) {
                (0, true) => Advice::DontNeed,
                (1, _) => Advice::PopulateWrite,
                (2, _) => Advice::Cold,
                _ => Advice::PopulateRead,
            };
            let at = rng.below(v.pages);
            let pages = rng.between(1, (v.pages - at).min(70));
            mm::madvise(v.addr + at * PAGE, pages * PAGE, advice.bits())
                .map_err(|e| format!("madvise {} of {pages} pages: {e}", advice.word()))?;
        }
        4 => {
            let got =
                mm::read_u64_via_kernel(addr).map_err(|e| format!("process_vm_readv: {e}"))?;
            expect_own(owned, (v.map, off), got, "process_vm_readv")?;
        }
        5 => {
            // value_size is a page: element `page`, word `word`.
            let value = rng.next_u64() as i32;
            let elem = Elem {
                map: 0,
                index: page as u32,
            };
            let ret = progs::store(maps[v.map].fd(), elem, word as u32, value);
            if ret != crate::model::Ret::Value(0) {
                return Err(format!("a BPF program's store returned {ret:?}"));
            }
            owned.insert((v.map, off), i64::from(value) as u64);
        }
        _ => {
            let got = maps[v.map]
                .lookup_idx(page as u32)
                .map_err(|e| format!("BPF_MAP_LOOKUP_ELEM: {e}"))?;
            let got = u64::from_ne_bytes(got[word * 8..word * 8 + 8].try_into().expect("8 bytes"));
            expect_own(owned, (v.map, off), got, "BPF_MAP_LOOKUP_ELEM")?;
        }
    }
    Ok(())
}

/// A word the thread owns reads as it last wrote it (0 if never).
fn expect_own(owned: &Owned, key: (usize, usize), got: u64, how: &str) -> Result<(), String> {
    let want = owned.get(&key).copied().unwrap_or(0);
    if got != want {
        return Err(format!(
            "{how} of its word at byte {} of map {}: {got:#x}, it wrote {want:#x}",
            key.1, key.0
        ));
    }
    Ok(())
}

/// After the threads: every owned word, through every mapping and the
/// syscall, holds its owner's last value.
fn final_check(
    results: &[(usize, Owned, Option<String>)],
    shared: &[Shared],
    maps: &[Map],
) -> Result<(), String> {
    let values = maps
        .iter()
        .zip(MAPS)
        .map(|(m, pages)| bpf::map_lookup_all(m.fd(), pages as u32, PAGE))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("BPF_MAP_LOOKUP_BATCH: {e}"))?;
    for (t, (_, owned, _)) in results.iter().enumerate() {
        for (&(map, off), &want) in owned {
            let mut seen: Vec<(u64, &str)> = shared
                .iter()
                .filter(|v| v.map == map)
                // SAFETY: a word of a writable mapping of ours.
                .map(|v| (unsafe { mm::peek(v.addr + off) }, "a mapping"))
                .collect();
            let by_syscall =
                u64::from_ne_bytes(values[map][off..off + 8].try_into().expect("8 bytes"));
            seen.push((by_syscall, "BPF_MAP_LOOKUP_BATCH"));
            if let Some((got, how)) = seen.into_iter().find(|(got, _)| *got != want) {
                return Err(format!(
                    "after the run, thread {t}'s word at byte {off} of map {map} reads {got:#x} \
                     through {how}; it wrote {want:#x}"
                ));
            }
        }
    }
    Ok(())
}
