//! After a test: wait until every BPF map it created is gone before its
//! kernel messages are judged. The last reference to a map may be dropped
//! after the test process is reaped (an exiting helper, a deferred fput),
//! and the map's memory is then freed by a worker: a splat from that free
//! must land on the test that caused it, not on the next one.

use std::collections::BTreeSet;
use std::io;
use std::time::{Duration, Instant};

/// How long maps may outlive their test, before scaling for slow kernels.
pub const MAP_GONE_TIMEOUT: Duration = Duration::from_secs(10);
/// After the ids are gone, the worker that frees the map still has to run.
pub const FREE_GRACE: Duration = Duration::from_millis(20);
const POLL: Duration = Duration::from_millis(5);

/// The map ids alive now.
pub fn live_maps() -> io::Result<BTreeSet<u32>> {
    Ok(crate::sys::bpf::map_ids()?.into_iter().collect())
}

/// Polls `live` until no map outside `before` remains. Returns how long
/// that took, or a failure message naming the maps left at `timeout`.
pub fn await_maps_gone(
    before: &BTreeSet<u32>,
    mut live: impl FnMut() -> io::Result<BTreeSet<u32>>,
    timeout: Duration,
) -> Result<Duration, String> {
    let start = Instant::now();
    loop {
        let now = live().map_err(|e| format!("listing BPF maps (BPF_MAP_GET_NEXT_ID): {e}"))?;
        let left: Vec<u32> = now.difference(before).copied().collect();
        if left.is_empty() {
            return Ok(start.elapsed());
        }
        if start.elapsed() >= timeout {
            return Err(format!(
                "{} BPF map(s) the test created still exist {} s after it ended (ids {left:?}): \
                 a reference leaked, or the kernel does not free maps",
                left.len(),
                timeout.as_secs()
            ));
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    fn set(ids: &[u32]) -> BTreeSet<u32> {
        ids.iter().copied().collect()
    }

    #[test]
    fn waits_until_the_tests_maps_are_gone() {
        let before = set(&[1]);
        let mut calls = 0;
        let took = await_maps_gone(
            &before,
            || {
                calls += 1;
                // The test's map 7 lingers for three polls.
                Ok(if calls < 4 { set(&[1, 7]) } else { set(&[1]) })
            },
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!(calls, 4);
        assert!(took >= POLL * 3, "{took:?}");
    }

    #[test]
    fn maps_that_never_go_are_a_failure() {
        let err =
            await_maps_gone(&set(&[]), || Ok(set(&[3, 9])), Duration::from_millis(30)).unwrap_err();
        assert!(
            err.contains("2 BPF map(s)") && err.contains("[3, 9]"),
            "{err}"
        );
    }

    #[test]
    fn maps_from_before_the_test_do_not_count() {
        let took = await_maps_gone(&set(&[4, 5]), || Ok(set(&[5])), Duration::ZERO).unwrap();
        assert!(took < Duration::from_secs(1));
        let err = await_maps_gone(
            &set(&[]),
            || Err(io::Error::from_raw_os_error(libc::EPERM)),
            Duration::ZERO,
        )
        .unwrap_err();
        assert!(err.contains("BPF_MAP_GET_NEXT_ID"), "{err}");
    }
}
