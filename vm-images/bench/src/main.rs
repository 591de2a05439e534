//! Reproduces the seed's timing table ("Time for one mmap()+munmap() of an
//! 8MiB mmap-able array map") in the guest, plus a size sweep and the
//! page-table cost of one mapping. Each measurement goes to the results file
//! as one `BPFLAB-BENCH <json>` line and to stdout.
//!
//! Exit status: 0 success, 1 failure (message on stderr), 2 usage error.

mod access;
mod fill;
mod grid;
mod stats;
mod sys;
mod threads;

use access::Access;
use guest_common::bench::Scenario;
use serde::Serialize;
use stats::{Summary, MEMORY_TOUCH_MAX, SWEEP_TOUCH_MAX, TABLE_SIZE};
use sys::{describe, ArrayMap, Mapping, Results};

const USAGE: &str =
    "usage: bench --kernel NAME --results PATH [--quick] [--grid-only] [--iterations N]";

#[derive(Debug, PartialEq, Eq)]
struct Options {
    kernel: String,
    results: String,
    quick: bool,
    /// Only the grid (`grid.rs`): what the targets and the gate read.
    grid_only: bool,
    iterations: usize,
}

/// The seed's table: its four rows, on an 8 MiB map.
const TABLE_SCENARIOS: [Scenario; 4] = [
    Scenario::NopopulateNoaccess,
    Scenario::NopopulateTouchall,
    Scenario::PopulateNoaccess,
    Scenario::PopulateTouchall,
];

/// Access patterns beyond the seed's table, each with its Rss.
const SPARSE_SCENARIOS: [Scenario; 5] = [
    Scenario::SparseOneIn64,
    Scenario::SparseRandom1pct,
    Scenario::Stride2,
    Scenario::ReverseSweep,
    Scenario::ReadAll,
];

/// One timing result; `kind` is "scenario" (8 MiB table) or "sweep".
#[derive(Serialize)]
struct TimingRecord {
    kind: &'static str,
    scenario: &'static str,
    size_bytes: u64,
    samples: usize,
    min_ns: u64,
    median_ns: u64,
    p90_ns: u64,
    /// The mmap() call alone, within the same cycles.
    mmap_min_ns: u64,
    mmap_median_ns: u64,
    /// Every timed cycle, for the host's confidence intervals.
    cycles_ns: Vec<u64>,
}

/// Rss of one mapping after a sparse pattern's writes; kind "sparse_rss".
#[derive(Serialize)]
struct SparseRecord {
    kind: &'static str,
    scenario: &'static str,
    size_bytes: u64,
    touched_pages: usize,
    rss_kb: u64,
    /// Minor faults the accesses took (one round, untimed).
    minor_faults: u64,
}

/// One pattern's cycles with the fill function probed; kind "fill".
#[derive(Serialize)]
struct FillRecord {
    kind: &'static str,
    scenario: &'static str,
    size_bytes: u64,
    function: &'static str,
    cycles: usize,
    /// Calls of `function` over all the cycles, and their summed time.
    fills: u64,
    fill_us: u64,
    minor_faults: u64,
    /// The probed cycles' median.
    median_ns: u64,
}

/// Page-table and RSS cost of one mapping; kind is always "memory".
#[derive(Serialize)]
struct MemoryRecord {
    kind: &'static str,
    size_bytes: u64,
    vmpte_kb_before: u64,
    vmpte_kb_after_mmap: u64,
    vmpte_kb_after_touch: Option<u64>,
    rss_kb_after_mmap: u64,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match parse_args(&args) {
        Ok(None) => {
            println!("{USAGE}");
            0
        }
        Ok(Some(opts)) => match run(&opts) {
            Ok(()) => 0,
            Err(msg) => {
                eprintln!("bench: error: {msg}");
                1
            }
        },
        Err(msg) => {
            eprintln!("bench: {msg}\n{USAGE}");
            2
        }
    };
    std::process::exit(code);
}

