//! What an operation may leave when one page allocation of this thread
//! fails in it (`fail_alloc`). The allocations a fault of these mappings
//! makes are page tables: the fault's own (the core's pre-allocation and
//! the handler's insert) and those a window's fill reaches past a 2 MiB
//! boundary. The model cannot see which tables the kernel holds; a region
//! of the arena with a present page has its table, one without may or may
//! not. So a failure that fired must match the outcome of a failure at
//! one of the allocations that may have been made, each taken as the one
//! that failed:
//!
//! - the fault's own table: the fault fails whole (VM_FAULT_OOM), having
//!   mapped nothing. A load or store retries it, and it then maps what it
//!   would have. GUP stops there; a populate whose first page it was
//!   ends (MADV_POPULATE_* with ENOMEM, MAP_POPULATE with mmap()
//!   succeeding), one that had done pages before it goes on from it, and
//!   the fault is taken again;
//! - a table the fill needs: the fill maps its pages up to that region,
//!   in address order, and the fault's other fill is skipped (0004 fills
//!   below only after the fill above succeeded, 0005 has one fill);
//!   the fault succeeds and a populate goes on;
//! - and for an mmap(), anything it allocates (its VMA, the tree's
//!   nodes, base's eager page tables): ENOMEM, the range left unmapped;
//!   or nothing at all, as a slab absorbs a failure of its first, larger
//!   try with a smaller one.
//!
//! Whatever the operation, the failure may also fire outside its path, at
//! an allocation its thread makes for something else, which the kernel
//! absorbs: the operation then does what it does unfailed. Seen on 7.3
//! twice in ci's fuzz step: a store to a read-only mapping raised its
//! SIGSEGV with a failure fired (delivering the signal allocates, and a
//! forced signal is delivered without it), on every kernel alike; and a
//! load of a present page on eager, which faults nothing, fired one once
//! in a run under load that the same seed did not repeat alone.

use std::collections::BTreeSet;

use selftests::runner::model::{fault, Fill};

use super::{Model, Ret, VmaModel};
use crate::op::{Advice, Mmap, Op, Range};

/// Arena pages under one page table: the arena is aligned to its size
/// (a multiple of this), so that its regions are its own.
pub const TABLE_PAGES: usize = 512;

/// The failed allocation of the unfailed outcome: outside the operation's
/// path, absorbed.
pub const OUTSIDE: &str = "an allocation outside its path, absorbed,";

/// One outcome an injected failure allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    pub ret: Ret,
    /// The present map pages of the operation's VMA after it; None: the
    /// operation's range is left unmapped.
    pub present: Option<BTreeSet<usize>>,
    /// Which allocation failed, for a message.
    pub failed: String,
}

/// What the kernel did with a failure fired that no outcome allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disallowed {
    /// The present map pages of the operation's VMA; None: the model
    /// holds no VMA there.
    pub seen: Option<BTreeSet<usize>>,
    pub allowed: Vec<Allowed>,
}

/// Who faults, which decides what a fault whose own page table cannot be
/// had does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    /// A load or store: the fault is taken again and succeeds.
    Access,
    /// MADV_POPULATE_*: ENOMEM at the range's first page; later, GUP
    /// returns the pages done and madvise goes on from the failed one.
    Madvise,
    /// MAP_POPULATE: the populate ends at the first page, mmap()
    /// succeeding; later, it goes on from the failed one.
    MapPopulate,
}

/// A fault sequence's outcome: the present map pages, whether it ended
/// with ENOMEM, and which allocation failed.
type Ending = (BTreeSet<usize>, bool, String);

impl Model {
    /// The regions of the arena that hold a present page: their page
    /// tables exist.
    pub fn tabled_regions(&self) -> BTreeSet<usize> {
        self.layout
            .iter()
            .flat_map(|v| v.present.iter().map(move |&mp| arena_page(v, mp)))
            .map(|page| page / TABLE_PAGES)
            .collect()
    }

