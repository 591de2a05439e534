//! One fuzzing run: operations from the generator (or a reproducer),
//! each applied to the model and done on the kernel, the two compared
//! after every step; the first divergence ends the run.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use guest_common::{errno_symbol, signal_name};
use selftests::kmsg::Kmsg;
use selftests::proc::pagemap_present;
use selftests::runner::Kernel;

use crate::check;
use crate::exec::{Executor, Injected};
use crate::gen::Generator;
use crate::model::inject::{show_pages, Disallowed};
use crate::model::{Model, Ret, VmaModel};
use crate::op::{Op, Range, Remap, Word};

/// Every `PROGRESS` operations the run reports how far it got, with the
/// digest so far: kernels that ran the same seed compare them, and a
/// kernel that died is known to have passed the last one.
pub const PROGRESS: usize = 250;

#[derive(Debug, Clone)]
pub struct Settings {
    pub kernel: Kernel,
    pub nodes: u32,
    pub client: Option<PathBuf>,
    /// Whether the kernel has fail_page_alloc (`fail_alloc` runs).
    pub inject: bool,
}

/// Where the operations come from.
pub enum Source {
    Generate { seed: u64, budget: Duration },
    Replay(Vec<Op>),
}

/// How the kernel first differed from the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// Index of the operation in the run (skipped ones count).
    pub step: usize,
    pub op: Op,
    /// What differed: "returns", "VMAs", "page", "element", "kernel log"...
    pub category: String,
    pub what: String,
}

impl Divergence {
    /// What a shrunk reproducer must still show: the same check failing
    /// on the same kind of operation.
    /// A wrong return names its operation; a wrong state is found at a
    /// full check as often as after the operation that caused it, so it
    /// names only what was wrong.
    pub fn signature(&self) -> String {
        if self.category == "returns" {
            format!("returns of {}", name(&self.op))
        } else {
            self.category.clone()
        }
    }
}

#[derive(Debug, Default)]
pub struct Outcome {
    /// Every operation drawn, the diverging one last.
    pub ops: Vec<Op>,
    /// How many the model did not skip.
    pub executed: usize,
    pub divergence: Option<Divergence>,
    pub elapsed: Duration,
    /// Executed operations by name.
    pub counts: BTreeMap<String, usize>,
    /// The digest after every PROGRESS operations.
    pub digests: Vec<(usize, u64)>,
}

/// FNV-1a over what each executed operation was and returned.
#[derive(Debug, Clone, Copy)]
pub struct Digest(pub u64);

impl Digest {
    pub fn new() -> Digest {
        Digest(0xcbf2_9ce4_8422_2325)
    }

    pub fn add(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    pub fn add_step(&mut self, op: &Op, ret: &Ret) {
        self.add(op.to_string().as_bytes());
        self.add_ret(ret);
    }

    fn add_ret(&mut self, ret: &Ret) {
        match ret {
            Ret::Bytes(b) => {
                self.add(b"bytes");
                self.add(b);
            }
            Ret::Child(rets) => {
                self.add(b"child");
                rets.iter().for_each(|r| self.add_ret(r));
            }
            other => self.add(format!("{other:?}").as_bytes()),
        }
    }
}

impl Default for Digest {
    fn default() -> Digest {
        Digest::new()
    }
}

/// Runs `source`; `progress` hears of every PROGRESS operations.
pub fn run(
    settings: &Settings,
    source: Source,
    progress: &mut dyn FnMut(usize, u64),
) -> io::Result<Outcome> {
    let mut lockstep = Lockstep::new(settings)?;
    let started = Instant::now();
    let (mut draw, budget) = Draw::new(source);
    let mut out = Outcome::default();
    let mut digest = Digest::new();
    while started.elapsed() < budget {
        let Some(op) = draw.next(&lockstep.model) else {
            break;
        };
        let step = out.ops.len();
        out.ops.push(op.clone());
        if let Some((category, what)) = lockstep.step(&op, &mut out, &mut digest) {
            out.divergence = Some(Divergence {
                step,
                op,
                category,
                what,
            });
            break;
        }
        if (step + 1) % PROGRESS == 0 {
            out.digests.push((step + 1, digest.0));
            progress(step + 1, digest.0);
        }
    }
    if out.divergence.is_none() {
        out.divergence = lockstep.final_check(&out.ops);
    }
    out.elapsed = started.elapsed();
    Ok(out)
}

/// The operations of a run as it draws them: from the generator, which
/// reads the model, or from a reproducer, in order.
enum Draw {
    Generated(Generator),
    Replayed(std::vec::IntoIter<Op>),
}

impl Draw {
    /// The draw of `source`, and how long the run may take.
    fn new(source: Source) -> (Draw, Duration) {
        match source {
            Source::Generate { seed, budget } => (Draw::Generated(Generator::new(seed)), budget),
            Source::Replay(ops) => (Draw::Replayed(ops.into_iter()), Duration::MAX),
        }
    }