/// Parses the command line; Ok(None) means --help.
fn parse_args(args: &[String]) -> Result<Option<Options>, String> {
    let mut kernel = None;
    let mut results = None;
    let mut quick = false;
    let mut grid_only = false;
    let mut iterations = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().cloned().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--kernel" => kernel = Some(value()?),
            "--results" => results = Some(value()?),
            "--quick" => quick = true,
            "--grid-only" => grid_only = true,
            "--iterations" => {
                let v = value()?;
                match v.parse::<usize>() {
                    Ok(n) if n > 0 => iterations = Some(n),
                    _ => return Err(format!("--iterations wants a positive integer, not {v:?}")),
                }
            }
            "-h" | "--help" => return Ok(None),
            _ => return Err(format!("unknown argument {arg:?}")),
        }
    }
    Ok(Some(Options {
        kernel: kernel.ok_or("--kernel is required")?,
        results: results.ok_or("--results is required")?,
        quick,
        grid_only,
        iterations: iterations.unwrap_or(if quick { 10 } else { 30 }),
    }))
}

fn run(opts: &Options) -> Result<(), String> {
    let mut results = Results::open(&opts.results)?;
    let warmup = stats::warmup_rounds(opts.iterations);
    println!(
        "bench: kernel {}, {} iterations (+{warmup} warm-up){}",
        opts.kernel,
        opts.iterations,
        if opts.quick { ", quick" } else { "" }
    );
    let start = sys::now_ns();
    if !opts.grid_only {
        table(&mut results, opts.iterations)?;
        let largest = sweep(&mut results, opts)?;
        memory(&mut results, largest)?;
    }
    grid::run(&mut results, opts.iterations)?;
    println!(
        "bench: done in {:.1}s",
        (sys::now_ns() - start) as f64 / 1e9
    );
    Ok(())
}

/// The seed's table: the four scenarios on an 8 MiB map, one block each.
fn table(results: &mut Results, iterations: usize) -> Result<(), String> {
    let map = create_map(TABLE_SIZE)?;
    let scenarios = TABLE_SCENARIOS;
    let samples = stats::sample_blocks(
        scenarios.len(),
        stats::warmup_rounds(iterations),
        iterations,
        |i| time_cycle(&map, scenarios[i], &[]),
    )?;
    println!("\nmmap()+munmap() of an 8 MiB BPF_F_MMAPABLE array map:");
    print_header();
    for (scenario, s) in scenarios.iter().zip(&samples) {
        emit_timing(results, "scenario", *scenario, TABLE_SIZE, s)?;
    }
    sparse(results, &map, iterations)?;
    threaded(results, &map, iterations)?;
    fill_split(results, &map, iterations)
}

/// The patterns whose time `fill_split` divides.
const FILL_SCENARIOS: [Scenario; 3] = [
    Scenario::NopopulateTouchall,
    Scenario::PopulateNoaccess,
    Scenario::ReadAll,
];

/// Each pattern's cycles again with the fill function probed (`fill`):
/// how much of a cycle the fills take, and how many there are.
fn fill_split(results: &mut Results, map: &ArrayMap, iterations: usize) -> Result<(), String> {
    let function = fill::fill_function()?;
    let pages = (map.size as usize) / sys::PAGE;
    let cycles = (iterations / 3).max(3);
    println!(
        "
fills of {function} (kprobes on; {cycles} cycles each):"
    );
    for scenario in FILL_SCENARIOS {
        let touched = scenario.sparse_pages(pages);
        time_cycle(map, scenario, &touched)?;
        let probe = fill::FillProbe::install(function)?;
        let faults_before = sys::minor_faults();
        let mut whole = Vec::with_capacity(cycles);
        for _ in 0..cycles {
            whole.push(time_cycle(map, scenario, &touched)?.0);
        }
        let minor_faults = sys::minor_faults() - faults_before;
        let fills = probe.finish()?;
        let median_ns = stats::summarize(&whole).ok_or("no samples")?.median_ns;
        println!(
            "{:>8}  {:<20} cycle {} (probed), {} fills in {}us per cycle, {} minor faults",
            "",
            scenario.name(),
            stats::fmt_us(median_ns),
            fills.count / cycles as u64,
            fills.total_us / cycles as u64,
            minor_faults / cycles as u64
        );
        let record = FillRecord {
            kind: "fill",
            scenario: scenario.name(),
            size_bytes: map.size,
            function,
            cycles,
            fills: fills.count,
            fill_us: fills.total_us,
            minor_faults,
            median_ns,
        };
        results.emit(&to_json(&record)?)?;
    }
    Ok(())
}

/// The seed's table and the sparse patterns again with 2 and 4 threads,
/// on own mappings and on a shared one (`threads`).
fn threaded(results: &mut Results, map: &ArrayMap, iterations: usize) -> Result<(), String> {
    for (kind, mode, n) in threads::KINDS {
        println!("\n{kind}: {n} threads, {mode:?} mapping(s):");
        print_header();
        for scenario in threads::SCENARIOS {
            let block = threads::block(map, scenario, (mode, n), threads::iterations(iterations))
                .map_err(|e| format!("{}: {e}", threads::label(kind, scenario)))?;
            emit_timing(results, kind, scenario, map.size, &block.samples)?;
        }
    }
    Ok(())
}

