//! What an operation may leave when one page allocation of this thread
//! fails in it (`fail_alloc`). The allocations a fault of these mappings
//! makes are page tables: the fault's own (the core's pre-allocation and
//! the handler's insert) and those a window's fill reaches past a 2 MiB
//! boundary; on adaptive, mmap()'s populate of a small mapping makes
//! them too. The model cannot see which tables the kernel holds; a region
//! of the arena with a present page has its table, one without may or may
//! not. So a failure that fired must match the outcome of a failure at
//! one of the allocations that may have been made, each taken as the one
//! that failed (the fill run as patch 0004's code runs it, `Sim`, with
//! that allocation failing and every other one succeeding):
//!
//! - the fault's own table: the fault fails whole (VM_FAULT_OOM), having
//!   mapped nothing and left the file's record as it was. A load or
//!   store retries it, and it then maps what it would have. GUP stops
//!   there; a populate whose first page it was ends (MADV_POPULATE_*
//!   with ENOMEM, MAP_POPULATE with mmap() succeeding), one that had done
//!   pages before it goes on from it, and the fault is taken again;
//! - a table a window's fill needs (array_map_insert_range() stops at
//!   the first error): an upward fill keeps the pages it mapped below
//!   that region, and the record counts them and the faulting page. A
//!   downward fill goes a batch of INSERT_BATCH pages at a time from the
//!   top; the batch that reaches into the region fails at its first page
//!   q, and array_map_insert_below() goes on with the pages above q (the
//!   failure fired, the table is had) and stops: q+1 up to the faulting
//!   page are mapped, nothing at or below q, and the record is that run.
//!   The fault succeeds and a populate goes on;
//! - on adaptive, a table mmap()'s populate needs: it maps the mapping's
//!   pages in address order up to that region, mmap() succeeds (the
//!   populate is best effort and leaves the record alone), and
//!   MAP_POPULATE, if asked for, faults in the rest;
//! - and for an mmap(), anything it allocates (its VMA, the tree's
//!   nodes, base's eager page tables): ENOMEM, the range left unmapped;
//!   or nothing at all, as a slab absorbs a failure of its first, larger
//!   try with a smaller one.
//!
//! Every outcome carries the record the map file is left with, which the
//! model takes with the presence (`adoptions`). The record cannot be
//! seen: outcomes that return alike and leave the same pages present (a
//! populate over a whole small mapping ends with every page present
//! whichever table failed) are all kept, and the fuzzer holds each as a
//! state the kernel may be in until a later fault tells them apart.
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

use selftests::runner::model::{Fill, Record, FAULT_WINDOW};

use super::{Model, Ret, VmaModel};
use crate::op::{Advice, Mmap, Op, Range};

/// Arena pages under one page table: the arena is aligned to its size
/// (a multiple of this), so that its regions are its own.
pub const TABLE_PAGES: usize = 512;

/// The pages one vm_insert_pages() call of a window's fill takes
/// (ARRAY_MAP_INSERT_BATCH, patch 0004): a downward fill goes a batch at
/// a time.
pub const INSERT_BATCH: usize = 16;

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
    /// The record of the VMA's file after it (None with `present` None).
    pub record: Option<Record>,
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