    fn next(&mut self, model: &Model) -> Option<Op> {
        match self {
            Draw::Generated(g) => Some(g.next(model)),
            Draw::Replayed(ops) => ops.next(),
        }
    }
}

/// The model and the running kernel, driven one operation at a time
/// and compared after each.
struct Lockstep {
    model: Model,
    /// Other states the kernel may be in, alike in all it shows: a fired
    /// failure's outcomes can leave the same pages present and different
    /// records of the last window, which only a later fault tells apart.
    /// Every step keeps those the kernel still agrees with, the first of
    /// them as `model`, which the generator reads.
    others: Vec<Model>,
    exec: Executor,
    kmsg: Kmsg,
}

/// How the kernel differed from the model: the check's category and
/// what it found.
type Difference = (String, String);

impl Lockstep {
    fn new(settings: &Settings) -> io::Result<Lockstep> {
        let mut model = Model::new(settings.kernel, settings.nodes, settings.client.is_some());
        model.inject = settings.inject;
        let exec = Executor::new(settings.client.clone(), settings.inject)?;
        let kmsg = Kmsg::open_at_end()?;
        Ok(Lockstep {
            model,
            others: Vec::new(),
            exec,
            kmsg,
        })
    }

    /// Applies `op` to the model and, unless the model skips it, does it
    /// on the kernel (counted in `out`, added to `digest`) and compares.
    fn step(&mut self, op: &Op, out: &mut Outcome, digest: &mut Digest) -> Option<Difference> {
        if let Op::FailAlloc { pass, op: inner } = op {
            return self.injected_step(op, (*pass, inner), out, digest);
        }
        // `drop` unmaps what the model had of the map before it.
        let dropped = match op {
            Op::Drop(m) => Some((*m, self.model.ranges_of(*m))),
            _ => None,
        };
        let want = self.model.apply(op);
        if want == Ret::Skipped {
            return None;
        }
        // The model is applied in place; only the rare others are more.
        let others: Vec<(Model, Ret)> = std::mem::take(&mut self.others)
            .into_iter()
            .map(|mut m| {
                let want = m.apply(op);
                (m, want)
            })
            .collect();
        out.executed += 1;
        *out.counts.entry(name(op)).or_default() += 1;
        let (done, want) = without_skipped(op, want);
        let got = match &dropped {
            Some((m, ranges)) => self.exec.drop_map(*m, ranges),
            None => self.exec.apply(&done),
        };
        self.exec.retain_maps(|m| self.model.maps.contains_key(&m));
        digest.add_step(op, &got);
        let scope = scope_after(op, &self.model, out.executed);
        let (others, wants): (Vec<Model>, Vec<Ret>) = others
            .into_iter()
            .map(|(m, want)| (m, without_skipped(op, want).1))
            .unzip();
        self.keep_agreeing(others, &scope, |i| {
            let want = if i == 0 { &want } else { &wants[i - 1] };
            compare(want, &got).map(|what| ("returns".to_string(), what))
        })
    }

