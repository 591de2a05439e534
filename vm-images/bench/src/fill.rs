//! Where a cycle's time goes: kprobe events on the function that fills
//! the mapping time every fill, so a cycle splits into the fills and the
//! rest (fault entry and exit, the accesses, munmap()). On the series'
//! kernels that function is `array_map_mmap_fault()`, called once per
//! fault; on base it is `remap_vmalloc_range()`, called once by mmap().
//! The probes cost time of their own, so these cycles are not the
//! table's: only the split is.

use std::fs;
use std::io::Write as _;

/// The kprobe event group; its two events are `fill_in` and `fill_out`.
const GROUP: &str = "bpflab";
const TRACING: &str = "/sys/kernel/tracing";
/// Per-CPU trace buffer: 2 events of about 40 bytes per fill, 2048 fills
/// per cycle on a one-page-per-fault kernel, a few dozen cycles.
const BUFFER_KB: u32 = 16384;

/// The fill function of the running kernel, from /proc/kallsyms.
pub fn fill_function() -> Result<&'static str, String> {
    let syms =
        fs::read_to_string("/proc/kallsyms").map_err(|e| format!("read /proc/kallsyms: {e}"))?;
    pick_function(&syms).ok_or_else(|| {
        "neither array_map_mmap_fault nor remap_vmalloc_range is in /proc/kallsyms \
         (CONFIG_KALLSYMS?)"
            .to_string()
    })
}

fn pick_function(kallsyms: &str) -> Option<&'static str> {
    let has = |name: &str| {
        kallsyms
            .lines()
            .any(|l| l.split_whitespace().nth(2) == Some(name))
    };
    ["array_map_mmap_fault", "remap_vmalloc_range"]
        .into_iter()
        .find(|f| has(f))
}

/// Kprobe events on `function`'s entry and return, recording while alive.
pub struct FillProbe {
    dir: String,
}

impl FillProbe {
    pub fn install(function: &str) -> Result<FillProbe, String> {
        let dir = tracing_dir()?;
        let control = |file: &str, text: &str| write_control(&format!("{dir}/{file}"), text);
        control("tracing_on", "0")?;
        control("trace_clock", "mono")?;
        control("buffer_size_kb", &BUFFER_KB.to_string())?;
        let events = format!("p:{GROUP}/fill_in {function}\nr:{GROUP}/fill_out {function}\n");
        control("kprobe_events", &events).map_err(|e| {
            format!("{e} (kprobe events on {function}: CONFIG_KPROBE_EVENTS, or the symbol was renamed)")
        })?;
        control(&format!("events/{GROUP}/enable"), "1")?;
        // Opening `trace` for writing with O_TRUNC clears the buffer.
        fs::write(format!("{dir}/trace"), "").map_err(|e| format!("clear {dir}/trace: {e}"))?;
        control("tracing_on", "1")?;
        Ok(FillProbe { dir })
    }

    /// Stops recording and returns the fills recorded since `install`.
    pub fn finish(self) -> Result<Fills, String> {
        let control = |file: &str, text: &str| write_control(&format!("{}/{file}", self.dir), text);
        control("tracing_on", "0")?;
        let lost = lost_events(&self.dir)?;
        if lost > 0 {
            return Err(format!(
                "the trace buffer lost {lost} events: raise fill::BUFFER_KB"
            ));
        }
        let text = fs::read_to_string(format!("{}/trace", self.dir))
            .map_err(|e| format!("read {}/trace: {e}", self.dir))?;
        let fills = parse_fills(&text)?;
        control(&format!("events/{GROUP}/enable"), "0")?;
        control("kprobe_events", "")?;
        Ok(fills)
    }
}

/// The fills of a trace: how many, and their summed time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fills {
    pub count: u64,
    pub total_us: u64,
}

/// Pairs each `fill_in` with the next `fill_out` (the benchmark faults
/// from one thread, so fills never nest or overlap).
fn parse_fills(trace: &str) -> Result<Fills, String> {
    let mut open: Option<u64> = None;
    let mut fills = Fills::default();
    for line in trace.lines().filter(|l| !l.starts_with('#')) {
        let (event, at) = if let Some(i) = line.find(": fill_in:") {
            ("in", &line[..i])
        } else if let Some(i) = line.find(": fill_out:") {
            ("out", &line[..i])
        } else {
            continue;
        };
        let us = timestamp_us(at).ok_or_else(|| format!("no timestamp in trace line {line:?}"))?;
        match (event, open.take()) {
            ("in", None) => open = Some(us),
            ("out", Some(start)) => {
                fills.count += 1;
                fills.total_us += us.saturating_sub(start);
            }
            _ => return Err(format!("fill events out of order at {line:?}")),
        }
    }
    if open.is_some() {
        return Err("the trace ends inside a fill".into());
    }
    Ok(fills)
}

