//! Two queues of jobs run side by side, each in its own order: ci runs
//! the steps that only boot kernels beside those that build what they
//! boot, since under TCG a step with one guest keeps one of the two
//! cores of these machines busy and leaves the other idle.

use std::sync::mpsc;
use std::thread;

/// Runs the jobs of lane 0 in order on one thread and those of lane 1 in
/// order on another (`lane_of` says which), and calls `done` on this
/// thread as each job ends, in the order they end. Returns the outcomes
/// in the order of `jobs`.
pub fn side_by_side<J, O>(
    jobs: &[J],
    lane_of: impl Fn(&J) -> usize,
    run: impl Fn(&J) -> O + Sync,
    mut done: impl FnMut(&J, &O),
) -> Vec<O>
where
    J: Sync,
    O: Send,
{
    let lanes: [Vec<usize>; 2] = [0, 1].map(|lane| {
        (0..jobs.len())
            .filter(|&i| lane_of(&jobs[i]).min(1) == lane)
            .collect()
    });
    let mut outcomes: Vec<Option<O>> = (0..jobs.len()).map(|_| None).collect();
    let (tx, rx) = mpsc::channel();
    thread::scope(|s| {
        for lane in &lanes {
            let (tx, run) = (tx.clone(), &run);
            s.spawn(move || {
                for &i in lane {
                    if tx.send((i, run(&jobs[i]))).is_err() {
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
        .map(|o| o.expect("every job of a lane ran"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    #[test]
    fn each_lane_keeps_its_order_and_the_lanes_overlap() {
        // (lane, milliseconds): lane 0 takes 300 ms, lane 1 200 ms.
        let jobs = [(0, 150), (1, 100), (0, 150), (1, 100)];
        let started = Mutex::new(Vec::new());
        let t = Instant::now();
        let mut ended = Vec::new();
        let out = side_by_side(
            &jobs,
            |j| j.0,
            |j| {
                started.lock().unwrap().push(*j);
                std::thread::sleep(Duration::from_millis(j.1));
                j.1 * 10
            },
            |j, o| ended.push((*j, *o)),
        );
        assert_eq!(out, [1500, 1000, 1500, 1000], "in the jobs' order");
        assert!(
            t.elapsed() < Duration::from_millis(450),
            "the lanes ran one after the other: {:?}",
            t.elapsed()
        );
        let lane0: Vec<_> = ended.iter().filter(|(j, _)| j.0 == 0).collect();
        assert_eq!(lane0.len(), 2);
        assert_eq!(ended.len(), 4, "done saw every job");
    }

    #[test]
    fn one_lane_alone_runs_in_order() {
        let jobs = [3, 1, 2];
        let order = Mutex::new(Vec::new());
        side_by_side(&jobs, |_| 1, |j| order.lock().unwrap().push(*j), |_, _| {});
        assert_eq!(*order.lock().unwrap(), [3, 1, 2]);
    }
}