/// The sparse patterns on the table's map: the cycle's time as for the
/// table, then the mapping's Rss after one more, untimed, round of writes.
fn sparse(results: &mut Results, map: &ArrayMap, iterations: usize) -> Result<(), String> {
    let pages = (map.size as usize) / sys::PAGE;
    let patterns: Vec<Vec<usize>> = SPARSE_SCENARIOS
        .iter()
        .map(|s| s.sparse_pages(pages))
        .collect();
    let samples = stats::sample_blocks(
        patterns.len(),
        stats::warmup_rounds(iterations),
        iterations,
        |i| time_cycle(map, SPARSE_SCENARIOS[i], &patterns[i]),
    )?;
    println!("\naccess patterns (no MAP_POPULATE), and Rss afterwards:");
    print_header();
    for ((scenario, s), touched) in SPARSE_SCENARIOS.iter().zip(&samples).zip(&patterns) {
        emit_timing(results, "sparse", *scenario, map.size, s)?;
        let mapping = Mapping::new(map, false).map_err(|e| describe("mmap (sparse)", &e))?;
        let before = sys::minor_faults();
        access(&mapping, *scenario, touched);
        let minor_faults = sys::minor_faults() - before;
        let rss_kb = sys::rss_kb(&mapping)?;
        mapping
            .unmap()
            .map_err(|e| describe("munmap (sparse)", &e))?;
        println!(
            "{:>8}  {:<20} {} pages accessed, Rss {rss_kb} kB, {minor_faults} minor faults",
            "",
            scenario.name(),
            touched.len()
        );
        let record = SparseRecord {
            kind: "sparse_rss",
            scenario: scenario.name(),
            size_bytes: map.size,
            touched_pages: touched.len(),
            rss_kb,
            minor_faults,
        };
        results.emit(&to_json(&record)?)?;
    }
    Ok(())
}

/// Timing against map size for the two no-MAP_POPULATE scenarios. Sizes the
/// kernel cannot allocate (ENOMEM) are skipped and reported on stdout.
/// Returns the largest map that worked, for `memory()`. Creating a big map
/// (vmalloc + zeroing) is much slower than mapping it, so it is reused rather
/// than created again; each map is dropped before the next size is tried,
/// so two big maps never compete for guest memory.
fn sweep(results: &mut Results, opts: &Options) -> Result<ArrayMap, String> {
    println!("\nsize sweep (no MAP_POPULATE):");
    print_header();
    let mut largest: Option<u64> = None;
    let mut kept: Option<ArrayMap> = None;
    let mut creation = Vec::new();
    for size in stats::sweep_sizes(opts.quick) {
        // Freeing a map is deferred to a kernel worker; its vfree of up to
        // 256 MiB must not run on another vCPU while this size is timed.
        if kept.take().is_some() {
            settle_memory();
        }
        let start = sys::now_ns();
        let map = match ArrayMap::create(size) {
            Ok(map) => map,
            Err(e) if e.raw_os_error() == Some(libc::ENOMEM) => {
                println!(
                    "{:>8}  skipped: the kernel refused the map (ENOMEM)",
                    stats::fmt_size(size)
                );
                continue;
            }
            Err(e) => return Err(create_error(size, &e)),
        };
        let elapsed_ms = (sys::now_ns() - start) as f64 / 1e6;
        creation.push(format!("{} {elapsed_ms:.1}ms", stats::fmt_size(size)));
        let mut scenarios = vec![Scenario::NopopulateNoaccess];
        if size <= SWEEP_TOUCH_MAX {
            scenarios.push(Scenario::NopopulateTouchall);
        }
        let iterations = stats::sweep_iterations(opts.iterations, size);
        let samples = stats::sample_blocks(
            scenarios.len(),
            stats::warmup_rounds(iterations),
            iterations,
            |i| time_cycle(&map, scenarios[i], &[]),
        )?;
        for (scenario, s) in scenarios.iter().zip(&samples) {
            emit_timing(results, "sweep", *scenario, size, s)?;
        }
        largest = Some(size);
        kept = Some(map);
    }
    println!(
        "map creation (not part of the timings): {}",
        creation.join(", ")
    );
    match (kept, largest) {
        (Some(map), _) => Ok(map),
        // The last sizes were refused: recreate the largest that worked.
        (None, Some(size)) => create_map(size),
        (None, None) => Err("no sweep size could be allocated".to_string()),
    }
}

