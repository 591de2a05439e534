//! The presence model: which map pages a kernel maps when user space
//! touches pages of a mapping, one fault at a time. The tests compare
//! /proc/self/pagemap and fault counts with it.

use std::collections::BTreeSet;
use std::ops::Range;

use super::Kernel;

/// The most map pages one fault maps (ARRAY_MAP_FAULT_WINDOW, patch 0004):
/// the cap of the growing window on "prefault" and "adaptive".
pub const FAULT_WINDOW: usize = guest_common::protocol::PREFAULT_WINDOW_PAGES;

/// The largest mapping mmap() populates whole on "adaptive"
/// (ARRAY_MAP_MMAP_POPULATE_PAGES, patch 0005).
pub const POPULATE_PAGES: usize = guest_common::protocol::MMAP_POPULATE_PAGES;

/// How a kernel fills a mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fill {
    /// mmap() maps every page (eager).
    Eager,
    /// A fault maps its own page (mainline, direct).
    PerPage,
    /// A fault right above the window the last fault mapped (the map
    /// file's record) maps up to twice that window's pages upwards, one
    /// right below it as many downwards, at most FAULT_WINDOW, stopping
    /// short of the nearest mapped page and the VMA's ends; any other
    /// fault maps its own page (prefault, adaptive).
    Growing,
}

/// The window the last fault through a map file mapped: its first map
/// page and its pages (the kernel's `file->f_ra.start` and `.size`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    pub start: usize,
    pub size: usize,
}

/// The map pages a fault on map page `page` maps through a VMA of map
/// pages `vma` (`page` not present), on a kernel that fills by `fill`,
/// and the record it leaves (for `Growing`).
pub fn fault(
    fill: Fill,
    present: &BTreeSet<usize>,
    vma: &Range<usize>,
    page: usize,
    record: Option<Record>,
) -> (Range<usize>, Record) {
    let lone = (
        page..page + 1,
        Record {
            start: page,
            size: 1,
        },
    );
    let Some(last) = record.filter(|_| fill == Fill::Growing) else {
        return match fill {
            Fill::Eager => (vma.clone(), lone.1),
            _ => lone,
        };
    };
    let window = (2 * last.size).min(FAULT_WINDOW);
    if page == last.start + last.size {
        let end = (page + window).min(vma.end);
        let ceil = present
            .range(page + 1..)
            .next()
            .map_or(end, |&p| p.min(end));
        (
            page..ceil,
            Record {
                start: page,
                size: ceil - page,
            },
        )
    } else if page + 1 == last.start {
        let first = page - (window - 1).min(page - vma.start);
        let floor = present
            .range(first..page)
            .next_back()
            .map_or(first, |&p| p + 1);
        (
            floor..page + 1,
            Record {
                start: floor,
                size: page + 1 - floor,
            },
        )
    } else {
        lone
    }
}

/// A mapping of map pages `vma` as a kernel fills it: the present pages,
/// the faults taken so far and the map file's record of the last window.
#[derive(Clone, Debug)]
pub struct Filled {
    pub fill: Fill,
    pub vma: Range<usize>,
    pub present: BTreeSet<usize>,
    pub faults: usize,
    pub record: Option<Record>,
}

impl Filled {
    /// A fresh mapping through a fresh map file: everything present where
    /// mmap() populates it (eager; adaptive up to POPULATE_PAGES),
    /// nothing elsewhere.
    pub fn new(kernel: Kernel, vma: Range<usize>) -> Filled {
        let present = if kernel.populates(vma.len()) {
            vma.clone().collect()
        } else {
            BTreeSet::new()
        };
        Filled {
            fill: kernel.fill(),
            vma,
            present,
            faults: 0,
            record: None,
        }
    }

