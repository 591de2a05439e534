//! Runs a run's jobs (kselftest: one runner on one kernel each; fuzz: one
//! kernel each) on up to N guests at once (`--vms`). Two jobs of one
//! kernel never run together: they share the kernel's directories and
//! its boot numbering.

use std::collections::HashSet;
use std::sync::{Condvar, Mutex};

/// The jobs by runner, then kernel: with two guests the kernels advance
/// side by side, so no kernel is left to run alone at the end.
pub fn interleaved<R: Copy>(kernels: usize, runners: &[R]) -> Vec<(usize, R)> {
    runners
        .iter()
        .flat_map(|&r| (0..kernels).map(move |k| (k, r)))
        .collect()
}

/// Which jobs are taken and which keys are running.
struct Board {
    taken: Vec<bool>,
    running: HashSet<usize>,
}

/// Runs `work` on every job, at most `workers` at a time and never two
/// with the same `key` at once, each taking the first job it may; returns
/// the results in the jobs' order.
pub fn run_keyed<J: Sync, R: Send>(
    jobs: &[J],
    workers: usize,
    key: impl Fn(&J) -> usize + Sync,
    work: impl Fn(&J) -> R + Sync,
) -> Vec<R> {
    let board = Mutex::new(Board {
        taken: vec![false; jobs.len()],
        running: HashSet::new(),
    });
    let wake = Condvar::new();
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..workers.clamp(1, jobs.len().max(1)) {
            s.spawn(|| {
                while let Some(i) = next_job(&board, &wake, jobs, &key) {
                    // Released even if `work` panics, so no worker waits on
                    // a key forever.
                    let _release = Release {
                        board: &board,
                        wake: &wake,
                        key: key(&jobs[i]),
                    };
                    let r = work(&jobs[i]);
                    results.lock().expect("results lock")[i] = Some(r);
                }
            });
        }
    });
    results
        .into_inner()
        .expect("results lock")
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

/// The first job not taken whose key is not running, waiting while every
/// such job's key is busy; None once all are taken.
fn next_job<J>(
    board: &Mutex<Board>,
    wake: &Condvar,
    jobs: &[J],
    key: &impl Fn(&J) -> usize,
) -> Option<usize> {
    let mut b = board.lock().expect("board lock");
    loop {
        if b.taken.iter().all(|&t| t) {
            return None;
        }
        let free = (0..jobs.len()).find(|&i| !b.taken[i] && !b.running.contains(&key(&jobs[i])));
        if let Some(i) = free {
            b.taken[i] = true;
            b.running.insert(key(&jobs[i]));
            return Some(i);
        }
        b = wake.wait(b).expect("board lock");
    }
}

/// Marks a job's key free again when the job ends.
struct Release<'a> {
    board: &'a Mutex<Board>,
    wake: &'a Condvar,
    key: usize,
}

impl Drop for Release<'_> {
    fn drop(&mut self) {
        if let Ok(mut b) = self.board.lock() {
            b.running.remove(&self.key);
        }
        self.wake.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[test]
    fn jobs_go_runner_by_runner_across_the_kernels() {
        assert_eq!(
            interleaved(3, &['a', 'b']),
            [(0, 'a'), (1, 'a'), (2, 'a'), (0, 'b'), (1, 'b'), (2, 'b')]
        );
    }

    /// Per key, how many run now and the most that ever ran at once; and
    /// the same over all keys.
    struct Watch {
        now: Vec<AtomicUsize>,
        most: Vec<AtomicUsize>,
        all_now: AtomicUsize,
        all_most: AtomicUsize,
    }

    impl Watch {
        fn new(keys: usize) -> Watch {
            Watch {
                now: (0..keys).map(|_| AtomicUsize::new(0)).collect(),
                most: (0..keys).map(|_| AtomicUsize::new(0)).collect(),
                all_now: AtomicUsize::new(0),
                all_most: AtomicUsize::new(0),
            }
        }

        fn job(&self, k: usize) {
            let n = self.now[k].fetch_add(1, Ordering::SeqCst) + 1;
            self.most[k].fetch_max(n, Ordering::SeqCst);
            let a = self.all_now.fetch_add(1, Ordering::SeqCst) + 1;
            self.all_most.fetch_max(a, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(15));
            self.all_now.fetch_sub(1, Ordering::SeqCst);
            self.now[k].fetch_sub(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn two_jobs_of_one_key_never_overlap_and_results_keep_the_order() {
        let jobs = interleaved(3, &[10, 20, 30, 40]);
        let watch = Watch::new(3);
        let out = run_keyed(
            &jobs,
            2,
            |j| j.0,
            |&(k, r)| {
                watch.job(k);
                k * 100 + r
            },
        );
        let want: Vec<usize> = jobs.iter().map(|&(k, r)| k * 100 + r).collect();
        assert_eq!(out, want);
        for k in 0..3 {
            assert_eq!(
                watch.most[k].load(Ordering::SeqCst),
                1,
                "key {k} overlapped"
            );
        }
        assert_eq!(
            watch.all_most.load(Ordering::SeqCst),
            2,
            "two workers, two at once"
        );
    }

    #[test]
    fn one_worker_runs_the_jobs_one_by_one_in_order() {
        let jobs = interleaved(2, &[1, 2]);
        let order = Mutex::new(Vec::new());
        run_keyed(&jobs, 1, |j| j.0, |j| order.lock().unwrap().push(*j));
        assert_eq!(*order.lock().unwrap(), jobs);
    }

    #[test]
    fn a_panicking_job_frees_its_key_and_the_panic_reaches_the_caller() {
        let jobs = interleaved(1, &[1, 2, 3]);
        let ran = AtomicUsize::new(0);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_keyed(
                &jobs,
                2,
                |j| j.0,
                |j| {
                    ran.fetch_add(1, Ordering::SeqCst);
                    assert_ne!(j.1, 1, "planted");
                },
            )
        }));
        assert!(caught.is_err());
        // The second worker was not left waiting on key 0: the rest ran.
        assert_eq!(ran.load(Ordering::SeqCst), 3);
    }
}
