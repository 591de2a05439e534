//! The page allocator's frees, seen through tracefs: the kmem:mm_page_free
//! event, on while a [`PageFrees`] lives, names every page (and the order
//! of its block) handed back to the allocator. Exact where a count of free
//! memory is not: a page whose reference was never dropped is simply never
//! among them.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Where tracefs is: its own mount, or debugfs's automount of it.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
/// The event, relative to tracefs.
const EVENT: &str = "events/kmem/mm_page_free/enable";
/// Per-CPU ring buffer: a 64 MiB map's frees (16384 events) and the rest
/// of a quiet guest's fit many times over.
const BUFFER_KB: &str = "16384";

/// mm_page_free recording into an emptied buffer while this lives.
pub struct PageFrees {
    root: PathBuf,
}

impl PageFrees {
    /// Empties the buffer and turns the event on.
    pub fn start() -> io::Result<PageFrees> {
        let root = TRACEFS
            .iter()
            .map(PathBuf::from)
            .find(|r| r.join(EVENT).exists())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("no tracefs with {EVENT} (at {TRACEFS:?})"),
                )
            })?;
        write(&root, "tracing_on", "0")?;
        write(&root, "buffer_size_kb", BUFFER_KB)?;
        write(&root, "trace", "")?;
        write(&root, EVENT, "1")?;
        write(&root, "tracing_on", "1")?;
        Ok(PageFrees { root })
    }

    /// Every page freed so far (each page of a freed block), or an error
    /// if the buffer lost events: then a page missing proves nothing.
    pub fn freed(&self) -> io::Result<HashSet<u64>> {
        let text = fs::read_to_string(self.root.join("trace"))?;
        if let Some(lost) = lost_events(&text) {
            return Err(io::Error::other(format!(
                "the trace buffer lost events ({lost}): raise BUFFER_KB"
            )));
        }
        let mut pages = HashSet::new();
        for (pfn, order) in text.lines().filter_map(page_free) {
            pages.extend(pfn..pfn + (1u64 << order));
        }
        Ok(pages)
    }
}

impl Drop for PageFrees {
    fn drop(&mut self) {
        let _ = write(&self.root, EVENT, "0");
        let _ = write(&self.root, "trace", "");
    }
}

fn write(root: &Path, file: &str, value: &str) -> io::Result<()> {
    fs::write(root.join(file), value)
        .map_err(|e| io::Error::new(e.kind(), format!("writing {value:?} to {file}: {e}")))
}

/// One `mm_page_free: page=... pfn=0x1234 order=0` line's pfn and order.
fn page_free(line: &str) -> Option<(u64, u32)> {
    let rest = line.split_once("mm_page_free: ")?.1;
    let field = |name: &str| {
        rest.split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .map(str::to_string)
    };
    let pfn = u64::from_str_radix(field("pfn=")?.trim_start_matches("0x"), 16).ok()?;
    let order = field("order=")?.parse().ok()?;
    Some((pfn, order))
}

/// The header's "entries-in-buffer/entries-written: A/B" when B > A: the
/// ring overwrote B - A events.
fn lost_events(text: &str) -> Option<u64> {
    let line = text
        .lines()
        .find(|l| l.contains("entries-in-buffer/entries-written:"))?;
    let counts = line.split(':').nth(1)?.split_whitespace().next()?;
    let (kept, written) = counts.split_once('/')?;
    let (kept, written): (u64, u64) = (kept.parse().ok()?, written.parse().ok()?);
    (written > kept).then_some(written - kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_frees_and_lost_events() {
        let text = "# tracer: nop\n\
            # entries-in-buffer/entries-written: 3/3   #P:4\n\
            kworker/0:1-12 [000] ..... 5.1: mm_page_free: page=000000001 pfn=0x10a2f order=0\n\
            kworker/0:1-12 [000] ..... 5.2: mm_page_free: page=000000002 pfn=0x2000 order=2\n\
            sh-1 [001] ..... 5.3: mm_page_free_batched: page=000000003 pfn=0x99\n";
        assert_eq!(lost_events(text), None);
        let frees: Vec<_> = text.lines().filter_map(page_free).collect();
        assert_eq!(frees, [(0x10a2f, 0), (0x2000, 2)]);
        let lossy = "# entries-in-buffer/entries-written: 100/140   #P:4\n";
        assert_eq!(lost_events(lossy), Some(40));
    }
}
