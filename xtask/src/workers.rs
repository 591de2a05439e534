//! One queue of jobs, two workers: ci runs its suites this way, since
//! under TCG a step with one guest keeps one of the two cores of these
//! machines busy and leaves the other idle. Each worker takes the next
//! job as it finishes one, so the order of the queue decides how evenly
//! the two end; the caller puts the longest first. A job may wait for
//! another to end (it needs what that one builds): the worker takes the
//! next job that is free to start instead of waiting with it.

use std::sync::mpsc;
use std::sync::{Condvar, Mutex};
use std::thread;

/// Runs `jobs` on `workers` threads, each taking the first job of the
/// queue not yet taken whose `after` (the index of a job that must end
/// first) has ended, and calls `done` on this thread as each job ends,
/// in the order they end. Returns the outcomes in the order of `jobs`.
pub fn on_workers<J, O>(
    jobs: &[J],
    (workers, after): (usize, impl Fn(&J) -> Option<usize> + Sync),
    run: impl Fn(&J) -> O + Sync,
    mut done: impl FnMut(&J, &O),
) -> Vec<O>
where
    J: Sync,
    O: Send,
{
    let queue = Queue {
        state: Mutex::new(vec![JobState::Waiting; jobs.len()]),
        changed: Condvar::new(),
    };
    let mut outcomes: Vec<Option<O>> = (0..jobs.len()).map(|_| None).collect();
    let (tx, rx) = mpsc::channel();
    thread::scope(|s| {
        for _ in 0..workers.max(1) {
            let (tx, run, queue, after) = (tx.clone(), &run, &queue, &after);
            s.spawn(move || {
                while let Some(i) = queue.take(|i| after(&jobs[i])) {
                    let outcome = run(&jobs[i]);
                    queue.end(i);
                    if tx.send((i, outcome)).is_err() {
                        return;
                    }
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

/// Where a job of the queue stands.
#[derive(Clone, Copy, PartialEq)]
enum JobState {
    Waiting,
    Running,
    Ended,
}

struct Queue {
    state: Mutex<Vec<JobState>>,
    changed: Condvar,
}

impl Queue {
    /// The first waiting job free to start, marked running; None when
    /// none is left. Waits while the only ones left wait for a running
    /// job.
    fn take(&self, after: impl Fn(usize) -> Option<usize>) -> Option<usize> {
        let mut jobs = self.state.lock().expect("the queue's lock");
        loop {
            let free = |i: usize| after(i).is_none_or(|first| jobs[first] == JobState::Ended);
            let waiting: Vec<usize> = (0..jobs.len())
                .filter(|&i| jobs[i] == JobState::Waiting)
                .collect();
            if waiting.is_empty() {
                return None;
            }
            if let Some(&i) = waiting.iter().find(|&&i| free(i)) {
                jobs[i] = JobState::Running;
                return Some(i);
            }
            assert!(
                jobs.contains(&JobState::Running),
                "jobs {waiting:?} wait for each other: the queue's `after` has a cycle"
            );
            jobs = self.changed.wait(jobs).expect("the queue's lock");
        }
    }

    fn end(&self, i: usize) {
        self.state.lock().expect("the queue's lock")[i] = JobState::Ended;
        self.changed.notify_all();
    }
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
            (2, |_: &u64| None),
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
        on_workers(
            &jobs,
            (1, |_: &u64| None),
            |j| order.lock().unwrap().push(*j),
            |_, _| {},
        );
        assert_eq!(*order.lock().unwrap(), [3, 1, 2]);
    }

    #[test]
    fn a_job_that_waits_for_another_lets_the_free_worker_take_the_next() {
        // (name, milliseconds, the job it waits for): b needs a's output.
        let jobs = [
            ("a", 300, None),
            ("b", 10, Some(0)),
            ("c", 100, None),
            ("d", 100, None),
        ];
        let started = Mutex::new(Vec::new());
        let t = Instant::now();
        on_workers(
            &jobs,
            (2, |j: &(&str, u64, Option<usize>)| j.2),
            |j| {
                started.lock().unwrap().push(j.0);
                std::thread::sleep(Duration::from_millis(j.1));
            },
            |_, _| {},
        );
        assert_eq!(*started.lock().unwrap(), ["a", "c", "d", "b"]);
        assert!(
            t.elapsed() < Duration::from_millis(450),
            "b's worker waited for a rather than run c and d: {:?}",
            t.elapsed()
        );
    }
}
