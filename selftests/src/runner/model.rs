//! The presence model: which map pages a kernel maps when user space
//! touches pages of a mapping, one fault at a time. The tests compare
//! /proc/self/pagemap and fault counts with it.

use std::collections::BTreeSet;
use std::ops::Range;

use super::Kernel;

/// The most map pages one fault maps (ARRAY_MAP_FAULT_WINDOW, patch 0004):
/// the aligned window on "prefault", the cap of the growing one on
/// "adaptive".
pub const FAULT_WINDOW: usize = guest_common::protocol::PREFAULT_WINDOW_PAGES;

/// How a kernel fills a mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fill {
    /// mmap() maps every page (eager).
    Eager,
    /// A fault maps its own page (mainline, direct).
    PerPage,
    /// A fault maps the aligned window of FAULT_WINDOW map pages around
    /// the faulting page, clamped to the VMA (prefault).
    AlignedWindow,
    /// A fault maps one page more than the longest run of mapped pages
    /// right below or right above it (within the VMA, at most
    /// FAULT_WINDOW), upwards from it, or downwards when the run above is
    /// the longer, never past the nearest mapped page: a hole between two
    /// mapped runs is filled by its own page (adaptive).
    Growing,
}

/// The map pages a fault on map page `page` maps on "prefault", through a
/// VMA of map pages `vma`: its aligned window, clamped.
fn window(page: usize, vma: &Range<usize>) -> Range<usize> {
    let first = page - page % FAULT_WINDOW;
    first.max(vma.start)..(first + FAULT_WINDOW).min(vma.end)
}

/// The map pages mapped in a row next to `page`: below it (`down`) or
/// above it, inside `vma`, counted up to FAULT_WINDOW.
pub fn mapped_run(present: &BTreeSet<usize>, vma: &Range<usize>, page: usize, down: bool) -> usize {
    (1..=FAULT_WINDOW)
        .take_while(|&k| {
            let p = if down {
                page.checked_sub(k)
            } else {
                Some(page + k)
            };
            p.is_some_and(|p| vma.contains(&p) && present.contains(&p))
        })
        .count()
}

/// The map pages a fault on map page `page` maps through a VMA of map
/// pages `vma` (`page` not present), on a kernel that fills by `fill`.
pub fn fault(
    fill: Fill,
    present: &BTreeSet<usize>,
    vma: &Range<usize>,
    page: usize,
) -> Range<usize> {
    match fill {
        Fill::Eager => vma.clone(),
        Fill::PerPage => page..page + 1,
        Fill::AlignedWindow => window(page, vma),
        Fill::Growing => {
            let below = mapped_run(present, vma, page, true);
            let above = mapped_run(present, vma, page, false);
            let w = (below.max(above) + 1).min(FAULT_WINDOW);
            if above > below {
                let floor = present
                    .range(..page)
                    .next_back()
                    .map_or(vma.start, |&p| p + 1);
                (page + 1).saturating_sub(w).max(floor).max(vma.start)..page + 1
            } else if above == 0 {
                let ceil = present.range(page + 1..).next().map_or(vma.end, |&p| p);
                page..(page + w).min(ceil).min(vma.end)
            } else {
                page..page + 1
            }
        }
    }
}

/// A mapping of map pages `vma` as a kernel fills it: the present pages
/// and the faults taken so far.
#[derive(Clone, Debug)]
pub struct Filled {
    pub fill: Fill,
    pub vma: Range<usize>,
    pub present: BTreeSet<usize>,
    pub faults: usize,
}

impl Filled {
    /// A fresh mapping: everything present on eager, nothing elsewhere.
    pub fn new(kernel: Kernel, vma: Range<usize>) -> Filled {
        let fill = kernel.fill();
        let present = match fill {
            Fill::Eager => vma.clone().collect(),
            _ => BTreeSet::new(),
        };
        Filled {
            fill,
            vma,
            present,
            faults: 0,
        }
    }

    /// The same, with the map pages `present` (inside `vma`) mapped.
    pub fn with_present(kernel: Kernel, vma: Range<usize>, present: &[usize]) -> Filled {
        let mut f = Filled::new(kernel, vma);
        f.present
            .extend(present.iter().filter(|p| f.vma.contains(p)));
        f
    }

    /// User space touches map pages `pages`, in this order.
    pub fn touch(&mut self, pages: &[usize]) -> &mut Filled {
        for &p in pages {
            if !self.vma.contains(&p) || self.present.contains(&p) {
                continue;
            }
            let mapped = fault(self.fill, &self.present, &self.vma, p);
            self.present.extend(mapped);
            self.faults += 1;
        }
        self
    }

