//! The mutation operators. Each takes a unit of added code and gives its
//! mutated lines, as many as the unit has (a deleted line becomes an
//! empty one), so the patch's hunk headers stay true.

use std::sync::OnceLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

use super::units::{Kind, Unit};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op {
    /// A statement or an initializer taken out.
    Delete,
    /// One operand of an `A | B | C` chain dropped.
    Flag,
    /// ±1 on a literal, `+` ↔ `-`, `+=` ↔ `-=`, `++` ↔ `--`.
    Arith,
    /// `<` ↔ `<=`, `>` ↔ `>=`, `==` ↔ `!=`.
    Cmp,
    /// `min` ↔ `max` (and `_t`, `3`), `ALIGN_DOWN` ↔ `ALIGN`.
    MinMax,
    /// A return value forced: success, or an error of the function's type.
    Return,
    /// A condition forced true or false (an error path always or never).
    Cond,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Delete => "delete",
            Op::Flag => "flag",
            Op::Arith => "arith",
            Op::Cmp => "cmp",
            Op::MinMax => "minmax",
            Op::Return => "return",
            Op::Cond => "cond",
        }
    }
}

/// Every mutant of `unit`: the operator and the unit's new lines, each
/// different from the original and from each other.
pub fn mutate(unit: &Unit) -> Vec<(Op, Vec<String>)> {
    let mut out: Vec<(Op, Vec<String>)> = Vec::new();
    let mut push = |op: Op, lines: Vec<String>| {
        if lines != unit.lines && !out.iter().any(|(_, l)| *l == lines) {
            out.push((op, lines));
        }
    };
    if unit.complete {
        for (op, lines) in structural(unit) {
            push(op, lines);
        }
    }
    let literals = matches!(
        unit.kind,
        Kind::Statement | Kind::If | Kind::While | Kind::For | Kind::Define
    );
    let tokens = !matches!(unit.kind, Kind::Define | Kind::Initializer | Kind::Other);
    for j in 0..unit.lines.len() {
        let code = &unit.code[j];
        let mut edits: Vec<(Op, Edit)> = Vec::new();
        if tokens {
            edits.extend(comparisons(code).into_iter().map(|e| (Op::Cmp, e)));
            edits.extend(flag_drops(code).into_iter().map(|e| (Op::Flag, e)));
            edits.extend(min_max(code).into_iter().map(|e| (Op::MinMax, e)));
            edits.extend(arithmetic(code).into_iter().map(|e| (Op::Arith, e)));
        }
        if literals {
            let skip_name = usize::from(unit.kind == Kind::Define);
            edits.extend(
                literal_steps(code, skip_name)
                    .into_iter()
                    .map(|e| (Op::Arith, e)),
            );
        }
        for (op, edit) in edits {
            let mut lines = unit.lines.clone();
            lines[j] = edit.apply(&lines[j]);
            push(op, lines);
        }
    }
    out
}

/// The operators that rewrite a whole unit.
fn structural(unit: &Unit) -> Vec<(Op, Vec<String>)> {
    let indent = |s: &str| s[..s.len() - s.trim_start().len()].to_string();
    let first = &unit.lines[0];
    let whole = |text: String| {
        let mut lines = vec![format!("{}{text}", indent(first))];
        lines.resize(unit.lines.len(), String::new());
        lines
    };
    let joined = unit.code.join("\n");
    match unit.kind {
        Kind::Statement => {
            let mut out = vec![(Op::Delete, whole(";".into()))];
            out.extend(ternary(unit).into_iter().map(|l| (Op::Cond, l)));
            out
        }
        Kind::Initializer => vec![(Op::Delete, vec![String::new(); unit.lines.len()])],
        Kind::Return => forced_returns(unit.returns.as_deref())
            .iter()
            .map(|v| (Op::Return, whole(format!("return {v};"))))
            .collect(),
        Kind::If | Kind::While => {
            let Some((open, close)) = condition_span(&joined) else {
                return Vec::new();
            };
            let head = joined[..open].trim_start();
            let tail = joined[close + 1..].trim();
            let values: &[&str] = if unit.kind == Kind::If {
                &["1", "0"]
            } else {
                &["0"]
            };
            values
                .iter()
                .map(|v| {
                    (
                        Op::Cond,
                        whole(format!(
                            "{head}({v}){}{tail}",
                            if tail.is_empty() { "" } else { " " }
                        )),
                    )
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

/// What a return can be forced to, by the function's type.
fn forced_returns(returns: Option<&str>) -> &'static [&'static str] {
    match returns {
        Some("vm_fault_t") => &["0", "VM_FAULT_SIGBUS", "VM_FAULT_NOPAGE"],
        Some("int" | "long" | "ssize_t") => &["0", "-EINVAL"],
        Some("bool") => &["true", "false"],
        _ => &[],
    }
}

/// The byte span of the first parenthesised condition: its '(' and ')'.
fn condition_span(code: &str) -> Option<(usize, usize)> {
    let open = code.find('(')?;
    let mut depth = 0;
    for (i, c) in code.char_indices().skip_while(|(i, _)| *i < open) {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some((open, i));
                }
            }
            _ => {}
        }
    }
    None
}

/// `x = COND ? a : b`: COND forced true and false, on the line with the '?'.
fn ternary(unit: &Unit) -> Vec<Vec<String>> {
    let Some(j) = unit.code.iter().position(|c| c.contains(" ? ")) else {
        return Vec::new();
    };
    let code = &unit.code[j];
    let (Some(eq), Some(q)) = (code.find(" = "), code.find(" ? ")) else {
        return Vec::new();
    };
    if eq > q {
        return Vec::new();
    }
    ["1", "0"]
        .iter()
        .map(|v| {
            let mut lines = unit.lines.clone();
            lines[j] = Edit {
                at: eq + 3,
                len: q - eq - 3,
                with: v.to_string(),
            }
            .apply(&lines[j]);
            lines
        })
        .collect()
}

/// One replacement within a line, by byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Edit {
    at: usize,
    len: usize,
    with: String,
}