/// A fault sequence's outcome with one allocation failed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ending {
    present: BTreeSet<usize>,
    record: Option<Record>,
    /// Whether it ended with ENOMEM.
    enomem: bool,
    /// Which allocation failed.
    failed: String,
}

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

    /// The record of the file `v` was mapped through.
    pub fn record_of(&self, v: &VmaModel) -> Option<Record> {
        self.maps.get(&v.map).and_then(|m| m.records[v.file])
    }

    /// The outcomes of `op` with an allocation failure that fired in it,
    /// `self` being the model before it: those of a failure in its path,
    /// then its unfailed outcome, for a failure outside it.
    pub fn injected_outcomes(&self, op: &Op) -> Vec<Allowed> {
        let mut outcomes = self.path_outcomes(op);
        let mut after = self.clone();
        let ret = after.apply(op);
        let v = after.layout.at(injected_range(op).at);
        let present = v.map(|v| v.present.clone());
        let record = v.and_then(|v| after.record_of(v));
        if !outcomes
            .iter()
            .any(|o| o.ret == ret && o.present == present && o.record == record)
        {
            outcomes.push(Allowed {
                ret,
                present,
                record,
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
                self.with_ret(page, Caller::Access, false, |_| ret.clone())
            }
            Op::Madvise {
                range,
                advice: Advice::PopulateRead | Advice::PopulateWrite,
            } => {
                if self.clone().apply(op) != Ret::Ok {
                    return Vec::new();
                }
                self.with_ret(*range, Caller::Madvise, false, |enomem| match enomem {
                    true => Ret::Errno(libc::ENOMEM),
                    false => Ret::Ok,
                })
            }
            Op::Mmap(m) if m.populate => self.mmap_outcomes(m),
            _ => Vec::new(),
        }
    }

    /// The outcomes of faults over `range` (one VMA's; after mmap()'s
    /// populate of the whole VMA if `at_mmap`), returning what `ret` says
    /// of an ENOMEM ending.
    fn with_ret(
        &self,
        range: Range,
        caller: Caller,
        at_mmap: bool,
        ret: impl Fn(bool) -> Ret,
    ) -> Vec<Allowed> {
        let Some(v) = self.layout.at(range.at) else {
            return Vec::new();
        };
        let start = Sim {
            fill: self.fill_of(v.map),
            v,
            present: v.present.clone(),
            record: self.record_of(v),
            tabled: self.tabled_regions(),
            pass: None,
            failed: None,
        };
        faults_with_a_failure(&start, range, caller, at_mmap)
            .into_iter()
            .map(|e| Allowed {
                ret: ret(e.enomem),
                present: Some(e.present),
                record: e.record,
                failed: e.failed,
            })
            .collect()
    }

    fn mmap_outcomes(&self, m: &Mmap) -> Vec<Allowed> {
        let mut unfailed = self.clone();
        let ret = unfailed.apply(&Op::Mmap(*m));
        let v = unfailed.layout.at(m.range.at);
        let mut outcomes = vec![
            Allowed {
                ret: Ret::Errno(libc::ENOMEM),
                present: None,
                record: None,
                failed: "an allocation of mmap()".into(),
            },
            Allowed {
                ret,
                present: v.map(|v| v.present.clone()),
                record: v.and_then(|v| unfailed.record_of(v)),
                failed: "a slab's first try, absorbed,".into(),
            },
        ];
        let mut mapped = self.clone();
        let lazily = Mmap {
            populate: false,
            ..*m
        };
        if mapped.apply(&Op::Mmap(lazily)) != Ret::Ok {
            return outcomes;
        }
        // Adaptive's populate at mmap(), best effort (base's fails mmap()
        // whole: the first outcome).
        let at_mmap =
            mapped.fill_of(m.map) != Fill::Eager && mapped.populated_at_mmap(m.map, m.range.pages);
        if at_mmap {
            mapped.layout.get_mut(m.range.at).expect("mapped").present = BTreeSet::new();
        }
        let faulted = Range {
            pages: if m.prot.readable() { m.range.pages } else { 0 },
            ..m.range
        };
        if at_mmap || faulted.pages > 0 {
            outcomes.extend(mapped.with_ret(faulted, Caller::MapPopulate, at_mmap, |_| Ret::Ok));
        }
        outcomes
    }
}

/// A state the model may take after a fired failure: one outcome's.
#[derive(Debug, Clone)]
pub struct Adopted {
    pub model: Model,
    /// Whether the failure was one in the operation's path (not one
    /// outside it, absorbed).
    pub in_path: bool,
}