    /// The piece `vma` of a fresh mapping that mmap() made `mmap_pages`
    /// long and that was split since.
    pub fn piece(kernel: Kernel, vma: Range<usize>, mmap_pages: usize) -> Filled {
        let mut f = Filled::new(kernel, vma);
        f.present = if kernel.populates(mmap_pages) {
            f.vma.clone().collect()
        } else {
            BTreeSet::new()
        };
        f
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
            let (mapped, record) = fault(self.fill, &self.present, &self.vma, p, self.record);
            self.present.extend(mapped);
            self.record = Some(record);
            self.faults += 1;
        }
        self
    }

    /// User space touches map pages `order` through `pieces`, mappings
    /// of one map file, which share its record: each page through the
    /// piece that holds it, if one does.
    pub fn touch_pieces(pieces: &mut [Filled], order: &[usize]) {
        let mut record = None;
        for &p in order {
            if let Some(f) = pieces.iter_mut().find(|f| f.vma.contains(&p)) {
                f.record = record;
                f.touch(&[p]);
                record = f.record;
            }
        }
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
        assert_eq!(after(Kernel::Prefault, 8..48, &touched), [17, 40]);
        // adaptive populates a mapping of up to POPULATE_PAGES pages.
        assert_eq!(
            after(Kernel::Adaptive, 8..48, &[]),
            (8..48).collect::<Vec<_>>()
        );
        let large = 0..POPULATE_PAGES + 1;
        assert_eq!(after(Kernel::Adaptive, large.clone(), &[]), []);
        assert_eq!(after(Kernel::Adaptive, large, &touched), [0, 17, 40]);
    }

    #[test]
    fn a_sweep_doubles_the_growing_window_up_to_its_cap() {
        for kernel in [Kernel::Prefault, Kernel::Adaptive] {
            let mut f = Filled::new(kernel, 0..2048);
            let sweep: Vec<usize> = (0..2048).collect();
            f.touch(&sweep);
            assert_eq!(f.pages(), sweep);
            // 1, 2, 4, ..., 64 pages (7 faults, 127 pages), then 1921
            // pages in windows of 64: 31 more.
            assert_eq!(f.faults, 7 + 31);
        }
        let mut first = Filled::new(Kernel::Prefault, 0..2048);
        first.touch(&[0, 1, 3]);
        assert_eq!(first.pages(), (0..7).collect::<Vec<_>>());
        assert_eq!(first.record, Some(Record { start: 3, size: 4 }));
    }

    #[test]
    fn a_reverse_sweep_grows_the_window_downwards() {
        let mut f = Filled::new(Kernel::Prefault, 0..256);
        f.touch(&[255, 254, 252]);
        assert_eq!(f.pages(), (249..256).collect::<Vec<_>>());
        let down: Vec<usize> = (0..256).rev().collect();
        let mut all = Filled::new(Kernel::Prefault, 0..256);
        all.touch(&down);
        assert_eq!(all.faults, 7 + 3, "1..64 pages, then 129: 64, 64 and 1");
    }

    #[test]
    fn a_fault_not_next_to_the_last_window_maps_itself() {
        let touched: Vec<usize> = (0..2048).step_by(2).collect();
        let mut f = Filled::new(Kernel::Prefault, 0..2048);
        f.touch(&touched);
        assert_eq!(f.pages(), touched);
        assert_eq!(f.faults, 1024);
        // Next to a mapped run, but not to the last window: one page.
        let mut g = Filled::new(Kernel::Prefault, 0..2048);
        g.touch(&[10, 11, 100, 13]);
        assert_eq!(g.pages(), [10, 11, 12, 13, 100]);
    }

    #[test]
    fn the_growing_window_stops_short_of_mapped_pages_and_the_vma() {
        // Upwards: 20, 21..22, then 23 asks for 4 pages, 26 is mapped.
        let mut up = Filled::with_present(Kernel::Prefault, 0..40, &[26]);
        up.touch(&[20, 21, 23]);
        assert_eq!(up.pages(), (20..27).collect::<Vec<_>>());
        assert_eq!(up.record, Some(Record { start: 23, size: 3 }));
        // Downwards: 30, 29..28, then 27 asks for 4 pages, 24 is mapped.
        let mut down = Filled::with_present(Kernel::Prefault, 0..40, &[24]);
        down.touch(&[30, 29, 27]);
        assert_eq!(down.pages(), (24..31).collect::<Vec<_>>());
        assert_eq!(down.record, Some(Record { start: 25, size: 3 }));
        // The VMA's ends clamp both ways.
        let mut top = Filled::new(Kernel::Prefault, 10..14);
        top.touch(&[10, 11, 13]);
        assert_eq!(top.pages(), (10..14).collect::<Vec<_>>());
        let mut bottom = Filled::new(Kernel::Prefault, 10..20);
        bottom.touch(&[12, 11, 10]);
        assert_eq!(bottom.pages(), [10, 11, 12]);
        assert_eq!(bottom.faults, 2, "11 maps 11 and 10");
    }
}
