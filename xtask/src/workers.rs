//! One queue of jobs, two workers: ci runs its suites this way, since
//! under TCG a step with one guest keeps one of the two cores of these
//! machines busy and leaves the other idle. Each worker takes the next
//! job as it finishes one, so the order of the queue decides how evenly
//! the two end; the caller puts the longest first.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;

/// Runs `jobs` on `workers` threads, each taking the next job of the
/// queue in the order given, and calls `done` on this thread as each job
/// ends, in the order they end. Returns the outcomes in the order of
/// `jobs`.
pub fn on_workers<J, O>(
    jobs: &[J],
    workers: usize,
    run: impl Fn(&J) -> O + Sync,
    mut done: impl FnMut(&J, &O),
) -> Vec<O>
where
    J: Sync,
    O: Send,
{
    let next = AtomicUsize::new(0);
    let mut outcomes: Vec<Option<O>> = (0..jobs.len()).map(|_| None).collect();
    let (tx, rx) = mpsc::channel();
    thread::scope(|s| {
        for _ in 0..workers.max(1) {
            let (tx, run, next) = (tx.clone(), &run, &next);
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= jobs.len() || tx.send((i, run(&jobs[i]))).is_err() {
                    return;
                }
            });
        }
        drop(tx);
        for (i, outcome) in rx {
            done(&jobs[i], &outcome);
            outcomes[i] = Some(outcome);
        }
    });
    outcomes
        .into_iter()
        .map(|o| o.expect("a worker ran every job"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    #[test]
    fn two_workers_take_the_queue_in_order_and_end_together() {
        // Milliseconds: one long job, then short ones. In order on two
        // workers, the short ones run on one beside the long on the
        // other: 400 ms in all rather than the sum, 700.
        let jobs = [400, 100, 100, 100];
        let started = Mutex::new(Vec::new());
        let t = Instant::now();
        let mut ended = Vec::new();
        let out = on_workers(
            &jobs,
            2,
            |j| {
                started.lock().unwrap().push(*j);
                std::thread::sleep(Duration::from_millis(*j));
                j * 10
            },
            |j, o| ended.push((*j, *o)),
        );
        assert_eq!(out, [4000, 1000, 1000, 1000], "in the jobs' order");
        assert_eq!(started.lock().unwrap()[0], 400, "the first job first");
        assert!(
            t.elapsed() < Duration::from_millis(600),
            "the workers did not share the queue: {:?}",
            t.elapsed()
        );
        assert_eq!(ended.len(), 4, "done saw every job");
        assert_eq!(ended[3], (400, 4000), "the long job ended last");
    }

    #[test]
    fn one_worker_runs_the_queue_in_order() {
        let jobs = [3, 1, 2];
        let order = Mutex::new(Vec::new());
        on_workers(&jobs, 1, |j| order.lock().unwrap().push(*j), |_, _| {});
        assert_eq!(*order.lock().unwrap(), [3, 1, 2]);
    }
}