impl Model {
    /// After `op` with a failure that fired in it: the states of the
    /// outcomes that `got` and the presence `observed` (of a VMA the
    /// model holds) match, `self` being the model as if nothing failed and
    /// `before` the model before `op`; else how the kernel differs. Each
    /// carries its outcome's record of the VMA's file: outcomes alike in
    /// all the kernel shows can differ in it, and only a later fault
    /// tells them apart, so every one that matches is kept, in order.
    pub fn adoptions(
        &self,
        before: &Model,
        op: &Op,
        got: &Ret,
        observed: impl Fn(&VmaModel) -> BTreeSet<usize>,
    ) -> Result<Vec<Adopted>, Disallowed> {
        let range = injected_range(op);
        let seen = self.layout.at(range.at).map(|v| (v.start, observed(v)));
        let outcomes = before.injected_outcomes(op);
        let mut adopted: Vec<Adopted> = Vec::new();
        for o in outcomes.iter().filter(|o| o.ret == *got) {
            let model = match (&o.present, &seen) {
                (None, _) => {
                    let mut m = before.clone();
                    m.unmap(range);
                    m
                }
                (Some(want), Some((start, seen))) if want == seen => {
                    let mut m = self.clone();
                    let v = m.layout.get_mut(*start).expect("held");
                    v.present = seen.clone();
                    let (map, file) = (v.map, v.file);
                    m.maps.get_mut(&map).expect("mapped").records[file] = o.record;
                    m
                }
                _ => continue,
            };
            if !adopted.iter().any(|a| a.model == model) {
                adopted.push(Adopted {
                    model,
                    in_path: o.failed != OUTSIDE,
                });
            }
        }
        match adopted.is_empty() {
            true => Err(Disallowed {
                seen: seen.map(|(_, p)| p),
                allowed: outcomes,
            }),
            false => Ok(adopted),
        }
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

/// Faults over arena pages `range` of `v` in order (after mmap()'s
/// populate of all of it if `at_mmap`), as an access or a populate takes
/// them, from `start`, with one allocation failing: an ending for each
/// allocation that may have been made and failed.
fn faults_with_a_failure(start: &Sim, range: Range, caller: Caller, at_mmap: bool) -> Vec<Ending> {
    let pages: Vec<usize> = (range.at..range.end())
        .map(|p| start.v.map_page(p))
        .collect();
    let mut endings = Vec::new();
    for pass in 0.. {
        let mut sim = Sim {
            pass: Some(pass),
            ..start.clone()
        };
        if at_mmap {
            let all = start.v.map_pages();
            sim.insert_range(all.start, all.end, "mmap()'s populate");
        }
        let enomem = sim.faults(&pages, caller);
        // Fewer allocations than `pass + 1`: none is left to fail.
        let Some(failed) = sim.failed else {
            break;
        };
        endings.push(Ending {
            present: sim.present,
            record: sim.record,
            enomem,
            failed,
        });
    }
    endings
}

/// The kernel's faults in one VMA as patch 0004's code makes them
/// (array_map_mmap_fault() and the helpers it calls, by name), with the
/// page tables they allocate: the allocation after `pass` others fails,
/// and that one alone (fail_page_alloc fires once).
#[derive(Clone)]
struct Sim<'a> {
    fill: Fill,
    v: &'a VmaModel,
    present: BTreeSet<usize>,
    /// The record of the VMA's file.
    record: Option<Record>,
    /// The regions whose page table is there.
    tabled: BTreeSet<usize>,
    /// Allocations to pass before the one that fails; None: none fails
    /// (any more).
    pass: Option<usize>,
    /// Which allocation failed, once one has.
    failed: Option<String>,
}

impl Sim<'_> {
    /// Whether the page table of map page `mp`'s region can be had,
    /// allocated now if it is not there; `what` names the allocation.
    fn table(&mut self, mp: usize, what: impl FnOnce() -> String) -> bool {
        let region = arena_page(self.v, mp) / TABLE_PAGES;
        if self.tabled.contains(&region) {
            return true;
        }
        match self.pass {
            Some(0) => {
                self.pass = None;
                self.failed = Some(what());
                return false;
            }
            Some(n) => self.pass = Some(n - 1),
            None => {}
        }
        self.tabled.insert(region);
        true
    }

    /// array_map_insert_range(): maps pages `first..end` in address
    /// order, up to the first that is present or whose table cannot be
    /// had; how many it mapped. (A present page's region has its table:
    /// vm_insert_pages() allocating before it looks at the ptes changes
    /// nothing.)
    fn insert_range(&mut self, first: usize, end: usize, why: &str) -> usize {
        for q in first..end {
            let table = self.table(q, || format!("the page table of map page {q} in {why}"));
            if !table || self.present.contains(&q) {
                return q - first;
            }
            self.present.insert(q);
        }
        end.saturating_sub(first)
    }

