//! What a round may leave present in one mapping. The threads' events
//! interleave as the scheduler chose; the model runs every order that
//! keeps each thread's own order, from the presence before the round, and
//! the kernel's presence after it must hold what every order leaves (the
//! intersection) and nothing that no order maps (the union).
//!
//! An access is two steps: it finds its page absent (or not), and its
//! fault is handled later, with other threads' steps in between. Two
//! threads that find one page absent both fault, and the second handler
//! fills its window too, maybe after a zap the first one's thread made:
//! no order of whole accesses maps those pages again.
//!
//! The growing window (adaptive) is sized from the ptes next to the
//! faulting one and filled after, with other threads' zaps and faults in
//! between: a fill can map what the ptes were when counted, in no order
//! of whole faults. There the pages some order may leave are widened by
//! each fault's largest window: one page more than the longest run next
//! to it of pages that may be present during the round; and a fill that
//! meets a page mapped meanwhile stops there, so the pages every order
//! leaves are only those present before or touched, unless zapped.
//!
//! A zap is not one step either: it may drop its lock part way, and a
//! fill that stepped over a page still mapped then leaves it zapped. So
//! a page zapped in the round is never one every order must leave.

use std::collections::{BTreeSet, HashSet};
use std::ops::Range;

use selftests::runner::model::{fault, mapped_run, Fill, FAULT_WINDOW};

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
        let reach: BTreeSet<usize> = b.some.union(before).copied().collect();
        for page in may_fault(before, threads) {
            b.some.extend(largest_window(&reach, vma, page));
        }
        b.every = before.iter().chain(&touched(threads)).copied().collect();
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

/// The most a growing window at `page` can map when the pages present
/// are some of `reach`: up or down from it, one more than the longest
/// run of `reach` next to it, at most FAULT_WINDOW.
fn largest_window(reach: &BTreeSet<usize>, vma: &Range<usize>, page: usize) -> Range<usize> {
    let run = |down| mapped_run(reach, vma, page, down);
    let w = (run(true).max(run(false)) + 1).min(FAULT_WINDOW);
    (page + 1).saturating_sub(w).max(vma.start)..(page + w).min(vma.end)
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

    /// A fault at `page` handled: its window mapped, the page itself
    /// whether or not another fault mapped it meanwhile.
    fn fault(&self, present: &mut BTreeSet<usize>, page: usize) {
        if self.fill != Fill::Eager {
            let window = fault(self.fill, present, self.vma, page);
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

/// One effect on `present`, as the model of the kernel's fill says.
fn apply(fill: Fill, vma: &Range<usize>, present: &mut BTreeSet<usize>, effect: &Effect) {
    let access = |present: &mut BTreeSet<usize>, page: usize| {
        if !present.contains(&page) && fill != Fill::Eager {
            let window = fault(fill, present, vma, page);
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
    fn an_aligned_window_is_mapped_whole_in_every_order() {
        let vma = 0..100;
        let threads = [vec![Effect::Access(3)], vec![Effect::Access(40)]];
        let b = bounds(Fill::AlignedWindow, &vma, &BTreeSet::new(), &threads);
        assert_eq!(b.every, set(0..64));
        assert_eq!(b.every, b.some);
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
    fn a_fault_found_absent_by_two_threads_fills_again_after_a_zap() {
        // Thread 0 stores to 24 (absent) and then zaps 16..24; thread 1's
        // store to 24 found it absent too, and its fault, handled after
        // the zap, maps the aligned window again.
        let vma = 0..100;
        let threads = [
            vec![Effect::Access(24), Effect::Zap(16..24)],
            vec![Effect::Access(24)],
        ];
        let b = bounds(Fill::AlignedWindow, &vma, &BTreeSet::new(), &threads);
        assert!(b.some.is_superset(&set(0..64)), "{b:?}");
        assert_eq!(b.every, set((0..16).chain(24..64)));
    }

    #[test]
    fn a_growing_window_counted_before_a_zap_may_fill_after_it() {
        // 7 zapped by thread 1; thread 2's fault at 7 counts 8 and 9
        // above it and maps 6 and 7 downwards; thread 0's zap of 6..14,
        // between the count and the fill, leaves 6 present in no order
        // of whole faults.
        let vma = 0..16;
        let threads = [
            vec![Effect::Zap(6..14)],
            vec![Effect::Zap(6..8)],
            vec![Effect::Populate(7..9)],
        ];
        let before = set((0..10).chain(12..16));
        let b = bounds(Fill::Growing, &vma, &before, &threads);
        assert!(b.some.contains(&6), "{b:?}");
        assert_eq!(
            b.every,
            set((0..6).chain(14..16)),
            "all of 6..14 zapped last"
        );
    }

    #[test]
    fn a_growing_window_depends_on_the_order() {
        // 10 and 11 present. 12 first maps 12..=14 (a run of 2 below it),
        // then 9 maps 4..=9 downwards (a run of 5 above it); 9 first maps
        // 7..=9, then 12 maps 12..=17 (a run of 5 below it). Widened: runs
        // of 4..=17 give windows of 9 either way of 12 and of 9. Every
        // order leaves 7..=14, but a fill that meets a page mapped
        // meanwhile stops: only what was there and what was touched.
        let vma = 0..64;
        let threads = [vec![Effect::Access(12)], vec![Effect::Access(9)]];
        let b = bounds(Fill::Growing, &vma, &set([10, 11]), &threads);
        assert_eq!(b.every, set(9..=12));
        assert_eq!(b.some, set(1..=20));
    }
}