/// VmPTE before/after mmap (and after touching every page, up to 256 MiB) and
/// the mapping's Rss right after mmap: what an untouched mapping costs.
fn memory(results: &mut Results, map: ArrayMap) -> Result<(), String> {
    let size = map.size;
    let before = sys::vmpte_kb()?;
    let mapping = Mapping::new(&map, false).map_err(|e| describe("mmap", &e))?;
    let after_mmap = sys::vmpte_kb()?;
    let rss = sys::rss_kb(&mapping)?;
    let after_touch = if size <= MEMORY_TOUCH_MAX {
        mapping.touch_all();
        Some(sys::vmpte_kb()?)
    } else {
        None
    };
    mapping.unmap().map_err(|e| describe("munmap", &e))?;

    let touch = after_touch.map_or("not measured".to_string(), |kb| format!("{kb} kB"));
    println!(
        "\nmemory of one {} mapping: VmPTE {before} kB before, {after_mmap} kB after mmap, \
         {touch} after touching all pages; Rss after mmap {rss} kB",
        stats::fmt_size(size)
    );
    let record = MemoryRecord {
        kind: "memory",
        size_bytes: size,
        vmpte_kb_before: before,
        vmpte_kb_after_mmap: after_mmap,
        vmpte_kb_after_touch: after_touch,
        rss_kb_after_mmap: rss,
    };
    results.emit(&to_json(&record)?)
}

/// Waits (at most 5 s) until MemFree stops moving, i.e. deferred frees
/// have run.
fn settle_memory() {
    let mem_free = || guest_common::proc::meminfo_kb("MemFree").ok();
    let deadline = sys::now_ns() + 5_000_000_000;
    let mut last = mem_free();
    while sys::now_ns() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let now = mem_free();
        if stats::settled(last, now) {
            return;
        }
        last = now;
    }
}

fn create_map(size: u64) -> Result<ArrayMap, String> {
    ArrayMap::create(size).map_err(|e| create_error(size, &e))
}

fn create_error(size: u64, e: &std::io::Error) -> String {
    let what = format!(
        "bpf(BPF_MAP_CREATE) of a {} BPF_F_MMAPABLE array",
        stats::fmt_size(size)
    );
    describe(&what, e)
}

/// One timed mmap() [+ touch every page] + munmap(), in nanoseconds.
/// One mmap()+munmap(): (whole cycle, mmap() alone) in nanoseconds. The
/// patch makes mmap() O(1); munmap() still walks whatever page tables
/// cover the range, so the split shows where time goes.
fn time_cycle(map: &ArrayMap, scenario: Scenario, sparse: &[usize]) -> Result<(u64, u64), String> {
    let start = sys::now_ns();
    let mapping = Mapping::new(map, scenario.populate())
        .map_err(|e| describe(&format!("mmap ({})", scenario.name()), &e))?;
    let mapped = sys::now_ns();
    apply_pattern(&mapping, scenario, sparse);
    mapping
        .unmap()
        .map_err(|e| describe(&format!("munmap ({})", scenario.name()), &e))?;
    Ok((sys::now_ns() - start, mapped - start))
}

/// What `scenario` does to a fresh mapping: every page written, or
/// `pages` read or written (`sparse_pages`).
fn apply_pattern(mapping: &Mapping, scenario: Scenario, pages: &[usize]) {
    if scenario.touch() {
        mapping.touch_all();
    }
    access(mapping, scenario, pages);
}

/// Reads or writes `pages` of `mapping`, as `scenario` does.
fn access(mapping: &Mapping, scenario: Scenario, pages: &[usize]) {
    if scenario.reads() {
        std::hint::black_box(mapping.read_pages(pages));
    } else {
        mapping.touch_pages(pages);
    }
}

fn print_header() {
    println!(
        "{:>8}  {:<20} {:>7} {:>11} {:>11} {:>11}",
        "size", "scenario", "samples", "min", "median", "p90"
    );
}