    /// The outcomes of `op` with an allocation failure that fired in it,
    /// `self` being the model before it: those of a failure in its path,
    /// then its unfailed outcome, for a failure outside it.
    pub fn injected_outcomes(&self, op: &Op) -> Vec<Allowed> {
        let mut outcomes = self.path_outcomes(op);
        let mut after = self.clone();
        let ret = after.apply(op);
        let present = after
            .layout
            .at(injected_range(op).at)
            .map(|v| v.present.clone());
        if !outcomes
            .iter()
            .any(|o| o.ret == ret && o.present == present)
        {
            outcomes.push(Allowed {
                ret,
                present,
                failed: OUTSIDE.into(),
            });
        }
        outcomes
    }

    /// The outcomes of `op` with a failure at an allocation of its own
    /// path; empty for an operation no failure can reach or one the model
    /// refuses.
    pub fn path_outcomes(&self, op: &Op) -> Vec<Allowed> {
        match op {
            Op::Touch(a) => {
                let mut after = self.clone();
                let ret = after.apply(op);
                if !matches!(ret, Ret::Ok | Ret::Value(_)) {
                    return Vec::new();
                }
                let page = Range {
                    at: a.at.page,
                    pages: 1,
                };
                self.with_ret(page, Caller::Access, |_| ret.clone())
            }
            Op::Madvise {
                range,
                advice: Advice::PopulateRead | Advice::PopulateWrite,
            } => {
                if self.clone().apply(op) != Ret::Ok {
                    return Vec::new();
                }
                self.with_ret(*range, Caller::Madvise, |enomem| match enomem {
                    true => Ret::Errno(libc::ENOMEM),
                    false => Ret::Ok,
                })
            }
            Op::Mmap(m) if m.populate => self.mmap_outcomes(m),
            _ => Vec::new(),
        }
    }

    /// The outcomes of faults over `range` (one VMA's), returning what
    /// `ret` says of an ENOMEM ending.
    fn with_ret(&self, range: Range, caller: Caller, ret: impl Fn(bool) -> Ret) -> Vec<Allowed> {
        let Some(v) = self.layout.at(range.at) else {
            return Vec::new();
        };
        faults_with_a_failure(
            self.fill_of(v.map),
            v,
            &self.tabled_regions(),
            range,
            caller,
        )
        .into_iter()
        .map(|(present, enomem, failed)| Allowed {
            ret: ret(enomem),
            present: Some(present),
            failed,
        })
        .collect()
    }

    fn mmap_outcomes(&self, m: &Mmap) -> Vec<Allowed> {
        let mut unfailed = self.clone();
        let ret = unfailed.apply(&Op::Mmap(*m));
        let mut outcomes = vec![
            Allowed {
                ret: Ret::Errno(libc::ENOMEM),
                present: None,
                failed: "an allocation of mmap()".into(),
            },
            Allowed {
                ret,
                present: unfailed.layout.at(m.range.at).map(|v| v.present.clone()),
                failed: "a slab's first try, absorbed,".into(),
            },
        ];
        let mut mapped = self.clone();
        let lazily = Mmap {
            populate: false,
            ..*m
        };
        let readable = m.prot.readable();
        if mapped.apply(&Op::Mmap(lazily)) == Ret::Ok && readable {
            outcomes.extend(mapped.with_ret(m.range, Caller::MapPopulate, |_| Ret::Ok));
        }
        outcomes
    }
}