    /// `fail_alloc`: `inner` done with an allocation failing after
    /// `pass`. Unfired, it must return what it would have; fired, what an
    /// outcome of a failure allows, which the model then takes. A load or
    /// store of a page not present takes one counted fault either way (a
    /// fault that fails is retried, and not counted).
    fn injected_step(
        &mut self,
        op: &Op,
        (pass, inner): (u32, &Op),
        out: &mut Outcome,
        digest: &mut Digest,
    ) -> Option<Difference> {
        let mut after = self.model.clone();
        let want = after.apply(op);
        if want == Ret::Skipped {
            return None;
        }
        let befores: Vec<Model> = std::iter::once(self.model.clone())
            .chain(std::mem::take(&mut self.others))
            .collect();
        let others_after = befores[1..].iter().map(|b| {
            let mut a = b.clone();
            a.apply(op);
            a
        });
        let afters: Vec<Model> = std::iter::once(after).chain(others_after).collect();
        out.executed += 1;
        *out.counts.entry(name(op)).or_default() += 1;
        let got = match self.exec.apply_injected(pass, inner) {
            Ok(got) => got,
            Err(e) => return Some(("fail_alloc".into(), format!("fail_page_alloc: {e}"))),
        };
        // What it returns unfired: the series' kernels, which fire at
        // different allocations, keep one digest.
        digest.add_step(op, &want);
        if let Some(what) = wrong_fault_count(&befores[0], inner, &got) {
            return Some(("faults".into(), what));
        }
        let candidates = if !got.fired {
            if let Some(what) = compare(&want, &got.ret) {
                return Some(("returns".into(), what));
            }
            afters
        } else {
            *out.counts.entry("fail_alloc fired".into()).or_default() += 1;
            match self.fired(&befores, afters, inner, &got.ret, &want, out) {
                Ok(candidates) => candidates,
                Err(d) => return Some(d),
            }
        };
        let mut candidates = candidates.into_iter();
        self.model = candidates.next().expect("a state the kernel may be in");
        self.exec.retain_maps(|m| self.model.maps.contains_key(&m));
        let scope = scope_after(op, &self.model, out.executed);
        self.keep_agreeing(candidates.collect(), &scope, |_| None)
    }

    /// A fired failure of `inner` that returned `got`: the states each of
    /// the candidates `befores` (with `afters`, each unfailed) may now be
    /// in. An mmap() left unmapped is checked so and mapped again, as the
    /// draw expects (the next operations were drawn from a model where it
    /// succeeded), which `want` it must return.
    fn fired(
        &mut self,
        befores: &[Model],
        afters: Vec<Model>,
        inner: &Op,
        got: &Ret,
        want: &Ret,
        out: &mut Outcome,
    ) -> Result<Vec<Model>, Difference> {
        let exec = &self.exec;
        let observed = |v: &VmaModel| present_map_pages(exec, v);
        let mut adopted = Vec::new();
        let mut refused = None;
        for (before, after) in befores.iter().zip(afters) {
            match after.adoptions(before, inner, got, observed) {
                Ok(states) => adopted.push((after, states)),
                Err(d) => {
                    refused.get_or_insert(d);
                }
            }
        }
        let Some((_, first)) = adopted.first() else {
            let d = refused.expect("a candidate refused");
            return Err(("fail_alloc".into(), disallowed(got, &d)));
        };
        if !first[0].in_path {
            *out.counts.entry(FIRED_OUTSIDE.into()).or_default() += 1;
        }
        if *got != Ret::Errno(libc::ENOMEM) || !matches!(inner, Op::Mmap(_)) {
            let states = adopted.into_iter().flat_map(|(_, s)| s);
            return Ok(states.map(|a| a.model).collect());
        }
        self.exec
            .retain_maps(|m| first[0].model.maps.contains_key(&m));
        let unmapped = check::Scope::After {
            pages: Vec::new(),
            layout: true,
        };
        if let Err(what) = check::matches(&first[0].model, &self.exec, &unmapped) {
            return Err((category(&what), what));
        }
        let again = self.exec.apply(inner);
        if let Some(what) = compare(want, &again) {
            return Err(("returns".into(), format!("mapped again: {what}")));
        }
        Ok(adopted.into_iter().map(|(after, _)| after).collect())
    }

    /// Keeps of the model and `others` the states the kernel agrees with
    /// over `scope`, `returns(i)` saying how one's return differs (0: the
    /// model's, i: `others[i - 1]`'s); the model stays if it agrees, else
    /// the first other kept takes its place. None kept: the model's
    /// difference. Then the kernel log is read.
    fn keep_agreeing(
        &mut self,
        others: Vec<Model>,
        scope: &check::Scope,
        returns: impl Fn(usize) -> Option<Difference>,
    ) -> Option<Difference> {
        let differs = |i: usize, m: &Model| {
            returns(i).or_else(|| {
                check::matches(m, &self.exec, scope)
                    .err()
                    .map(|what| (category(&what), what))
            })
        };
        let model_differs = differs(0, &self.model);
        let mut kept: Vec<Model> = Vec::new();
        for (i, m) in others.into_iter().enumerate() {
            let alike = kept.contains(&m) || (model_differs.is_none() && m == self.model);
            if !alike && differs(i + 1, &m).is_none() {
                kept.push(m);
            }
        }
        if model_differs.is_some() {
            if kept.is_empty() {
                return model_differs;
            }
            self.model = kept.remove(0);
        }
        self.others = kept;
        check::log(&mut self.kmsg)
            .err()
            .map(|what| (category(&what), what))
    }

