//! A BPF array map as the model holds it: its shape, its flags and
//! states, and the bytes of its value area (what a mapping shows, page by
//! page, and BPF_MAP_LOOKUP_ELEM shows, element by element), and the
//! record each of its files keeps of the last fault's window.

use selftests::runner::model::Record;

use super::PAGE;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapModel {
    pub value_size: usize,
    pub entries: usize,
    pub mmapable: bool,
    pub rdonly_prog: bool,
    pub frozen: bool,
    /// Whether the fuzzer holds an fd of it (mappings keep it alive
    /// without one).
    pub fd_open: bool,
    /// A ring buffer (no elements; its mappings are eager on every
    /// kernel) rather than an array.
    pub ringbuf: bool,
    /// The value area, page-aligned: what mmap() exposes.
    pub bytes: Vec<u8>,
    /// The record of the last fault's window (`file->f_ra`, patch 0004)
    /// of each file opened on the map, oldest first: BPF_MAP_CREATE's,
    /// then one per `reopen` (BPF_MAP_GET_FD_BY_ID makes a new file). The
    /// last is the fd's; a mapping faults through the file it was made
    /// from (`VmaModel::file`), as do its pieces, its moves and a forked
    /// child's copies of it. None: no window yet (a fresh file's f_ra is
    /// zero), and always on the kernels without the growing window and
    /// for a ring buffer.
    pub records: Vec<Option<Record>>,
}

impl MapModel {
    pub fn new(value_size: usize, entries: usize, mmapable: bool, rdonly_prog: bool) -> MapModel {
        MapModel {
            value_size,
            entries,
            mmapable,
            rdonly_prog,
            frozen: false,
            fd_open: true,
            ringbuf: false,
            bytes: vec![0; data_pages(value_size, entries) * PAGE],
            records: vec![None],
        }
    }

    /// A ring buffer of `data` pages: what mmap() covers is the consumer
    /// page, the producer page and the data pages twice (pgoff 2 and
    /// 2 + data map the same pages), all zero while nothing produces.
    pub fn ringbuf(data: usize) -> MapModel {
        MapModel {
            value_size: 0,
            entries: 0,
            mmapable: true,
            rdonly_prog: false,
            frozen: false,
            fd_open: true,
            ringbuf: true,
            bytes: vec![0; (2 + 2 * data) * PAGE],
            records: vec![None],
        }
    }

    /// The file of the fd the fuzzer holds (or held last): what a new
    /// mapping is made from.
    pub fn file(&self) -> usize {
        self.records.len() - 1
    }

    /// A new fd, on a new file with a fresh record.
    pub fn reopen(&mut self) {
        self.fd_open = true;
        self.records.push(None);
    }

    /// Pages a mapping of the map can cover.
    pub fn pages(&self) -> usize {
        self.bytes.len() / PAGE
    }

    pub fn elem_size(&self) -> usize {
        elem_size(self.value_size)
    }

    /// The value of element `index` (None past the last).
    pub fn value(&self, index: usize) -> Option<&[u8]> {
        (index < self.entries).then(|| {
            let at = index * self.elem_size();
            &self.bytes[at..at + self.value_size]
        })
    }

    /// BPF_MAP_UPDATE_ELEM: the value's bytes, not the padding after it.
    pub fn update(&mut self, index: usize, fill: u8) {
        let at = index * self.elem_size();
        let size = self.value_size;
        self.bytes[at..at + size].fill(fill);
    }

    pub fn read_u64(&self, offset: usize) -> u64 {
        u64::from_ne_bytes(self.bytes[offset..offset + 8].try_into().expect("8 bytes"))
    }

    pub fn write_u64(&mut self, offset: usize, value: u64) {
        self.bytes[offset..offset + 8].copy_from_slice(&value.to_ne_bytes());
    }

    pub fn page(&self, page: usize) -> &[u8] {
        &self.bytes[page * PAGE..(page + 1) * PAGE]
    }
}

/// The kernel rounds each element up to 8 bytes.
pub fn elem_size(value_size: usize) -> usize {
    value_size.div_ceil(8) * 8
}

/// `PAGE_ALIGN(entries * elem_size)` in pages: what array_map_mmap()
/// lets a mapping cover.
pub fn data_pages(value_size: usize, entries: usize) -> usize {
    (entries * elem_size(value_size)).div_ceil(PAGE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_to_8_bytes_and_the_area_to_pages() {
        assert_eq!(elem_size(4000), 4000);
        assert_eq!(elem_size(4001), 4008);
        assert_eq!(data_pages(4001, 3), 3, "12024 bytes: 3 pages");
        assert_eq!(data_pages(8, 512), 1);
        assert_eq!(data_pages(8, 513), 2);
        let mut m = MapModel::new(12, 3, true, false);
        assert_eq!((m.pages(), m.elem_size()), (1, 16));
        m.update(1, 0xab);
        assert_eq!(m.value(1).unwrap(), &[0xab; 12]);
        assert_eq!(&m.bytes[28..32], &[0; 4], "padding is not the value's");
        assert_eq!(m.value(3), None);
        m.write_u64(40, 7);
        assert_eq!(m.read_u64(40), 7);
    }
}