impl Edit {
    fn apply(&self, line: &str) -> String {
        format!(
            "{}{}{}",
            &line[..self.at],
            self.with,
            &line[self.at + self.len..]
        )
    }
}

fn comparisons(code: &str) -> Vec<Edit> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let two = b.get(i..i + 2).unwrap_or(&[]);
        let swap2 = match two {
            b"<=" => Some("<"),
            b">=" => Some(">"),
            b"==" => Some("!="),
            b"!=" => Some("=="),
            _ => None,
        };
        let prev = i.checked_sub(1).map(|p| b[p]);
        if let Some(w) = swap2 {
            if !matches!(prev, Some(b'<' | b'>')) {
                out.push(Edit {
                    at: i,
                    len: 2,
                    with: w.into(),
                });
            }
            i += 2;
            continue;
        }
        let next = b.get(i + 1).copied();
        let single = (b[i] == b'<' || b[i] == b'>')
            && !matches!(prev, Some(b'<' | b'>' | b'-'))
            && !matches!(next, Some(b'<' | b'>' | b'='));
        if single {
            out.push(Edit {
                at: i,
                len: 1,
                with: format!("{}=", b[i] as char),
            });
        }
        i += 1;
    }
    out
}

fn flag_drops(code: &str) -> Vec<Edit> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let chain = RE.get_or_init(|| Regex::new(r"\w+(?:\s*\|\s*\w+)+").expect("valid"));
    let mut out = Vec::new();
    for m in chain.find_iter(code) {
        let text = m.as_str();
        if text.contains("||") {
            continue;
        }
        let operands: Vec<&str> = text.split('|').map(str::trim).collect();
        for k in 0..operands.len() {
            let kept: Vec<&str> = operands
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != k)
                .map(|(_, o)| *o)
                .collect();
            out.push(Edit {
                at: m.start(),
                len: text.len(),
                with: kept.join(" | "),
            });
        }
    }
    out
}

fn min_max(code: &str) -> Vec<Edit> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let call = RE.get_or_init(|| {
        Regex::new(r"\b(min|max|min_t|max_t|min3|max3|ALIGN_DOWN|ALIGN)\(").expect("valid")
    });
    call.captures_iter(code)
        .map(|c| {
            let name = c.get(1).expect("group 1");
            let with = match name.as_str() {
                "ALIGN_DOWN" => "ALIGN".to_string(),
                "ALIGN" => "ALIGN_DOWN".to_string(),
                n if n.starts_with("min") => n.replacen("min", "max", 1),
                n => n.replacen("max", "min", 1),
            };
            Edit {
                at: name.start(),
                len: name.len(),
                with,
            }
        })
        .collect()
}

fn arithmetic(code: &str) -> Vec<Edit> {
    const SWAPS: &[(&str, &str)] = &[
        (" + ", " - "),
        (" - ", " + "),
        ("+=", "-="),
        ("-=", "+="),
        ("++", "--"),
        ("--", "++"),
    ];
    let mut out = Vec::new();
    for (from, to) in SWAPS {
        for (at, _) in code.match_indices(from) {
            let pair = from.len() == 2 && from.as_bytes()[0] == from.as_bytes()[1];
            // `a++ + b` and `x->y`: not the operator this swap means.
            if pair && code[at + 2..].starts_with(['+', '-', '=']) {
                continue;
            }
            out.push(Edit {
                at,
                len: from.len(),
                with: to.to_string(),
            });
        }
    }
    out
}

