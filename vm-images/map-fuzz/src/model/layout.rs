//! The mappings of maps in the fuzzer's arena, as VMAs: where each one
//! is, what it maps, its protection and lock, and which of its pages are
//! present. The kernel never merges these VMAs (VM_MIXEDMAP and
//! VM_DONTEXPAND are in VM_SPECIAL), so they only ever split.

use std::collections::{BTreeMap, BTreeSet};

use crate::op::{Prot, Range};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmaModel {
    /// First arena page.
    pub start: usize,
    pub pages: usize,
    pub map: u32,
    /// The map page at `start`.
    pub pgoff: usize,
    pub prot: Prot,
    /// VM_MAYWRITE: mapped writable at first. It counts towards the map's
    /// writable mappings (freeze refuses them) whatever mprotect did since.
    pub maywrite: bool,
    /// Present map pages.
    pub present: BTreeSet<usize>,
    /// The map's file it was mapped through (an index into
    /// `MapModel::records`): its faults read and leave that file's record.
    pub file: usize,
}

impl VmaModel {
    pub fn end(&self) -> usize {
        self.start + self.pages
    }

    /// The map pages it covers.
    pub fn map_pages(&self) -> std::ops::Range<usize> {
        self.pgoff..self.pgoff + self.pages
    }

    /// The map page at arena page `page` (inside the VMA).
    pub fn map_page(&self, page: usize) -> usize {
        self.pgoff + (page - self.start)
    }

    /// Arena pages `from..to` of it, with their presence.
    fn slice(&self, from: usize, to: usize) -> VmaModel {
        let pgoff = self.map_page(from);
        let pages = pgoff..pgoff + (to - from);
        VmaModel {
            start: from,
            pages: to - from,
            pgoff,
            present: self
                .present
                .iter()
                .copied()
                .filter(|p| pages.contains(p))
                .collect(),
            ..self.clone()
        }
    }
}

/// The VMAs by start page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    vmas: BTreeMap<usize, VmaModel>,
}

impl Layout {
    pub fn iter(&self) -> impl Iterator<Item = &VmaModel> {
        self.vmas.values()
    }

    pub fn len(&self) -> usize {
        self.vmas.len()
    }

    pub fn is_empty(&self) -> bool {
        self.vmas.is_empty()
    }

    /// The VMA holding arena page `page`.
    pub fn at(&self, page: usize) -> Option<&VmaModel> {
        self.vmas
            .range(..=page)
            .next_back()
            .map(|(_, v)| v)
            .filter(|v| page < v.end())
    }

    /// The VMA holding all of `r`, if one does.
    pub fn holding(&self, r: Range) -> Option<&VmaModel> {
        self.at(r.at).filter(|v| r.pages > 0 && r.end() <= v.end())
    }

    /// Whether `r` is exactly one VMA.
    pub fn is_exactly(&self, r: Range) -> bool {
        self.vmas.get(&r.at).is_some_and(|v| v.pages == r.pages)
    }

    pub fn insert(&mut self, v: VmaModel) {
        debug_assert!(self.overlapping(v.start, v.end()).is_empty(), "{v:?}");
        self.vmas.insert(v.start, v);
    }

    /// Starts of the VMAs that overlap arena pages `from..to`.
    fn overlapping(&self, from: usize, to: usize) -> Vec<usize> {
        self.vmas
            .values()
            .filter(|v| v.start < to && from < v.end())
            .map(|v| v.start)
            .collect()
    }

    /// Unmaps arena pages `r`: the VMAs there are cut to what lies outside
    /// it. Returns the pieces taken away.
    pub fn unmap(&mut self, r: Range) -> Vec<VmaModel> {
        let mut gone = Vec::new();
        for start in self.overlapping(r.at, r.end()) {
            let v = self.vmas.remove(&start).expect("listed");
            if v.start < r.at {
                self.vmas.insert(v.start, v.slice(v.start, r.at));
            }
            if r.end() < v.end() {
                self.vmas.insert(r.end(), v.slice(r.end(), v.end()));
            }
            gone.push(v.slice(v.start.max(r.at), v.end().min(r.end())));
        }
        gone
    }