    /// array_map_insert_below(): maps pages `first..end` down from `end`
    /// a batch at a time, each in address order; a batch that stops at a
    /// page q has what it mapped below q unmapped again, and the fill goes
    /// on with the pages above q, then ends. How many pages right below
    /// `end` are mapped.
    fn insert_below(&mut self, mut first: usize, end: usize, why: &str) -> usize {
        let mut lo = end;
        while lo > first {
            let from = lo - (lo - first).min(INSERT_BATCH);
            let nr = self.insert_range(from, lo, why);
            if from + nr == lo {
                lo = from;
                continue;
            }
            for q in from..from + nr {
                self.present.remove(&q);
            }
            first = from + nr + 1;
        }
        end - lo
    }

    /// A fault at map page `mp` (not present): false if its own page
    /// table cannot be had (VM_FAULT_OOM: nothing mapped, the record as
    /// it was). A growing window is filled as array_map_mmap_fault() does.
    fn fault(&mut self, mp: usize) -> bool {
        if !self.table(mp, || {
            format!("the page table of map page {mp}'s own fault")
        }) {
            return false;
        }
        self.present.insert(mp);
        if self.fill != Fill::Growing {
            return true;
        }
        let vma = self.v.map_pages();
        let why = format!("map page {mp}'s fill");
        let (start, size) = match self.record {
            Some(r) if mp == r.start + r.size => {
                let window = (2 * r.size).min(FAULT_WINDOW);
                let n = self.insert_range(mp + 1, (mp + window).min(vma.end), &why);
                (mp, 1 + n)
            }
            Some(r) if mp + 1 == r.start => {
                let window = (2 * r.size).min(FAULT_WINDOW);
                let n = self.insert_below(mp - (window - 1).min(mp - vma.start), mp, &why);
                (mp - n, 1 + n)
            }
            _ => (mp, 1),
        };
        self.record = Some(Record { start, size });
        true
    }