/// Decimal literals ±1 (0 only up); with `skip` = 1, the first word (a
/// #define's name) is left alone.
fn literal_steps(code: &str, skip: usize) -> Vec<Edit> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let literal = RE.get_or_init(|| Regex::new(r"\b\d+\b").expect("valid"));
    let start = if skip > 0 {
        code.find("define").map_or(0, |d| d + 6)
    } else {
        0
    };
    let mut out = Vec::new();
    for m in literal.find_iter(code).filter(|m| m.start() >= start) {
        let before = code[..m.start()].chars().last();
        if matches!(before, Some('_' | '.')) || code[m.end()..].starts_with(['x', '.']) {
            continue;
        }
        let Ok(n) = m.as_str().parse::<u64>() else {
            continue;
        };
        for v in [n.checked_add(1), n.checked_sub(1)].into_iter().flatten() {
            out.push(Edit {
                at: m.start(),
                len: m.len(),
                with: v.to_string(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutants::units::units;

    fn mutants_of(added: &[&str], returns: &str) -> Vec<(&'static str, Vec<String>)> {
        let mut patch = format!("--- a/f.c\n+++ b/f.c\n@@ -1,1 +1,9 @@ static {returns} f(void)\n");
        for l in added {
            patch.push_str(&format!("+{l}\n"));
        }
        let all = units(&patch);
        assert_eq!(all.len(), 1, "one unit: {all:?}");
        mutate(&all[0])
            .into_iter()
            .map(|(op, l)| (op.name(), l))
            .collect()
    }

    fn flat(m: &[(&str, Vec<String>)]) -> Vec<String> {
        m.iter()
            .map(|(op, l)| format!("{op}: {}", l.join(" / ")))
            .collect()
    }

    #[test]
    fn a_call_is_deleted_and_each_flag_dropped() {
        let got = flat(&mutants_of(&["\tvm_flags_set(vma, A | B | C);"], "int"));
        assert_eq!(
            got,
            [
                "delete: \t;",
                "flag: \tvm_flags_set(vma, B | C);",
                "flag: \tvm_flags_set(vma, A | C);",
                "flag: \tvm_flags_set(vma, A | B);",
            ]
        );
    }

    #[test]
    fn conditions_are_forced_and_comparisons_swapped() {
        let got = flat(&mutants_of(&["\tif (err == -EBUSY)"], "int"));
        assert_eq!(
            got,
            [
                "cond: \tif (1)",
                "cond: \tif (0)",
                "cmp: \tif (err != -EBUSY)"
            ]
        );
        let got = flat(&mutants_of(&["\twhile (first < end) {"], "int"));
        assert_eq!(
            got,
            ["cond: \twhile (0) {", "cmp: \twhile (first <= end) {"]
        );
        let got = flat(&mutants_of(&["\tif (a->b >= c << 2)"], "int"));
        assert!(
            got.contains(&"cmp: \tif (a->b > c << 2)".to_string()),
            "{got:?}"
        );
        assert_eq!(
            got.iter().filter(|g| g.starts_with("cmp")).count(),
            1,
            "-> and << are not comparisons: {got:?}"
        );
    }

    #[test]
    fn returns_are_forced_by_the_function_type() {
        let got = flat(&mutants_of(&["\treturn vmf_error(err);"], "vm_fault_t"));
        assert_eq!(
            got,
            [
                "return: \treturn 0;",
                "return: \treturn VM_FAULT_SIGBUS;",
                "return: \treturn VM_FAULT_NOPAGE;"
            ]
        );
        let got = flat(&mutants_of(&["\treturn 0;"], "int"));
        assert_eq!(
            got,
            ["return: \treturn -EINVAL;"],
            "no literal steps on a return"
        );
    }

    #[test]
    fn arithmetic_and_min_max_and_literals() {
        let got = flat(&mutants_of(&["\tend = min3(first + 64, b, c);"], "int"));
        assert_eq!(
            got,
            [
                "delete: \t;",
                "minmax: \tend = max3(first + 64, b, c);",
                "arith: \tend = min3(first - 64, b, c);",
                "arith: \tend = min3(first + 65, b, c);",
                "arith: \tend = min3(first + 63, b, c);",
            ]
        );
        let got = flat(&mutants_of(&["\t\tleft--;"], "int"));
        assert_eq!(got, ["delete: \t\t;", "arith: \t\tleft++;"]);
        let got = flat(&mutants_of(&["#define WINDOW_16\t64"], "int"));
        assert_eq!(
            got,
            [
                "arith: #define WINDOW_16\t65",
                "arith: #define WINDOW_16\t63"
            ]
        );
    }

    #[test]
    fn a_multi_line_statement_keeps_its_line_count() {
        let got = mutants_of(&["\tvma->vm_ops = m ? &lazy", "\t\t: &plain;"], "int");
        let lines: Vec<usize> = got.iter().map(|(_, l)| l.len()).collect();
        assert!(lines.iter().all(|&n| n == 2), "{got:?}");
        let got = flat(&got);
        assert_eq!(
            got,
            [
                "delete: \t; / ",
                "cond: \tvma->vm_ops = 1 ? &lazy / \t\t: &plain;",
                "cond: \tvma->vm_ops = 0 ? &lazy / \t\t: &plain;",
            ]
        );
    }

    #[test]
    fn an_initializer_line_is_deleted() {
        let got = flat(&mutants_of(&["\t.fault\t\t= bpf_map_mmap_fault,"], "int"));
        assert_eq!(got, ["delete: "]);
    }
}
