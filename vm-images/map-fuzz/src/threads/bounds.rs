//! What a round may leave present in one mapping. The threads' events
//! interleave as the scheduler chose; the model runs every order that
//! keeps each thread's own order, from the presence before the round, and
//! the kernel's presence after it must hold what every order leaves (the
//! intersection) and nothing that no order maps (the union).
//!
//! An access is two steps: it finds its page absent (or not), and its
//! fault is handled later, with other threads' steps in between. Two
//! threads that find one page absent both fault, and the second handler
//! maps its page again, maybe after a zap the first one's thread made: no
//! order of whole accesses maps it again.
//!
//! The growing window (prefault, adaptive) is sized from the map file's
//! record of the last fault's window, which every fault through the file
//! reads and rewrites: the threads' faults in both mappings of a map race
//! on it (the kernel reads and writes it unlocked), and a handler may run
//! long after its fault found its page absent. So the orders take each
//! fault as a lone one (no record), and the pages some order may leave are
//! widened by each fault's largest window: up to FAULT_WINDOW-1 pages
//! above or below its page, within the VMA, short of the nearest page
//! present all round (present before it and zapped by no thread), which
//! stops any fill. The pages every order leaves are those present all
//! round and those touched, unless zapped, or unmapped again by a fill:
//! a downward fill goes a batch at a time, and a batch that meets a
//! present page unmaps what it mapped below it. Another thread's touch of
//! such a page in between finds it present, and it is gone after. So a
//! touched page is not one every order leaves when another thread's fault
//! above it may fill down to it and meet a page that may be present less
//! than a batch above it.
//!
//! A zap is not one step either: it may drop its lock part way, and a
//! fill that stepped over a page still mapped then leaves it zapped. So
//! a page zapped in the round is never one every order must leave.

use std::collections::{BTreeSet, HashSet};
use std::ops::Range;

use selftests::runner::model::{fault, Fill, FAULT_WINDOW};

use crate::model::inject::INSERT_BATCH;

/// What an event does to one mapping's presence (map pages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// An access of a page: a fault if it is not present.
    Access(usize),
    /// Faults over pages in order (MADV_POPULATE_*).
    Populate(Range<usize>),
    /// The pages zapped.
    Zap(Range<usize>),
}

/// The present pages every order leaves, and those some order leaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bounds {
    pub every: BTreeSet<usize>,
    pub some: BTreeSet<usize>,
}

/// The bounds of a mapping of map pages `vma`, filled as `fill` says,
/// with `before` present, after each thread's effects (`threads`, each
/// in its order) in every interleaving.
pub fn bounds(
    fill: Fill,
    vma: &Range<usize>,
    before: &BTreeSet<usize>,
    threads: &[Vec<Effect>],
) -> Bounds {
    let mut out: Option<Bounds> = None;
    let mut at = vec![Step::Next(0); threads.len()];
    let mut seen = HashSet::new();
    let walk = Walk { fill, vma, threads };
    walk.orders(before, &mut at, &mut seen, &mut out);
    let mut b = out.expect("at least one order");
    let zapped = zapped(threads);
    if fill == Fill::Growing {
        let kept: BTreeSet<usize> = before.difference(&zapped).copied().collect();
        for page in may_fault(before, threads) {
            b.some.extend(largest_window(&kept, vma, page));
        }
        let reach: BTreeSet<usize> = b.some.union(before).copied().collect();
        let unmapped = unmapped_again(vma, before, (&kept, &reach), threads);
        b.every = before.iter().chain(&touched(threads)).copied().collect();
        b.every.retain(|p| !unmapped.contains(p));
    }
    b.every.retain(|p| !zapped.contains(p));
    b
}

/// The pages the round's zaps cover.
fn zapped(threads: &[Vec<Effect>]) -> BTreeSet<usize> {
    threads
        .iter()
        .flatten()
        .filter_map(|e| match e {
            Effect::Zap(pages) => Some(pages.clone()),
            _ => None,
        })
        .flatten()
        .collect()
}