    /// After the last of `ops`, everything is checked; a difference is
    /// laid at the last operation's door.
    fn final_check(&mut self, ops: &[Op]) -> Option<Divergence> {
        let others = std::mem::take(&mut self.others);
        let differs = self.keep_agreeing(others, &check::Scope::Full, |_| None);
        let (op, (category, what)) = (ops.last()?, differs?);
        Some(Divergence {
            step: ops.len() - 1,
            op: op.clone(),
            category,
            what,
        })
    }
}

/// The present map pages of `v` as pagemap shows them (none if it
/// cannot be read: the check after the step names that).
fn present_map_pages(exec: &Executor, v: &VmaModel) -> BTreeSet<usize> {
    pagemap_present(exec.addr(v.start), v.pages)
        .map(|p| {
            (0..v.pages)
                .filter(|&i| p[i])
                .map(|i| v.pgoff + i)
                .collect()
        })
        .unwrap_or_default()
}

/// A load or store that succeeded takes one counted fault if its page
/// was not present, none if it was; how `got` differs, if it does.
fn wrong_fault_count(before: &Model, op: &Op, got: &Injected) -> Option<String> {
    let (Op::Touch(a), Some(faults)) = (op, got.faults) else {
        return None;
    };
    if !matches!(got.ret, Ret::Ok | Ret::Value(_)) {
        return None;
    }
    let v = before.layout.at(a.at.page)?;
    let present = v.present.contains(&v.map_page(a.at.page));
    let want = u64::from(!present);
    (faults != want).then(|| {
        format!(
            "minor faults: {faults} for the access of page @{} ({}), expected {want}{}",
            a.at.page,
            if present { "present" } else { "not present" },
            if got.fired {
                ", with an allocation failure fired in it"
            } else {
                ""
            }
        )
    })
}

/// A fired failure's outcome no allowed outcome matches, on one line.
fn disallowed(got: &Ret, d: &Disallowed) -> String {
    let seen = d.seen.as_ref().map_or("no VMA".into(), show_pages);
    let allowed: Vec<String> = d
        .allowed
        .iter()
        .map(|o| {
            let present = o.present.as_ref().map_or("unmapped".into(), show_pages);
            format!("{} with {present} ({} failing)", show(&o.ret), o.failed)
        })
        .collect();
    format!(
        "with an allocation failure fired in it, the kernel returned {} with present map pages \
         {seen}; the model allows {}",
        show(got),
        if allowed.is_empty() {
            "no failure here".to_string()
        } else {
            allowed.join("; or ")
        }
    )
}

/// A child's accesses the model skipped (outside the arena, in a
/// hand-written reproducer) are not done either.
fn without_skipped(op: &Op, want: Ret) -> (Op, Ret) {
    match (op, want) {
        (Op::Fork(accesses), Ret::Child(rets)) => {
            let (kept, rets): (Vec<_>, Vec<_>) = accesses
                .iter()
                .zip(rets)
                .filter(|(_, r)| *r != Ret::Skipped)
                .map(|(a, r)| (*a, r))
                .unzip();
            (Op::Fork(kept), Ret::Child(rets))
        }
        (op, want) => (op.clone(), want),
    }
}

/// The count of fired failures whose outcome was the operation's unfailed
/// one: they fell outside its path, and tested none of it.
pub const FIRED_OUTSIDE: &str = "fail_alloc fired outside the path";

/// Every FULL_CHECK executed operations, and after the last, every byte
/// and element is checked; in between, what the operation touched.
pub const FULL_CHECK: usize = 16;

/// What is checked after `op`, the `executed`th operation done.
fn scope_after(op: &Op, model: &Model, executed: usize) -> check::Scope {
    if executed.is_multiple_of(FULL_CHECK) {
        check::Scope::Full
    } else {
        check::Scope::After {
            pages: footprint(op, model),
            layout: reshapes(op),
        }
    }
}

/// The arena pages whose bytes `op` can have changed or faulted in: its
/// range or word, a child's words, a moved mapping's new place, and for
/// an element written through the syscall or a program, every mapping
/// of its map.
fn footprint(op: &Op, model: &Model) -> Vec<Range> {
    if let Op::FailAlloc { op, .. } = op {
        return footprint(op, model);
    }
    let page = |w: &Word| Range {
        at: w.page,
        pages: 1,
    };
    match op {
        Op::Mmap(crate::op::Mmap { range, .. })
        | Op::Madvise { range, .. }
        | Op::Mlock(range)
        | Op::PvmRead(range)
        | Op::MemRead(range)
        | Op::FileFromMap(range)
        | Op::FileToMap { range, .. } => vec![*range],
        Op::Mremap {
            range,
            how: Remap::Move(to),
        } => vec![Range {
            at: *to,
            pages: range.pages,
        }],
        Op::Touch(a) => vec![page(&a.at)],
        Op::Fork(accesses) => accesses.iter().map(|a| page(&a.at)).collect(),
        Op::PvmWrite(w, _) | Op::MemWrite(w, _) => vec![page(w)],
        Op::Update { elem, .. } | Op::ProgStore { elem, .. } => model.ranges_of(elem.map),
        _ => Vec::new(),
    }
}

/// Whether `op` can change the VMAs.
fn reshapes(op: &Op) -> bool {
    if let Op::FailAlloc { op, .. } = op {
        return reshapes(op);
    }
    matches!(
        op,
        Op::Mmap(_)
            | Op::Drop(_)
            | Op::Munmap(_)
            | Op::Mremap { .. }
            | Op::Mprotect { .. }
            | Op::Mlock(_)
            | Op::Munlock(_)
    )
}

/// The operation's name: its first word.
pub fn name(op: &Op) -> String {
    op.to_string()
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The check a state difference came from: the words before its colon.
fn category(what: &str) -> String {
    let head = what.split(':').next().unwrap_or(what);
    // "page @12 (map page 3 of m1)": the kind of thing, not which one.
    head.split_whitespace().next().unwrap_or(head).to_string()
}

/// None if the kernel returned what the model said; else how they differ.
pub fn compare(want: &Ret, got: &Ret) -> Option<String> {
    if want == got {
        return None;
    }
    Some(format!(
        "the kernel returned {}, the model {}",
        show(got),
        show(want)
    ))
}

/// A return on one line, long byte strings cut short.
pub fn show(ret: &Ret) -> String {
    match ret {
        Ret::Bytes(b) if b.len() > 16 => {
            let mut d = Digest::new();
            d.add(b);
            format!(
                "{} bytes {}.. (fnv {:016x})",
                b.len(),
                check::hex(&b[..16]),
                d.0
            )
        }
        Ret::Bytes(b) => format!("bytes {}", check::hex(b)),
        Ret::Errno(e) => format!("{} ({e})", errno_symbol(*e).unwrap_or("errno")),
        Ret::Signal(s) => signal_name(*s).unwrap_or("a signal").to_string(),
        Ret::Value(v) => format!("value {v:#x}"),
        Ret::Partial(n) => format!("a short transfer of {n} bytes"),
        Ret::Child(rets) => format!(
            "child [{}]",
            rets.iter().map(show).collect::<Vec<_>>().join(", ")
        ),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_are_shown_on_one_line() {
        assert_eq!(show(&Ret::Errno(libc::EBUSY)), "EBUSY (16)");
        assert_eq!(show(&Ret::Signal(libc::SIGBUS)), "SIGBUS");
        assert_eq!(show(&Ret::Errno(-1)), "errno (-1)");
        assert_eq!(show(&Ret::Signal(64)), "a signal");
        let long = show(&Ret::Bytes(vec![0xab; 4096]));
        assert!(
            long.starts_with("4096 bytes abababab") && !long.contains('\n'),
            "{long}"
        );
        assert_eq!(
            compare(&Ret::Ok, &Ret::Signal(libc::SIGSEGV)).unwrap(),
            "the kernel returned SIGSEGV, the model Ok"
        );
        assert_eq!(compare(&Ret::Value(3), &Ret::Value(3)), None);
        assert_eq!(category("page @12 (map page 3 of m1): present"), "page");
        assert_eq!(category("kernel log: BUG: x"), "kernel");
    }
}
