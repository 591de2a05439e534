//! Shrinking a failing run to a short reproducer: delta debugging
//! (ddmin) over its operations, then one pass that tries dropping each
//! operation left. A candidate counts when it still fails the same way
//! (`Divergence::signature`); any subsequence is a valid run, since the
//! model skips what names something gone.

use crate::op::Op;

/// The most candidate runs one shrink may try.
pub const MAX_TRIES: usize = 400;

/// The shortest subsequence of `ops` found for which `fails` holds, and
/// the number of candidates tried. `fails(ops)` must hold.
pub fn shrink(ops: &[Op], mut fails: impl FnMut(&[Op]) -> bool) -> (Vec<Op>, usize) {
    let mut cur = ops.to_vec();
    let mut tries = 0;
    let mut n = 2;
    while cur.len() >= 2 && tries < MAX_TRIES {
        let chunk = cur.len().div_ceil(n);
        let chunks = n;
        let mut reduced = false;
        for i in 0..chunks {
            let lo = (i * chunk).min(cur.len());
            let hi = ((i + 1) * chunk).min(cur.len());
            if lo == hi {
                continue;
            }
            let candidate: Vec<Op> = cur[..lo].iter().chain(&cur[hi..]).cloned().collect();
            tries += 1;
            if fails(&candidate) {
                cur = candidate;
                reduced = true;
                break;
            }
            if tries >= MAX_TRIES {
                break;
            }
        }
        n = if reduced {
            (n - 1).max(2)
        } else if n >= cur.len() {
            break;
        } else {
            (n * 2).min(cur.len())
        };
    }
    // One at a time, from the end: what ddmin's chunks could not drop.
    let mut i = cur.len();
    while i > 0 && tries < MAX_TRIES {
        i -= 1;
        let mut candidate = cur.clone();
        candidate.remove(i);
        tries += 1;
        if fails(&candidate) {
            cur = candidate;
        }
    }
    (cur, tries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::Elem;

    fn lookup(i: u32) -> Op {
        Op::Lookup(Elem { map: 0, index: i })
    }

    #[test]
    fn ddmin_finds_the_ops_the_failure_needs() {
        let ops: Vec<Op> = (0..100).map(lookup).collect();
        // Fails when ops 13, 57 and 90 are all there, in order.
        let needs = [lookup(13), lookup(57), lookup(90)];
        let fails = |c: &[Op]| {
            let mut it = c.iter();
            needs.iter().all(|n| it.any(|o| o == n))
        };
        let (min, tries) = shrink(&ops, fails);
        assert_eq!(min, needs);
        assert!(tries < 200, "{tries} tries");
    }

    #[test]
    fn the_tries_are_bounded() {
        let ops: Vec<Op> = (0..1000).map(lookup).collect();
        let mut calls = 0;
        // Only the whole run fails: nothing can go.
        let (min, tries) = shrink(&ops, |c| {
            calls += 1;
            c.len() == 1000
        });
        assert_eq!(min.len(), 1000);
        assert_eq!((tries, calls), (MAX_TRIES, MAX_TRIES));
    }
}