/// The pages the round's threads access or populate.
fn touched(threads: &[Vec<Effect>]) -> BTreeSet<usize> {
    threads
        .iter()
        .flatten()
        .flat_map(|e| match e {
            Effect::Access(page) => *page..*page + 1,
            Effect::Populate(pages) => pages.clone(),
            Effect::Zap(_) => 0..0,
        })
        .collect()
}

/// The pages a round may fault on: those its threads access or populate
/// that are absent before it or zapped in it.
fn may_fault(before: &BTreeSet<usize>, threads: &[Vec<Effect>]) -> BTreeSet<usize> {
    let zapped = zapped(threads);
    touched(threads)
        .into_iter()
        .filter(|p| !before.contains(p) || zapped.contains(p))
        .collect()
}

/// The most a growing window at `page` can map, whatever the record says
/// when its fault is handled: up to FAULT_WINDOW-1 pages above or below
/// it, within the VMA, short of the nearest page of `kept` (present all
/// round) either way.
fn largest_window(kept: &BTreeSet<usize>, vma: &Range<usize>, page: usize) -> Range<usize> {
    let reach = FAULT_WINDOW - 1;
    let floor = kept.range(..page).next_back().map_or(vma.start, |&k| k + 1);
    let ceil = kept.range(page + 1..).next().map_or(vma.end, |&k| k);
    page.saturating_sub(reach).max(vma.start).max(floor)..(page + reach + 1).min(vma.end).min(ceil)
}

/// The pages a thread touches that another thread's fault may map and
/// unmap again after the touch: the fault's downward fill reaches them
/// (up to FAULT_WINDOW-1 pages below its page, and not past the batch of
/// the nearest page of `kept` below it, where the fill ends), and a page
/// that may be present during the round (`reach`) lies above them, below
/// the fault, in one batch with them.
fn unmapped_again(
    vma: &Range<usize>,
    before: &BTreeSet<usize>,
    (kept, reach): (&BTreeSet<usize>, &BTreeSet<usize>),
    threads: &[Vec<Effect>],
) -> BTreeSet<usize> {
    let zapped = zapped(threads);
    let mut out = BTreeSet::new();
    for (u, faulting) in threads.iter().enumerate() {
        // A thread's own touches come before its fault or after its
        // fill is done.
        let others: Vec<Vec<Effect>> = threads
            .iter()
            .enumerate()
            .filter(|&(t, _)| t != u)
            .map(|(_, e)| e.clone())
            .collect();
        let by_others = touched(&others);
        let faults = touched(std::slice::from_ref(faulting))
            .into_iter()
            .filter(|p| !before.contains(p) || zapped.contains(p));
        for f in faults {
            let mut low = f.saturating_sub(FAULT_WINDOW - 1).max(vma.start);
            if let Some(&k) = kept.range(..f).next_back() {
                low = low.max(k.saturating_sub(INSERT_BATCH - 1));
            }
            for p in (low..f).filter(|p| by_others.contains(p) && !kept.contains(p)) {
                let batch = p + 1..f.min(p + INSERT_BATCH);
                if reach.range(batch).next().is_some() {
                    out.insert(p);
                }
            }
        }
    }
    out
}

/// Where a thread is: at its next effect, or with a fault on a page it
/// found absent not handled yet (then the effect after it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Step {
    Next(usize),
    Faulting { page: usize, then: usize },
}

struct Walk<'a> {
    fill: Fill,
    vma: &'a Range<usize>,
    threads: &'a [Vec<Effect>],
}

