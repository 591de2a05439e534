//! Confidence intervals for the ratio of two kernels' times in one bench
//! run on a wall clock: a bootstrap over whole boots of the statistic the
//! tables print (the median over boots of each boot's median cycle).
//! Cycles are not resampled one by one: under TCG they shift in blocks
//! (whole runs of cycles about 2x at once), so treating them as
//! independent gave intervals too narrow to hold from run to run
//! (1.32x [1.24-1.56x] and 0.81x [0.70-1.06x] for one target on one day).
//! A boot is the block. Boots are resampled in pairs: `bench` boots the
//! kernels in rounds, one boot of each in turn, so boot r of one kernel
//! ran next to boot r of the other and shares its share of the host's
//! drift. Under icount the targets take the median of the boots instead:
//! every row repeats within 0.01% from boot to boot.

/// Resamples per interval: enough for stable 2.5% and 97.5% points.
pub const RESAMPLES: usize = 2000;

/// A ratio and its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub ratio: f64,
    pub lo: f64,
    pub hi: f64,
}

/// Where an interval lies against a target "at most `limit`".
pub fn verdict(i: &Interval, limit: f64) -> &'static str {
    if i.hi <= limit {
        "met"
    } else if i.lo > limit {
        "MISSED"
    } else {
        "not established"
    }
}

/// A fixed-seed xorshift: every report of one run draws the same
/// resamples.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

pub(super) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

/// The median over boots of each boot's median (boots with cycles only,
/// as `ratio_interval` keeps them); None without boots.
fn statistic(boots: &[Vec<f64>]) -> Option<f64> {
    let mut meds: Vec<f64> = boots.iter().map(|b| median(&mut b.clone())).collect();
    (!meds.is_empty()).then(|| median(&mut meds))
}

/// `statistic` of one resample: the boots `picked` (drawn with
/// replacement), each whole.
fn resampled(boot_medians: &[f64], picked: &[usize]) -> f64 {
    let mut meds: Vec<f64> = picked.iter().map(|&i| boot_medians[i]).collect();
    median(&mut meds)
}

/// The ratio `a / b` of the statistic, with its 95% bootstrap interval;
/// None when either side has no cycles. With as many boots on both sides,
/// boot r of `a` is drawn with boot r of `b` (paired rounds).
pub fn ratio_interval(a: &[Vec<f64>], b: &[Vec<f64>]) -> Option<Interval> {
    let keep =
        |x: &[Vec<f64>]| -> Vec<Vec<f64>> { x.iter().filter(|c| !c.is_empty()).cloned().collect() };
    let (a, b) = (keep(a), keep(b));
    let ratio = statistic(&a)? / statistic(&b)?.max(1.0);
    let boot_medians =
        |x: &[Vec<f64>]| -> Vec<f64> { x.iter().map(|c| median(&mut c.clone())).collect() };
    let (a, b) = (boot_medians(&a), boot_medians(&b));
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let paired = a.len() == b.len();
    let mut ratios: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            let pa: Vec<usize> = (0..a.len()).map(|_| rng.below(a.len())).collect();
            let pb: Vec<usize> = if paired {
                pa.clone()
            } else {
                (0..b.len()).map(|_| rng.below(b.len())).collect()
            };
            resampled(&a, &pa) / resampled(&b, &pb).max(1.0)
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    let at = |q: f64| ratios[((RESAMPLES as f64 - 1.0) * q).round() as usize];
    Some(Interval {
        ratio,
        lo: at(0.025),
        hi: at(0.975),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boots(values: &[&[f64]]) -> Vec<Vec<f64>> {
        values.iter().map(|b| b.to_vec()).collect()
    }

    #[test]
    fn the_same_times_give_a_tight_interval_around_one() {
        let a = boots(&[&[100.0, 101.0, 99.0, 100.0], &[100.0, 102.0, 98.0, 100.0]]);
        let i = ratio_interval(&a, &a).unwrap();
        assert_eq!(i.ratio, 1.0);
        assert!(
            i.lo > 0.97 && i.hi < 1.03 && i.lo <= 1.0 && i.hi >= 1.0,
            "{i:?}"
        );
        assert_eq!(verdict(&i, 1.1), "met");
    }

    #[test]
    fn separated_times_are_missed_and_overlapping_ones_not_established() {
        let fast = boots(&[
            &[100.0, 101.0, 99.0],
            &[100.0, 100.0, 101.0],
            &[99.0, 100.0, 100.0],
        ]);
        let slow = boots(&[
            &[150.0, 151.0, 149.0],
            &[150.0, 152.0, 150.0],
            &[149.0, 150.0, 151.0],
        ]);
        let i = ratio_interval(&slow, &fast).unwrap();
        assert!(i.lo > 1.4, "{i:?}");
        assert_eq!(verdict(&i, 1.1), "MISSED");
        // One boot of the slower kernel as fast as the other: the
        // interval straddles the limit.
        let mixed = boots(&[
            &[150.0, 151.0, 149.0],
            &[100.0, 100.0, 101.0],
            &[108.0, 110.0, 109.0],
        ]);
        let i = ratio_interval(&mixed, &fast).unwrap();
        assert!(i.lo < 1.1 && i.hi > 1.1, "{i:?}");
        assert_eq!(verdict(&i, 1.1), "not established");
    }

    #[test]
    fn paired_boots_cancel_drift_that_both_kernels_shared() {
        // Round 2 ran on a slow host for both kernels: unpaired, its boots
        // widen the interval; paired, the ratio is 1.05 in every round.
        let a = boots(&[&[105.0, 105.0], &[210.0, 210.0], &[105.0, 105.0]]);
        let b = boots(&[&[100.0, 100.0], &[200.0, 200.0], &[100.0, 100.0]]);
        let i = ratio_interval(&a, &b).unwrap();
        assert!(
            (i.lo - 1.05).abs() < 1e-9 && (i.hi - 1.05).abs() < 1e-9,
            "{i:?}"
        );
        assert_eq!(verdict(&i, 1.1), "met");
        let unpaired = ratio_interval(&a, &b[..2]).unwrap();
        assert!(unpaired.hi > 1.1, "{unpaired:?}");
    }

    #[test]
    fn boots_are_the_blocks_however_many_cycles_they_hold() {
        // The same boot medians with 3 or 31 scattered cycles each: the
        // interval is the boots', not narrowed by the cycles' count.
        let spread = |m: f64, n: usize| -> Vec<f64> {
            (0..n).map(|i| m + (i as f64 - (n / 2) as f64)).collect()
        };
        let few: Vec<Vec<f64>> = [100.0, 140.0, 120.0].map(|m| spread(m, 3)).to_vec();
        let many: Vec<Vec<f64>> = [100.0, 140.0, 120.0].map(|m| spread(m, 31)).to_vec();
        let base = boots(&[&[110.0], &[110.0], &[110.0]]);
        let (f, m) = (
            ratio_interval(&few, &base).unwrap(),
            ratio_interval(&many, &base).unwrap(),
        );
        assert_eq!(f, m);
        assert!(f.lo < 1.0 && f.hi > 1.2, "{f:?}");
    }

    #[test]
    fn no_cycles_no_interval() {
        let a = boots(&[&[100.0]]);
        assert_eq!(ratio_interval(&a, &[]), None);
        assert_eq!(ratio_interval(&boots(&[&[]]), &a), None);
    }
}