    /// Faults over map pages `pages` in order, as `caller` takes them;
    /// whether they end with ENOMEM.
    fn faults(&mut self, pages: &[usize], caller: Caller) -> bool {
        for (i, &mp) in pages.iter().enumerate() {
            if self.present.contains(&mp) {
                continue;
            }
            if self.fill == Fill::Eager {
                // A hole on base: no fault handler, no allocation.
                break;
            }
            while !self.fault(mp) {
                match (caller, i) {
                    (Caller::Madvise, 0) => return true,
                    (Caller::MapPopulate, 0) => return false,
                    // Taken again: the failure has fired.
                    _ => {}
                }
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::parse_ops;
    use selftests::runner::model::fault;
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

    fn pages(r: std::ops::Range<usize>) -> Vec<usize> {
        r.collect()
    }

    fn record(start: usize, size: usize) -> Option<Record> {
        Some(Record { start, size })
    }

    /// `m` after `op` with a failure fired that left outcome `o`, as the
    /// fuzzer takes it when the kernel shows `o`'s presence.
    fn adopted(m: &Model, op: &Op, o: &Allowed) -> Model {
        let mut unfailed = m.clone();
        unfailed.apply(op);
        let seen = o.present.clone().unwrap();
        let all = unfailed
            .adoptions(m, op, &o.ret, |_| seen.clone())
            .expect("an allowed outcome is adopted");
        let at = injected_range(op).at;
        let ours =
            |a: &&Adopted| a.model.layout.at(at).and_then(|v| a.model.record_of(v)) == o.record;
        let a = all
            .iter()
            .find(ours)
            .expect("the outcome's record among them");
        assert_eq!(a.in_path, o.failed != OUTSIDE);
        a.model.clone()
    }

    /// A mapping of map pages 0..128 across the region boundary at arena
    /// page 512 (map page 32 is its first page past it), and a page
    /// present in the region below it, elsewhere.
    const ACROSS: &str = "create m0 value=4096 entries=128\n\
                          create m1 value=4096 entries=1\n\
                          mmap @100+1 m1 pgoff=0 r\n\
                          touch @100.0=r\n\
                          mmap @480+128 m0 pgoff=0 rw\n";

    /// On ACROSS, sequential touches of map pages 20, 21, 23: the record
    /// is 23..27, so a fault at 27 asks for 8 pages up, 27..35.
    const UPWARDS: &str = "touch @500.0=r\ntouch @501.0=r\ntouch @503.0=r\n";

    #[test]
    fn an_upward_fill_cut_at_a_region_without_a_table_keeps_the_pages_below_it() {
        let m = after(Kernel::Prefault, &format!("{ACROSS}{UPWARDS}"));
        assert_eq!(m.maps[&0].records[0], record(23, 4));
        let touch: Op = "touch @507.0=r".parse().unwrap();
        let outcomes = m.injected_outcomes(&touch);
        let got: Vec<(Vec<usize>, Option<Record>)> =
            outcomes.iter().map(|o| (present(o), o.record)).collect();
        assert_eq!(
            got,
            [
                // The fault's own region has a present page: only the
                // fill can fail, at map page 32; the record counts 27..32.
                (pages(20..32), record(27, 5)),
                // Unfailed (outside the path): the window whole.
                (pages(20..35), record(27, 8)),
            ]
        );
        // Taken, the cut window's record sizes the next one: 32 is right
        // above 27..32, and asks for 10 pages.
        let mut cut = adopted(&m, &touch, &outcomes[0]);
        cut.apply(&"touch @512.0=r".parse().unwrap());
        assert_eq!(cut.layout.at(512).unwrap().present, (20..42).collect());
        assert_eq!(cut.maps[&0].records[0], record(32, 10));
    }

    #[test]
    fn a_downward_fill_failing_maps_only_the_pages_above_the_failed_one() {
        // Map pages 0..128 at arena 440: map page 72 is the first past
        // the boundary at 512, and nothing is present below it.
        let mut text =
            String::from("create m0 value=4096 entries=128\nmmap @440+128 m0 pgoff=0 rw\n");
        // Downwards from 127: windows of 1, 2, 4, 8, 16 leave 97..128
        // mapped and the record 97..113.
        for page in [127, 126, 124, 120, 112] {
            text += &format!("touch @{}.0=r\n", 440 + page);
        }
        let m = after(Kernel::Prefault, &text);
        assert_eq!(m.maps[&0].records[0], record(97, 16));
        // 96 asks for 32 pages down, 65..=96: the batch 80..96 goes in,
        // the batch 65..80 fails at its first page, 65, below the
        // boundary; 66..80 go in on the second try, and the fill ends.
        let touch: Op = format!("touch @{}.0=w:5", 440 + 96).parse().unwrap();
        let outcomes = m.injected_outcomes(&touch);
        let got: Vec<(Vec<usize>, Option<Record>)> =
            outcomes.iter().map(|o| (present(o), o.record)).collect();
        assert_eq!(
            got,
            [
                (pages(66..128), record(66, 31)),
                (pages(65..128), record(65, 32)),
            ]
        );
        assert_eq!(outcomes[0].ret, Ret::Ok);
        assert_eq!(
            outcomes[0].failed,
            "the page table of map page 65 in map page 96's fill"
        );
        // Taken, 65 is right below the record: it fills 62 pages down.
        let mut cut = adopted(&m, &touch, &outcomes[0]);
        cut.apply(&format!("touch @{}.0=r", 440 + 65).parse().unwrap());
        assert_eq!(cut.layout.at(440).unwrap().present, (4..128).collect());
        assert_eq!(cut.maps[&0].records[0], record(4, 62));
    }

    #[test]
    fn a_downward_fill_fails_in_the_batch_that_reaches_past_the_boundary() {
        // Map pages 0..165 at arena 432: map page 80 is the first past the
        // boundary at 512. Downwards from 164, windows of 1, 2, ..., 32
        // leave 102..165 mapped and the record 102..134.
        let mut text =
            String::from("create m0 value=4096 entries=165\nmmap @432+165 m0 pgoff=0 rw\n");
        for page in [164, 163, 161, 157, 149, 133] {
            text += &format!("touch @{}.0=r\n", 432 + page);
        }
        let m = after(Kernel::Prefault, &text);
        assert_eq!(m.maps[&0].records[0], record(102, 32));
        // 101 asks for 64 pages, 38..=101, in batches of 16 from the top:
        // 85..101 goes in, 69..85 fails at 69 (below the boundary), and
        // 70..85 go in on the second try: 53..69 and 38..53 never do.
        let touch: Op = format!("touch @{}.0=r", 432 + 101).parse().unwrap();
        let got: Vec<(Vec<usize>, Option<Record>)> = m
            .injected_outcomes(&touch)
            .iter()
            .map(|o| (present(o), o.record))
            .collect();
        assert_eq!(
            got,
            [
                (pages(70..165), record(70, 32)),
                (pages(38..165), record(38, 64)),
            ]
        );
    }

    #[test]
    fn a_fault_in_a_region_without_a_present_page_may_fail_whole() {
        let m = after(Kernel::Prefault, ACROSS);
        // Map page 40 lies past the boundary: its own table may be
        // missing; a load retries and maps it, alone (no record yet).
        let outcomes = m.path_outcomes(&"touch @520.0=w:7".parse().unwrap());
        let got: Vec<(Vec<usize>, Option<Record>)> =
            outcomes.iter().map(|o| (present(o), o.record)).collect();
        assert_eq!(got, [(vec![40], record(40, 1))]);
        assert!(outcomes.iter().all(|o| o.ret == Ret::Ok));
        // A populate over it ends with ENOMEM, nothing mapped, the record
        // as it was.
        let m = after(Kernel::Prefault, &format!("{ACROSS}{UPWARDS}"));
        let populate = "madvise @520+4 populate_read".parse().unwrap();
        let outcomes = m.path_outcomes(&populate);
        assert_eq!(outcomes[0].ret, Ret::Errno(libc::ENOMEM));
        assert_eq!(present(&outcomes[0]), pages(20..27));
        assert_eq!(outcomes[0].record, record(23, 4));
    }

    #[test]
    fn per_page_kernels_fail_only_their_own_table_and_base_not_at_all() {
        for kernel in [Kernel::Mainline, Kernel::Direct] {
            let m = after(kernel, ACROSS);
            let below = m.path_outcomes(&"touch @500.0=r".parse().unwrap());
            assert!(below.is_empty(), "{kernel:?}: the region has its table");
            let above = m.path_outcomes(&"touch @520.0=r".parse().unwrap());
            assert_eq!(above.iter().map(present).collect::<Vec<_>>(), [vec![40]]);
            assert_eq!(above[0].record, None, "{kernel:?}: no window, no record");
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
    fn adaptives_populate_at_mmap_is_best_effort() {
        // Nothing present anywhere: both regions' tables may be missing.
        let m = after(Kernel::Adaptive, "create m0 value=4096 entries=128\n");
        let mmap: Op = "mmap @480+128 m0 pgoff=0 r populate".parse().unwrap();
        let outcomes = m.path_outcomes(&mmap);
        let got: Vec<(Ret, Option<Vec<usize>>, Option<Record>)> = outcomes
            .iter()
            .map(|o| {
                (
                    o.ret.clone(),
                    o.present.as_ref().map(|_| present(o)),
                    o.record,
                )
            })
            .collect();
        // mmap() succeeds whichever table its populate failed at, and
        // MAP_POPULATE faults in the rest: every page ends up present,
        // only the record tells them apart. From map page 0 it grows
        // 1, 2, 4, ..., 64 pages, then 127 alone; from 32, up to 95..128.
        assert_eq!(
            got,
            [
                (Ret::Errno(libc::ENOMEM), None, None),
                (Ret::Ok, Some(pages(0..128)), None),
                (Ret::Ok, Some(pages(0..128)), record(127, 1)),
                (Ret::Ok, Some(pages(0..128)), record(95, 33)),
            ]
        );
        // Without MAP_POPULATE's faults (not readable), what the populate
        // mapped before the region it failed at is all there is.
        let none: Op = "mmap @480+128 m0 pgoff=0 none populate".parse().unwrap();
        let got: Vec<Vec<usize>> = m.path_outcomes(&none)[2..].iter().map(present).collect();
        assert_eq!(got, [vec![], pages(0..32)]);
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
    fn outcomes_alike_but_for_their_record_are_all_kept() {
        // ci's fuzz at b7f71fe: a MAP_POPULATE of map pages 1..3 right
        // above a record of page 0, its pages 2 and 3 past a region
        // boundary. With the fill's table failed at page 2, page 2's own
        // fault then grows a window to 3 (record 2..4); with a failure
        // outside the path, page 1's window takes 2 and page 3 faults
        // alone (record 3..4). Both leave 1..3 present.
        let m = after(
            Kernel::Prefault,
            "create m6 value=4096 entries=4\nmmap @161+4 m6 pgoff=0 rw\n\
             mmap @1534+1 m6 pgoff=0 r\ntouch @1534.193=r\n",
        );
        let op: Op = "mmap @1535+3 m6 pgoff=1 r populate".parse().unwrap();
        let mut unfailed = m.clone();
        unfailed.apply(&op);
        let seen: BTreeSet<usize> = (1..4).collect();
        let states = unfailed
            .adoptions(&m, &op, &Ret::Ok, |_| seen.clone())
            .expect("allowed");
        let records: Vec<_> = states.iter().map(|a| a.model.maps[&6].records[0]).collect();
        assert!(
            records.contains(&record(2, 2)) && records.contains(&record(3, 1)),
            "{records:?}"
        );
        // A read of map page 2 through the first mapping tells them apart
        // (the kernel showed page 2 alone).
        let read: Op = "touch @163.178=r".parse().unwrap();
        let present: BTreeSet<Vec<usize>> = states
            .iter()
            .map(|a| {
                let mut m = a.model.clone();
                m.apply(&read);
                m.layout.at(161).unwrap().present.iter().copied().collect()
            })
            .collect();
        assert_eq!(present, [vec![2], vec![1, 2]].into());
    }

    #[test]
    fn a_growing_window_cut_at_a_region_goes_on_populating_after_it() {
        // Touches of map pages 28 and 29 leave 28..=30 present and the
        // record 29..31; the populate's fault at 31 would map 31..=34
        // past the boundary at 32: cut there (the record 31..32), then 32
        // faults right above it and maps 32..=33.
        let m = after(
            Kernel::Prefault,
            &format!("{ACROSS}touch @508.0=r\ntouch @509.0=r\n"),
        );
        let populate = "madvise @511+3 populate_read".parse().unwrap();
        let outcomes = m.injected_outcomes(&populate);
        let got: Vec<(Vec<usize>, Option<Record>)> =
            outcomes.iter().map(|o| (present(o), o.record)).collect();
        assert_eq!(
            got,
            [
                (pages(28..34), record(32, 2)),
                (pages(28..35), record(31, 4)),
            ]
        );
        assert_eq!(outcomes[0].ret, Ret::Ok);
    }

    #[test]
    fn the_fill_as_patch_0004_runs_it_maps_what_the_model_says() {
        // Unfailed, the batches of `Sim` (array_map_insert_below() and
        // its unmapping of what went in below a present page) map what
        // `fault` says a window maps, and leave its record.
        let mut rng = crate::rng::Rng::new(1);
        let v = VmaModel {
            start: 0,
            pages: 100,
            map: 0,
            pgoff: 20,
            prot: crate::op::Prot::Read,
            maywrite: false,
            present: BTreeSet::new(),
            file: 0,
        };
        let vma = v.map_pages();
        let mut downward_stops = 0;
        for _ in 0..5000 {
            let present: BTreeSet<usize> = vma.clone().filter(|_| rng.chance(1, 12)).collect();
            let Some(&page) = vma
                .clone()
                .filter(|p| !present.contains(p))
                .collect::<Vec<_>>()
                .get(rng.below(vma.len() - present.len()))
            else {
                continue;
            };
            let size = rng.between(1, 40);
            let start = match rng.below(3) {
                0 => (page + 1).min(vma.end),
                1 => page.saturating_sub(size).max(vma.start),
                _ => rng.between(vma.start, vma.end - 1),
            };
            let rec = Some(Record { start, size });
            let (window, want) = fault(Fill::Growing, &present, &vma, page, rec);
            let mut sim = Sim {
                fill: Fill::Growing,
                v: &v,
                present: present.clone(),
                record: rec,
                tabled: [0].into(),
                pass: None,
                failed: None,
            };
            assert!(sim.fault(page));
            let mut mapped = present.clone();
            mapped.extend(window.clone());
            assert_eq!(sim.present, mapped, "{page} {rec:?} {present:?}");
            assert_eq!(sim.record, Some(want), "{page} {rec:?} {present:?}");
            let asked = (page + 1).saturating_sub((2 * size).min(64));
            downward_stops += usize::from(page + 1 == start && window.start > asked.max(vma.start));
        }
        assert!(
            downward_stops > 100,
            "{downward_stops} downward windows cut short"
        );
    }
}