    /// Splits the VMA holding `r` so that `r` is a VMA of its own (as
    /// mprotect of part of a VMA does), and returns it.
    /// None if no one VMA holds `r`.
    pub fn isolate(&mut self, r: Range) -> Option<&mut VmaModel> {
        let v = self.holding(r)?.clone();
        self.vmas.remove(&v.start);
        if v.start < r.at {
            self.vmas.insert(v.start, v.slice(v.start, r.at));
        }
        if r.end() < v.end() {
            self.vmas.insert(r.end(), v.slice(r.end(), v.end()));
        }
        self.vmas.insert(r.at, v.slice(r.at, r.end()));
        self.vmas.get_mut(&r.at)
    }

    pub fn get_mut(&mut self, start: usize) -> Option<&mut VmaModel> {
        self.vmas.get_mut(&start)
    }

    pub fn remove(&mut self, start: usize) -> Option<VmaModel> {
        self.vmas.remove(&start)
    }

    /// VMAs of `map` that count as writable mappings of it.
    pub fn writers(&self, map: u32) -> usize {
        self.iter().filter(|v| v.map == map && v.maywrite).count()
    }

    pub fn maps_a(&self, map: u32) -> bool {
        self.iter().any(|v| v.map == map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vma(start: usize, pages: usize, present: &[usize]) -> VmaModel {
        VmaModel {
            start,
            pages,
            map: 0,
            pgoff: 2,
            prot: Prot::ReadWrite,
            maywrite: true,
            present: present.iter().copied().collect(),
            file: 0,
        }
    }

    fn spans(l: &Layout) -> Vec<(usize, usize, usize)> {
        l.iter().map(|v| (v.start, v.pages, v.pgoff)).collect()
    }

    #[test]
    fn unmapping_the_middle_leaves_two_vmas_with_their_pages() {
        let mut l = Layout::default();
        // Arena 10..20 maps map pages 2..12; pages 3, 6 and 11 present.
        l.insert(vma(10, 10, &[3, 6, 11]));
        let gone = l.unmap(Range { at: 13, pages: 4 });
        assert_eq!(spans(&l), [(10, 3, 2), (17, 3, 9)]);
        assert_eq!(l.at(10).unwrap().present, [3].into());
        assert_eq!(l.at(19).unwrap().present, [11].into());
        assert_eq!(gone.len(), 1);
        assert_eq!((gone[0].start, gone[0].pages, gone[0].pgoff), (13, 4, 5));
        assert_eq!(gone[0].present, [6].into());
        assert!(l.at(13).is_none() && l.at(20).is_none());
        // Across both pieces and the gap: both cut.
        l.unmap(Range { at: 12, pages: 6 });
        assert_eq!(spans(&l), [(10, 2, 2), (18, 2, 10)]);
    }

    #[test]
    fn isolating_a_range_splits_around_it() {
        let mut l = Layout::default();
        l.insert(vma(0, 8, &[2, 5, 9]));
        assert!(
            l.holding(Range { at: 6, pages: 3 }).is_none(),
            "past the end"
        );
        let mid = l.isolate(Range { at: 2, pages: 3 }).unwrap();
        mid.prot = Prot::Read;
        assert_eq!(spans(&l), [(0, 2, 2), (2, 3, 4), (5, 3, 7)]);
        assert_eq!(l.at(3).unwrap().present, [5].into());
        assert_eq!(l.at(3).unwrap().prot, Prot::Read);
        assert_eq!(l.at(0).unwrap().prot, Prot::ReadWrite);
        assert_eq!(l.writers(0), 3, "each piece counts");
        assert!(l.is_exactly(Range { at: 2, pages: 3 }));
        assert!(!l.is_exactly(Range { at: 2, pages: 2 }));
    }
}