impl Model {
    /// After `op` with a failure that fired in it: takes as its state the
    /// outcome that `got` and the presence `observed` (of a VMA the
    /// model holds) match, `self` being the model as if nothing failed and
    /// `before` the model before `op`, and says whether that outcome is
    /// one of a failure in the operation's path; else how the kernel
    /// differs.
    pub fn adopt_injected(
        &mut self,
        before: &Model,
        op: &Op,
        got: &Ret,
        observed: impl Fn(&VmaModel) -> BTreeSet<usize>,
    ) -> Result<bool, Disallowed> {
        let range = injected_range(op);
        let seen = self.layout.at(range.at).map(|v| (v.start, observed(v)));
        let outcomes = before.injected_outcomes(op);
        for o in outcomes.iter().filter(|o| o.ret == *got) {
            match (&o.present, &seen) {
                (None, _) => {
                    *self = before.clone();
                    self.unmap(range);
                    return Ok(o.failed != OUTSIDE);
                }
                (Some(want), Some((start, seen))) if want == seen => {
                    self.layout.get_mut(*start).expect("held").present = seen.clone();
                    return Ok(o.failed != OUTSIDE);
                }
                _ => {}
            }
        }
        Err(Disallowed {
            seen: seen.map(|(_, p)| p),
            allowed: outcomes,
        })
    }
}

/// The range whose VMA `fail_alloc`'s operation faults in.
fn injected_range(op: &Op) -> Range {
    match op {
        Op::Touch(a) => Range {
            at: a.at.page,
            pages: 1,
        },
        Op::Madvise { range, .. } => *range,
        Op::Mmap(m) => m.range,
        other => unreachable!("not injectable: {other}"),
    }
}

/// Map pages as runs, "0-15 40", for messages.
pub fn show_pages(pages: &BTreeSet<usize>) -> String {
    let pages: Vec<usize> = pages.iter().copied().collect();
    selftests::tests::common::ranges(&pages)
}

/// The arena page of map page `mp` of `v`.
fn arena_page(v: &VmaModel, mp: usize) -> usize {
    v.start + (mp - v.pgoff)
}

/// Faults over arena pages `range` of `v` in order, as an access or a
/// populate takes them, with one allocation failing: an ending for each
/// allocation that may have been made and failed.
fn faults_with_a_failure(
    fill: Fill,
    v: &VmaModel,
    tabled: &BTreeSet<usize>,
    range: Range,
    caller: Caller,
) -> Vec<Ending> {
    let region = |mp: usize| arena_page(v, mp) / TABLE_PAGES;
    let mut endings = Vec::new();
    let mut present = v.present.clone();
    let mut tabled = tabled.clone();
    let pages: Vec<usize> = (range.at..range.end()).map(|p| v.map_page(p)).collect();
    for (i, &mp) in pages.iter().enumerate() {
        if present.contains(&mp) {
            continue;
        }
        if fill == Fill::Eager {
            // A hole on base: no fault handler, no allocation.
            break;
        }
        let window = fault(fill, &present, &v.map_pages(), mp);
        if !tabled.contains(&region(mp)) {
            let failed = format!("the page table of map page {mp}'s own fault");
            endings.push(match (caller, i) {
                (Caller::Madvise, 0) => (present.clone(), true, failed),
                (Caller::MapPopulate, 0) => (present.clone(), false, failed),
                // Taken again, with the pages after it.
                _ => (
                    then_without_failure(fill, v, present.clone(), &pages[i..]),
                    false,
                    failed,
                ),
            });
        }
        tabled.insert(region(mp));
        let mut done = present.clone();
        done.insert(mp);
        // Above the faulting page, then below it, each in address order.
        for fill_range in [mp + 1..window.end, window.start..mp] {
            for q in fill_range {
                if done.contains(&q) {
                    continue;
                }
                if !tabled.contains(&region(q)) {
                    let failed = format!("the page table of map page {q} in map page {mp}'s fill");
                    let rest = &pages[i + 1..];
                    endings.push((
                        then_without_failure(fill, v, done.clone(), rest),
                        false,
                        failed,
                    ));
                }
                tabled.insert(region(q));
                done.insert(q);
            }
        }
        present = done;
    }
    endings
}