    /// The present map pages, sorted.
    pub fn pages(&self) -> Vec<usize> {
        self.present.iter().copied().collect()
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    fn after(kernel: Kernel, vma: Range<usize>, touched: &[usize]) -> Vec<usize> {
        Filled::new(kernel, vma).touch(touched).pages()
    }

    #[test]
    fn each_kernel_fills_as_its_patch_says() {
        let touched = [0, 17, 40];
        assert_eq!(
            after(Kernel::Eager, 8..48, &touched),
            (8..48).collect::<Vec<_>>()
        );
        assert_eq!(after(Kernel::Mainline, 8..48, &touched), [17, 40]);
        assert_eq!(after(Kernel::Direct, 8..48, &touched), [17, 40]);
        let w = FAULT_WINDOW;
        assert_eq!(
            after(Kernel::Prefault, w / 2..3 * w, &[w / 2 + 1, 2 * w + 3]),
            (w / 2..w).chain(2 * w..3 * w).collect::<Vec<_>>()
        );
        assert_eq!(after(Kernel::Prefault, 0..4, &[0]), [0, 1, 2, 3]);
        assert_eq!(after(Kernel::Adaptive, 8..48, &touched), [17, 40]);
    }

    #[test]
    fn a_sweep_doubles_the_growing_window_up_to_its_cap() {
        let mut f = Filled::new(Kernel::Adaptive, 0..2048);
        let sweep: Vec<usize> = (0..2048).collect();
        f.touch(&sweep);
        assert_eq!(f.pages(), sweep);
        // 1, 2, 4, ..., 64 pages (7 faults, 127 pages), then 1921 pages
        // in windows of 64: 31 more.
        assert_eq!(f.faults, 7 + 31);
        let mut first = Filled::new(Kernel::Adaptive, 0..2048);
        first.touch(&[0, 1, 3]);
        assert_eq!(first.pages(), (0..7).collect::<Vec<_>>());
    }

    #[test]
    fn a_reverse_sweep_grows_the_window_downwards() {
        let mut f = Filled::new(Kernel::Adaptive, 0..256);
        f.touch(&[255, 254, 252]);
        assert_eq!(f.pages(), (249..256).collect::<Vec<_>>());
        let down: Vec<usize> = (0..256).rev().collect();
        let mut all = Filled::new(Kernel::Adaptive, 0..256);
        all.touch(&down);
        assert_eq!(all.faults, 7 + 3, "1..64 pages, then 129: 64, 64 and 1");
    }

    #[test]
    fn sparse_touches_map_only_themselves_on_the_growing_window() {
        let touched: Vec<usize> = (0..2048).step_by(2).collect();
        let mut f = Filled::new(Kernel::Adaptive, 0..2048);
        f.touch(&touched);
        assert_eq!(f.pages(), touched);
        assert_eq!(f.faults, 1024);
    }

    #[test]
    fn the_growing_window_stays_in_the_vma_and_stops_short_of_mapped_pages() {
        let mut f = Filled::with_present(Kernel::Adaptive, 10..20, &[12, 13, 14, 16]);
        f.touch(&[15]);
        // below 12..15 (3), above 16 (1): a hole, filled by its own page.
        assert_eq!(f.pages(), (12..17).collect::<Vec<_>>());
        let mut up = Filled::with_present(Kernel::Adaptive, 0..40, &[10, 11, 12, 13, 18]);
        up.touch(&[14]);
        // below 10..14 (4), nothing right above: 5 pages up, short of 18.
        assert_eq!(up.pages(), (10..19).collect::<Vec<_>>());
        let mut g = Filled::with_present(Kernel::Adaptive, 10..20, &[12, 13, 14]);
        g.touch(&[11]);
        // above 12..15 (3): 4 pages downwards, clamped at the VMA's 10.
        assert_eq!(g.pages(), (10..15).collect::<Vec<_>>());
        assert_eq!(g.faults, 1);
    }

    #[test]
    fn a_hole_between_runs_maps_no_page_past_them() {
        // The review's case: 10..19 and 21..84 mapped, a fault at 20 maps
        // 20 alone, not the untouched 0..9 below the shorter run.
        let present: Vec<usize> = (10..20).chain(21..85).collect();
        let mut f = Filled::with_present(Kernel::Adaptive, 0..128, &present);
        f.touch(&[20]);
        assert_eq!(f.pages(), (10..85).collect::<Vec<_>>());
        // Downwards from a run above (21..31, 10 pages), the window of 11
        // stops above page 17.
        let above: Vec<usize> = std::iter::once(17).chain(21..31).collect();
        let mut g = Filled::with_present(Kernel::Adaptive, 0..128, &above);
        g.touch(&[20]);
        assert_eq!(g.pages(), (17..31).collect::<Vec<_>>());
    }
}
