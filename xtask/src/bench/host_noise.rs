//! How steady the host's memory is, measured on the host with no VM
//! running: a pointer chase through a buffer larger than the caches,
//! timed in chunks, and the swing between its slow and fast windows.
//! A TCG guest's page-table work reaches host memory the same way, so a
//! host whose memory swings 2x in a second gives boots and rows that swing
//! as much, whatever the harness does inside the guest.

use std::time::{Duration, Instant};

/// Larger than any host cache here, smaller than a cheap allocation.
const BUFFER_WORDS: usize = 16 << 20;
/// One step of the chase per 4 KiB page, so every step may miss the TLB.
const PAGE_WORDS: usize = 1024;
/// Dependent reads per timed chunk: about 150 µs on these machines.
const READS_PER_CHUNK: usize = 2_000;
/// Chunks per window: 90-375 ms a window in one bench run here (slow
/// spells make longer ones), about a bench row's block of cycles, and
/// shorter than the spells in which bench rows were seen to run slow.
const CHUNKS_PER_WINDOW: usize = 1_000;

/// One probe's result.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Noise {
    /// The 90th over the 10th percentile of the windows' median chunk
    /// times: how much slower the slow spells run, ignoring the one
    /// extreme window a scheduler blip can make.
    pub swing: f64,
    /// The windows measured.
    pub windows: usize,
}

/// The chunk times of `for_how_long` of a pointer chase through one word
/// of each page in a random cycle. Each read's address comes from the one
/// before, so the time is the memory's latency, not the CPU's, in an
/// unoptimized build too.
fn chunk_times(for_how_long: Duration) -> Vec<f64> {
    let pages = BUFFER_WORDS / PAGE_WORDS;
    let mut next = vec![0u32; BUFFER_WORDS];
    // Sattolo's shuffle: one cycle through every page.
    let mut order: Vec<u32> = (0..pages as u32).collect();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in (1..pages).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        order.swap(i, (state % i as u64) as usize);
    }
    for (i, &page) in order.iter().enumerate() {
        next[page as usize * PAGE_WORDS] = order[(i + 1) % pages];
    }
    let mut at = order[0] as usize;
    let mut times = vec![];
    let end = Instant::now() + for_how_long;
    while Instant::now() < end {
        let t = Instant::now();
        for _ in 0..READS_PER_CHUNK {
            at = next[at * PAGE_WORDS] as usize;
        }
        times.push(t.elapsed().as_secs_f64());
    }
    std::hint::black_box(at);
    times
}

/// The swing of `times` in windows of `per_window` chunks; None with fewer
/// than two whole windows.
pub fn swing(times: &[f64], per_window: usize) -> Option<Noise> {
    let mut medians: Vec<f64> = times
        .chunks_exact(per_window.max(1))
        .map(|w| {
            let mut w = w.to_vec();
            w.sort_by(f64::total_cmp);
            w[w.len() / 2]
        })
        .collect();
    if medians.len() < 2 {
        return None;
    }
    medians.sort_by(f64::total_cmp);
    let at = |q: f64| medians[(q * (medians.len() - 1) as f64).round() as usize];
    Some(Noise {
        swing: at(0.9) / at(0.1).max(f64::MIN_POSITIVE),
        windows: medians.len(),
    })
}

/// Probes the host for `for_how_long`; None when it was too short for two
/// windows.
pub fn probe(for_how_long: Duration) -> Option<Noise> {
    swing(&chunk_times(for_how_long), CHUNKS_PER_WINDOW)
}

/// The report's line for the probes of one run, one per round of boots.
pub fn summary(probes: &[Option<Noise>]) -> String {
    let swings: Vec<f64> = probes.iter().flatten().map(|n| n.swing).collect();
    if swings.is_empty() {
        return String::new();
    }
    let lo = swings.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = swings.iter().copied().fold(0.0, f64::max);
    format!(
        "Host memory noise (a pointer chase over {} MiB on the host, no VM, after each round of boots): \
         its slow spells ran {lo:.1}x-{hi:.1}x its fast ones (90th over 10th percentile of windows of {CHUNKS_PER_WINDOW} chunks) over {} round(s); \
         a guest's rows and boots swing with it, and a ratio's interval cannot be narrower than it allows.\n",
        (BUFFER_WORDS * 4) >> 20,
        swings.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_chunks_swing_by_nothing_and_a_slow_spell_by_its_factor() {
        let steady = vec![1.0; 400];
        assert_eq!(
            swing(&steady, 100),
            Some(Noise {
                swing: 1.0,
                windows: 4
            })
        );
        let mut spell = vec![1.0; 300];
        spell.extend(vec![2.5; 100]);
        assert_eq!(swing(&spell, 100).unwrap().swing, 2.5);
        // One slow chunk in a window does not move its median.
        let mut blip = vec![1.0; 400];
        blip[150] = 40.0;
        assert_eq!(swing(&blip, 100).unwrap().swing, 1.0);
        assert_eq!(swing(&steady[..150], 100), None, "one whole window");
    }

    #[test]
    fn the_probe_times_real_reads() {
        // Windows sized to what an unoptimized test build manages.
        let times = chunk_times(Duration::from_millis(300));
        assert!(times.len() >= 4, "{} chunks in 300 ms", times.len());
        assert!(times.iter().all(|&t| t > 0.0), "a chunk took no time");
        let noise = swing(&times, times.len() / 4).unwrap();
        assert!(noise.windows >= 4 && noise.swing >= 1.0, "{noise:?}");
        // A longer probe on request, as docs/MEASUREMENTS.md's 30 s figure:
        // BPFLAB_HOST_NOISE_SECS=30 cargo test -p xtask the_probe -- --nocapture
        if let Ok(secs) = std::env::var("BPFLAB_HOST_NOISE_SECS") {
            let long = probe(Duration::from_secs(secs.parse().unwrap())).unwrap();
            eprintln!("host noise over {secs} s: {long:?}");
        }
    }

    #[test]
    fn the_summary_gives_the_range_of_rounds_or_nothing() {
        let n = |swing| Some(Noise { swing, windows: 5 });
        let line = summary(&[n(1.3), None, n(2.6)]);
        assert!(line.contains("ran 1.3x-2.6x its fast ones (90th over 10th percentile of windows of 1000 chunks) over 2 round(s)"), "{line}");
        assert_eq!(summary(&[None]), "");
    }
}