/// The `SECS.MICROS` timestamp that ends the text before an event name.
fn timestamp_us(before_event: &str) -> Option<u64> {
    let (secs, micros) = before_event.split_whitespace().last()?.split_once('.')?;
    if micros.len() != 6 {
        return None;
    }
    Some(secs.parse::<u64>().ok()? * 1_000_000 + micros.parse::<u64>().ok()?)
}

/// tracefs, mounted at /sys/kernel/tracing if nothing has mounted it.
fn tracing_dir() -> Result<String, String> {
    let probe = format!("{TRACING}/kprobe_events");
    if fs::metadata(&probe).is_err() {
        let c = |s: &str| std::ffi::CString::new(s).expect("no NUL");
        let (src, at) = (c("tracefs"), c(TRACING));
        // SAFETY: valid C strings; a null data pointer is allowed.
        let rc =
            unsafe { libc::mount(src.as_ptr(), at.as_ptr(), src.as_ptr(), 0, std::ptr::null()) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            return Err(format!("mount tracefs at {TRACING}: {e} (CONFIG_TRACING?)"));
        }
    }
    Ok(TRACING.to_string())
}

fn write_control(path: &str, text: &str) -> Result<(), String> {
    // One write(): tracefs control files act on each write.
    fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|e| format!("write {text:?} to {path}: {e}"))
}

/// Events the ring buffers overwrote or dropped, summed over CPUs.
fn lost_events(dir: &str) -> Result<u64, String> {
    let cpus =
        fs::read_dir(format!("{dir}/per_cpu")).map_err(|e| format!("read {dir}/per_cpu: {e}"))?;
    let mut lost = 0;
    for cpu in cpus.flatten() {
        let stats = fs::read_to_string(cpu.path().join("stats")).unwrap_or_default();
        lost += stats
            .lines()
            .filter(|l| l.starts_with("overrun:") || l.starts_with("dropped events:"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum::<u64>();
    }
    Ok(lost)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "\
# tracer: nop
#
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
           bench-85      [001] .....    12.345678: fill_in: (array_map_mmap_fault+0x0/0x130)
           bench-85      [001] .....    12.345690: fill_out: (bpf_map_mmap_fault+0x2a/0x50 <- array_map_mmap_fault)
           bench-85      [001] .....    13.000001: fill_in: (array_map_mmap_fault+0x0/0x130)
           bench-85      [001] .....    13.000031: fill_out: (bpf_map_mmap_fault+0x2a/0x50 <- array_map_mmap_fault)
";

    #[test]
    fn pairs_fills_and_sums_their_time() {
        assert_eq!(
            parse_fills(TRACE),
            Ok(Fills {
                count: 2,
                total_us: 12 + 30
            })
        );
    }

    #[test]
    fn unpaired_or_unstamped_events_are_errors() {
        let first_in = TRACE.lines().nth(3).unwrap();
        let first_out = TRACE.lines().nth(4).unwrap();
        assert!(parse_fills(&format!("{first_out}\n")).is_err());
        assert!(parse_fills(&format!("{first_in}\n{first_in}\n")).is_err());
        assert!(parse_fills(&format!("{first_in}\n")).is_err());
        assert!(parse_fills("bench-1 [000] ..... 12.34: fill_in: (x)\n").is_err());
    }

    #[test]
    fn picks_the_series_fill_over_the_eager_one() {
        let base = "ffffffff81000000 T remap_vmalloc_range\n";
        let patched =
            "ffffffff81200000 t array_map_mmap_fault\nffffffff81000000 T remap_vmalloc_range\n";
        assert_eq!(pick_function(base), Some("remap_vmalloc_range"));
        assert_eq!(pick_function(patched), Some("array_map_mmap_fault"));
        assert_eq!(
            pick_function("ffffffff81200000 t array_map_mmap_fault.isra.0\n"),
            None
        );
    }
}