impl Walk<'_> {
    /// Every order from `state` with the threads `at` their steps, each
    /// point visited once (orders that meet again go on alike).
    fn orders(
        &self,
        state: &BTreeSet<usize>,
        at: &mut Vec<Step>,
        seen: &mut HashSet<(Vec<Step>, BTreeSet<usize>)>,
        out: &mut Option<Bounds>,
    ) {
        if !seen.insert((at.clone(), state.clone())) {
            return;
        }
        let mut ended = true;
        for t in 0..self.threads.len() {
            let step = at[t];
            let mut after = state.clone();
            at[t] = match step {
                Step::Faulting { page, then } => {
                    self.fault(&mut after, page);
                    Step::Next(then)
                }
                Step::Next(i) => match self.threads[t].get(i) {
                    None => continue,
                    Some(Effect::Access(page)) if !state.contains(page) => Step::Faulting {
                        page: *page,
                        then: i + 1,
                    },
                    Some(effect) => {
                        apply(self.fill, self.vma, &mut after, effect);
                        Step::Next(i + 1)
                    }
                },
            };
            ended = false;
            self.orders(&after, at, seen, out);
            at[t] = step;
        }
        if ended {
            record(state, out);
        }
    }

    /// A fault at `page` handled, as a lone fault (the record races:
    /// `bounds` widens for windows): the page mapped whether or not
    /// another fault mapped it meanwhile.
    fn fault(&self, present: &mut BTreeSet<usize>, page: usize) {
        if self.fill != Fill::Eager {
            let (window, _) = fault(self.fill, present, self.vma, page, None);
            present.extend(window);
            present.insert(page);
        }
    }
}

/// An order's end: the bounds so far narrowed and widened by it.
fn record(state: &BTreeSet<usize>, out: &mut Option<Bounds>) {
    match out {
        None => {
            *out = Some(Bounds {
                every: state.clone(),
                some: state.clone(),
            })
        }
        Some(b) => {
            b.every.retain(|p| state.contains(p));
            b.some.extend(state.iter().copied());
        }
    }
}