/// `present` after faults at map pages `rest` that all succeed.
fn then_without_failure(
    fill: Fill,
    v: &VmaModel,
    mut present: BTreeSet<usize>,
    rest: &[usize],
) -> BTreeSet<usize> {
    for &mp in rest {
        if !present.contains(&mp) {
            let window = fault(fill, &present, &v.map_pages(), mp);
            present.extend(window);
        }
    }
    present
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::parse_ops;
    use selftests::runner::Kernel;

    /// A model after `text`, on `kernel`.
    fn after(kernel: Kernel, text: &str) -> Model {
        let mut m = Model::new(kernel, 1, false);
        for op in parse_ops(text).unwrap() {
            assert_ne!(m.apply(&op), Ret::Skipped, "{op}");
        }
        m
    }

    fn present(o: &Allowed) -> Vec<usize> {
        o.present.clone().unwrap().into_iter().collect()
    }

    /// A mapping of map pages 0..128 across the region boundary at arena
    /// page 512 (map page 32 is its first page past it), and a page
    /// present in the region below it, elsewhere.
    const ACROSS: &str = "create m0 value=4096 entries=128\n\
                          create m1 value=4096 entries=1\n\
                          mmap @100+1 m1 pgoff=0 r\n\
                          touch @100.0=r\n\
                          mmap @480+128 m0 pgoff=0 rw\n";

    #[test]
    fn a_fill_past_a_region_without_a_table_stops_there_and_skips_the_fill_below() {
        let m = after(Kernel::Prefault, ACROSS);
        // Map page 20's window is 0..64: above it, 21..64 crosses into
        // the region at map page 32.
        let outcomes = m.path_outcomes(&"touch @500.0=r".parse().unwrap());
        let got: Vec<Vec<usize>> = outcomes.iter().map(present).collect();
        assert_eq!(
            got,
            [(20..32).collect::<Vec<_>>()],
            "the fault's own region has a present page: only the fill can fail"
        );
        // Unfailed, the window is whole: a kernel that ignores the
        // failure and fills on is not among the outcomes.
        assert!(!got.contains(&(0..64).collect()));
    }

    #[test]
    fn a_fault_in_a_region_without_a_present_page_may_fail_whole() {
        let m = after(Kernel::Prefault, ACROSS);
        // Map page 40 lies past the boundary: its own table may be
        // missing (a load retries and maps the window), and the fill
        // below it reaches back into the region below, which has one.
        let outcomes = m.path_outcomes(&"touch @520.0=w:7".parse().unwrap());
        let got: Vec<Vec<usize>> = outcomes.iter().map(present).collect();
        assert_eq!(got, [(0..64).collect::<Vec<_>>()]);
        assert!(outcomes.iter().all(|o| o.ret == Ret::Ok));
        // A populate over it ends with ENOMEM, nothing mapped.
        let populate = "madvise @520+4 populate_read".parse().unwrap();
        let outcomes = m.path_outcomes(&populate);
        assert_eq!(outcomes[0].ret, Ret::Errno(libc::ENOMEM));
        assert_eq!(present(&outcomes[0]), Vec::<usize>::new());
    }

    #[test]
    fn per_page_kernels_fail_only_their_own_table_and_base_not_at_all() {
        for kernel in [Kernel::Mainline, Kernel::Direct] {
            let m = after(kernel, ACROSS);
            let below = m.path_outcomes(&"touch @500.0=r".parse().unwrap());
            assert!(below.is_empty(), "{kernel:?}: the region has its table");
            let above = m.path_outcomes(&"touch @520.0=r".parse().unwrap());
            assert_eq!(above.iter().map(present).collect::<Vec<_>>(), [vec![40]]);
        }
        let base = after(Kernel::Eager, ACROSS);
        assert!(base
            .path_outcomes(&"touch @520.0=r".parse().unwrap())
            .is_empty());
        // Base's mmap() inserts every page: it may fail whole.
        let mmap = "mmap @1000+4 m0 pgoff=0 r populate".parse().unwrap();
        let outcomes: Vec<(Ret, Option<Vec<usize>>)> = base
            .path_outcomes(&mmap)
            .into_iter()
            .map(|o| (o.ret, o.present.map(|p| p.into_iter().collect())))
            .collect();
        assert_eq!(
            outcomes,
            [
                (Ret::Errno(libc::ENOMEM), None),
                (Ret::Ok, Some(vec![0, 1, 2, 3]))
            ],
            "failed whole, or absorbed"
        );
    }

    #[test]
    fn a_failure_outside_the_path_leaves_what_the_operation_does_unfailed() {
        for kernel in [Kernel::Eager, Kernel::Mainline, Kernel::Prefault] {
            // A store to a read-only mapping: SIGSEGV, nothing mapped.
            let m = after(kernel, &format!("{ACROSS}mmap @2000+2 m0 pgoff=0 r\n"));
            let store = "touch @2001.25=w:7".parse().unwrap();
            assert!(m.path_outcomes(&store).is_empty(), "{kernel:?}");
            let outcomes = m.injected_outcomes(&store);
            assert_eq!(outcomes.len(), 1, "{kernel:?}");
            assert_eq!(outcomes[0].ret, Ret::Signal(libc::SIGSEGV), "{kernel:?}");
            let unfailed = m.layout.at(2001).unwrap().present.clone();
            assert_eq!(
                outcomes[0].present,
                Some(unfailed),
                "{kernel:?}: nothing mapped"
            );
            // A load of a present page: its value, the page as it was.
            let load = "touch @100.0=r".parse().unwrap();
            let outcomes = m.injected_outcomes(&load);
            assert_eq!(outcomes.len(), 1, "{kernel:?}");
            assert!(matches!(outcomes[0].ret, Ret::Value(_)), "{kernel:?}");
            let present = m.layout.at(100).unwrap().present.clone();
            assert_eq!(outcomes[0].present, Some(present), "{kernel:?}");
        }
        // A failure in the path leaves another outcome, and the unfailed
        // one is allowed beside it: a window cut at a region or the whole.
        let m = after(Kernel::Prefault, ACROSS);
        let outcomes = m.injected_outcomes(&"touch @500.0=r".parse().unwrap());
        let got: Vec<Vec<usize>> = outcomes.iter().map(present).collect();
        assert_eq!(got, [(20..32).collect::<Vec<_>>(), (0..64).collect()]);
    }

    #[test]
    fn a_populate_fails_at_its_first_page_only_and_takes_a_later_one_again() {
        let m = after(Kernel::Mainline, ACROSS);
        // Map page 32 (arena page 512) is the populate's third page: GUP
        // returns the two done, and madvise goes on from it.
        let later = m.path_outcomes(&"madvise @510+4 populate_read".parse().unwrap());
        assert_eq!(
            later.iter().map(present).collect::<Vec<_>>(),
            [vec![30, 31, 32, 33]]
        );
        assert_eq!(later[0].ret, Ret::Ok);
        let first = m.path_outcomes(&"madvise @512+2 populate_write".parse().unwrap());
        assert_eq!(
            first.iter().map(present).collect::<Vec<_>>(),
            [Vec::<usize>::new()]
        );
        assert_eq!(first[0].ret, Ret::Errno(libc::ENOMEM));
    }

    #[test]
    fn a_growing_window_cut_at_a_region_goes_on_populating_after_it() {
        // Touches of map pages 28 and 29 leave 28..=30 present; the
        // populate's fault at 31 (a run of 3 below it) would map 31..=34
        // past the boundary at 32: cut there, then 32 faults alone (a run
        // of 4 below it) and maps 32..=36, which holds 33.
        let m = after(
            Kernel::Adaptive,
            &format!("{ACROSS}touch @508.0=r\ntouch @509.0=r\n"),
        );
        let populate = "madvise @511+3 populate_read".parse().unwrap();
        let outcomes = m.path_outcomes(&populate);
        let got: Vec<Vec<usize>> = outcomes.iter().map(present).collect();
        assert_eq!(got, [(28..=36).collect::<Vec<_>>()]);
        assert_eq!(outcomes[0].ret, Ret::Ok);
    }
}