/// Summarizes, prints a table row and sends the JSON record.
fn emit_timing(
    results: &mut Results,
    kind: &'static str,
    scenario: Scenario,
    size: u64,
    samples: &[(u64, u64)],
) -> Result<(), String> {
    let whole: Vec<u64> = samples.iter().map(|p| p.0).collect();
    let mmap_only: Vec<u64> = samples.iter().map(|p| p.1).collect();
    let s: Summary = stats::summarize(&whole).ok_or("no samples")?;
    let m: Summary = stats::summarize(&mmap_only).ok_or("no samples")?;
    println!(
        "{:>8}  {:<20} {:>7} {:>11} {:>11} {:>11}",
        stats::fmt_size(size),
        scenario.name(),
        s.samples,
        stats::fmt_us(s.min_ns),
        stats::fmt_us(s.median_ns),
        stats::fmt_us(s.p90_ns)
    );
    let record = timing_record(kind, scenario, size, (&s, &m), whole);
    results.emit(&to_json(&record)?)
}

fn timing_record(
    kind: &'static str,
    scenario: Scenario,
    size: u64,
    (s, mmap_only): (&Summary, &Summary),
    cycles_ns: Vec<u64>,
) -> TimingRecord {
    TimingRecord {
        kind,
        scenario: scenario.name(),
        size_bytes: size,
        samples: s.samples,
        min_ns: s.min_ns,
        median_ns: s.median_ns,
        p90_ns: s.p90_ns,
        mmap_min_ns: mmap_only.min_ns,
        mmap_median_ns: mmap_only.median_ns,
        cycles_ns,
    }
}

fn to_json(value: &impl Serialize) -> Result<String, String> {
    serde_json::to_string(value).map_err(|e| format!("serialize: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn cli() {
        let o = parse_args(&args("--kernel eager --results /dev/ttyS1"))
            .unwrap()
            .unwrap();
        assert_eq!(
            (o.kernel.as_str(), o.results.as_str()),
            ("eager", "/dev/ttyS1")
        );
        assert_eq!((o.quick, o.grid_only, o.iterations), (false, false, 30));
        let o = parse_args(&args("--kernel k --results r --grid-only"))
            .unwrap()
            .unwrap();
        assert!(o.grid_only);
        let o = parse_args(&args("--quick --results r --kernel k"))
            .unwrap()
            .unwrap();
        assert_eq!((o.quick, o.iterations), (true, 10));
        let o = parse_args(&args("--kernel k --results r --quick --iterations 4"))
            .unwrap()
            .unwrap();
        assert_eq!(o.iterations, 4);
        assert_eq!(parse_args(&args("--help")).unwrap(), None);
        for bad in [
            "--kernel k",
            "--results r",
            "--kernel k --results r --iterations 0",
            "--kernel k --results r --iterations x",
            "--kernel k --results r --iterations",
            "--kernel k --results r --bogus",
        ] {
            assert!(parse_args(&args(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn scenario_flags() {
        let flags: Vec<_> = TABLE_SCENARIOS
            .iter()
            .map(|s| (s.name(), s.populate(), s.touch()))
            .collect();
        assert_eq!(
            flags,
            [
                ("nopopulate_noaccess", false, false),
                ("nopopulate_touchall", false, true),
                ("populate_noaccess", true, false),
                ("populate_touchall", true, true),
            ]
        );
    }

    #[test]
    fn json_schema() {
        let s = stats::summarize(&[1100, 1200, 1500]).unwrap();
        let m = stats::summarize(&[400, 500, 600]).unwrap();
        let r = timing_record(
            "scenario",
            Scenario::NopopulateNoaccess,
            TABLE_SIZE,
            (&s, &m),
            vec![1100, 1200, 1500],
        );
        assert_eq!(
            to_json(&r).unwrap(),
            r#"{"kind":"scenario","scenario":"nopopulate_noaccess","size_bytes":8388608,"samples":3,"min_ns":1100,"median_ns":1200,"p90_ns":1500,"mmap_min_ns":400,"mmap_median_ns":500,"cycles_ns":[1100,1200,1500]}"#
        );
        let m = MemoryRecord {
            kind: "memory",
            size_bytes: 1 << 30,
            vmpte_kb_before: 48,
            vmpte_kb_after_mmap: 2100,
            vmpte_kb_after_touch: None,
            rss_kb_after_mmap: 1048576,
        };
        assert_eq!(
            to_json(&m).unwrap(),
            r#"{"kind":"memory","size_bytes":1073741824,"vmpte_kb_before":48,"vmpte_kb_after_mmap":2100,"vmpte_kb_after_touch":null,"rss_kb_after_mmap":1048576}"#
        );
    }
}