/// One effect on `present`, as the model of the kernel's fill says (a
/// fault taken as a lone one).
fn apply(fill: Fill, vma: &Range<usize>, present: &mut BTreeSet<usize>, effect: &Effect) {
    let access = |present: &mut BTreeSet<usize>, page: usize| {
        if !present.contains(&page) && fill != Fill::Eager {
            let (window, _) = fault(fill, present, vma, page, None);
            present.extend(window);
        }
    };
    match effect {
        Effect::Access(page) => access(present, *page),
        Effect::Populate(pages) => pages.clone().for_each(|p| access(present, p)),
        Effect::Zap(pages) => present.retain(|p| !pages.contains(p)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pages: impl IntoIterator<Item = usize>) -> BTreeSet<usize> {
        pages.into_iter().collect()
    }

    #[test]
    fn a_growing_window_may_reach_a_window_either_way_of_a_fault() {
        // Whatever record the fault meets: 63 pages up or down from 100.
        let threads = [vec![Effect::Access(100)]];
        let b = bounds(Fill::Growing, &(0..200), &BTreeSet::new(), &threads);
        assert_eq!(b.every, set([100]));
        assert_eq!(b.some, set(37..164));
        // Clamped to the VMA.
        let b = bounds(
            Fill::Growing,
            &(5..100),
            &BTreeSet::new(),
            &[vec![Effect::Access(10)]],
        );
        assert_eq!(b.some, set(5..74));
        // A page per fault elsewhere.
        let b = bounds(Fill::PerPage, &(0..200), &BTreeSet::new(), &threads);
        assert_eq!(b.some, set([100]));
    }

    #[test]
    fn a_growing_window_stops_short_of_pages_present_all_round() {
        // 10 and 11 stay present; 40 is zapped, so a fill may pass it.
        let threads = [vec![Effect::Access(20)], vec![Effect::Zap(40..41)]];
        let before = set([10, 11, 40]);
        let b = bounds(Fill::Growing, &(0..64), &before, &threads);
        assert_eq!(b.some, set(10..64));
        assert_eq!(b.every, set([10, 11, 20]));
        // And from above: 30 stops a fill down from 50.
        let threads = [vec![Effect::Access(50)]];
        let b = bounds(Fill::Growing, &(0..128), &set([30]), &threads);
        assert_eq!(b.some, set(30..114));
    }

    #[test]
    fn a_zap_racing_an_access_leaves_the_page_in_some_orders_only() {
        let vma = 0..16;
        let threads = [vec![Effect::Access(5)], vec![Effect::Zap(4..8)]];
        let b = bounds(Fill::PerPage, &vma, &set([4, 9]), &threads);
        assert_eq!(b.every, set([9]));
        assert_eq!(b.some, set([5, 9]), "4 is zapped in every order");
    }

    #[test]
    fn a_fault_found_absent_by_two_threads_maps_again_after_a_zap() {
        // Thread 0 stores to 24 (absent) and then zaps 16..25; thread 1's
        // store to 24 found it absent too, and its fault, handled after
        // the zap, maps it again: in no order of whole accesses.
        let vma = 0..100;
        let threads = [
            vec![Effect::Access(24), Effect::Zap(16..25)],
            vec![Effect::Access(24)],
        ];
        let b = bounds(Fill::PerPage, &vma, &BTreeSet::new(), &threads);
        assert_eq!(b.some, set([24]), "{b:?}");
        assert_eq!(b.every, set([]));
        // With the growing window, either fault's handler may fill a
        // window after the zap.
        let b = bounds(Fill::Growing, &vma, &BTreeSet::new(), &threads);
        assert_eq!(b.some, set(0..88), "{b:?}");
        assert_eq!(b.every, set([]));
    }

    #[test]
    fn a_fill_racing_a_zap_may_leave_what_no_order_of_lone_faults_leaves() {
        // 7 zapped by thread 1; thread 2's fault at 7, handled after
        // thread 0's zap of 6..14, may fill down to 6 (5 stays present)
        // with a record another fault left: 6 is present in no order of
        // lone faults.
        let vma = 0..16;
        let threads = [
            vec![Effect::Zap(6..14)],
            vec![Effect::Zap(6..8)],
            vec![Effect::Populate(7..9)],
        ];
        let before = set((0..10).chain(12..16));
        let b = bounds(Fill::Growing, &vma, &before, &threads);
        assert!(b.some.contains(&6), "{b:?}");
        assert_eq!(b.some, set(0..16));
        assert_eq!(
            b.every,
            set((0..6).chain(14..16)),
            "all of 6..14 zapped last"
        );
    }

    #[test]
    fn a_downward_batch_may_unmap_a_page_another_thread_touched() {
        // 10 and 11 present. Thread 0's fault at 12 may fill down from
        // it, its batch mapping 9 and meeting 10: 9 is unmapped again,
        // after thread 1's load of 9 may have found it there.
        let vma = 0..64;
        let threads = [vec![Effect::Access(12)], vec![Effect::Access(9)]];
        let b = bounds(Fill::Growing, &vma, &set([10, 11]), &threads);
        assert_eq!(b.every, set(10..=12));
        assert_eq!(b.some, set(0..64));
        // One thread's own touch of 9 comes before or after its fault at
        // 12 has done: 9 stays.
        let one = [vec![Effect::Access(12), Effect::Access(9)]];
        let b = bounds(Fill::Growing, &vma, &set([10, 11]), &one);
        assert_eq!(b.every, set(9..=12));
        // Out of a window's reach below 80: 9 stays.
        let far = [vec![Effect::Access(80)], vec![Effect::Access(9)]];
        let b = bounds(Fill::Growing, &(0..100), &set([]), &far);
        assert_eq!(b.every, set([9, 80]), "{b:?}");
        // A fill down from 50 ends at the batch that meets 30 (present
        // all round): 16 may be in that batch, 12 is below it.
        for (p, stays) in [(16, false), (12, true)] {
            let threads = [vec![Effect::Access(50)], vec![Effect::Access(p)]];
            let b = bounds(Fill::Growing, &(0..100), &set([30]), &threads);
            assert_eq!(b.every.contains(&p), stays, "{p}: {b:?}");
            assert!(b.every.is_superset(&set([30, 50])), "{b:?}");
        }
    }
}
