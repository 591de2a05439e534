//! The code a patch adds, cut into units a mutant changes one at a
//! time: a statement, a condition's header, an initializer, a `#define`.
//! Comments are blanked out (column for column) before anything looks at
//! the code, so no operator ever matches inside one.

/// One unit: consecutive added lines of one patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// Index of its first line in the patch text.
    pub first: usize,
    /// The lines as the patch adds them, without the leading '+'.
    pub lines: Vec<String>,
    /// The same lines with comments blanked out.
    pub code: Vec<String>,
    /// The file, and the unit's first line in the patched file.
    pub file: String,
    pub new_line: usize,
    /// The return type of the function the unit is in, when the patch
    /// shows its signature (in the hunk header or a line above).
    pub returns: Option<String>,
    /// The name of the function the unit is in, where the patch shows it
    /// as `returns` says: what tells two units of the same text apart.
    pub function: Option<String>,
    /// False for a statement that goes on in context lines: only
    /// operators within one line apply to it.
    pub complete: bool,
    pub kind: Kind,
}

/// What a unit is, which decides the operators that apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An expression statement: a call, an assignment.
    Statement,
    Return,
    /// `if (…)`, `else if (…)`: the condition can be forced.
    If,
    /// `while (…)`: the condition can be forced false only (true hangs).
    While,
    /// `for (…)`: only what is inside its header changes.
    For,
    /// `.field = value,` in a struct initializer.
    Initializer,
    /// `#define NAME value`.
    Define,
    /// Declarations, signatures, braces, other preprocessor lines:
    /// nothing to mutate.
    Other,
}

/// Every unit of added code in `patch`, in order.
pub fn units(patch: &str) -> Vec<Unit> {
    let mut cut = Cutter::default();
    for (i, line) in patch.lines().enumerate() {
        cut.line(i, line);
    }
    cut.flush();
    cut.out
}

#[derive(Default)]
struct Cutter {
    out: Vec<Unit>,
    file: String,
    in_hunk: bool,
    new_line: usize,
    in_comment: bool,
    returns: Option<String>,
    function: Option<String>,
    /// The return type of each function defined in the new file so far: a
    /// hunk header names the old file's, which a patch may have changed.
    defined: std::collections::HashMap<String, String>,
    /// The unit being collected, and its bracket depth so far.
    open: Option<Unit>,
    depth: i32,
}

impl Cutter {
    fn line(&mut self, i: usize, line: &str) {
        if let Some(path) = line.strip_prefix("+++ ") {
            self.flush();
            self.file = path.trim().trim_start_matches("b/").to_string();
            self.in_hunk = false;
            self.defined.clear();
        } else if let Some(header) = line.strip_prefix("@@ ") {
            self.flush();
            self.hunk(header);
        } else if !self.in_hunk || line.starts_with("--") && line.len() <= 3 {
            self.flush();
            self.in_hunk = false;
        } else if let Some(added) = line.strip_prefix('+') {
            self.added(i, added);
            self.new_line += 1;
        } else if let Some(kept) = line.strip_prefix(' ').or((line.is_empty()).then_some("")) {
            self.flush();
            self.context(kept);
            self.new_line += 1;
        } else if line.starts_with('-') {
            self.flush();
        } else if !line.starts_with('\\') {
            self.flush();
            self.in_hunk = false;
        }
    }

    /// `-a,b +c,d @@ context`: the new file's line, and the function
    /// the hunk is in.
    fn hunk(&mut self, header: &str) {
        self.in_hunk = true;
        self.in_comment = false;
        let plus = header.split_whitespace().find(|w| w.starts_with('+'));
        self.new_line = plus
            .and_then(|w| w[1..].split(',').next()?.parse().ok())
            .unwrap_or(1);
        let shown = header
            .split_once("@@")
            .and_then(|(_, f)| signature(f.trim_start()));
        self.function = shown.as_ref().map(|(_, name)| name.clone());
        self.returns = shown.map(|(ty, name)| self.defined.get(&name).cloned().unwrap_or(ty));
    }

    /// A line of the new file: a function defined on it sets the type
    /// that the returns below it are forced to.
    fn new_file_line(&mut self, code: &str) {
        if let Some((ty, name)) = signature(code) {
            self.defined.insert(name.clone(), ty.clone());
            self.returns = Some(ty);
            self.function = Some(name);
        }
    }

    fn context(&mut self, line: &str) {
        let code = blank_comments(line, &mut self.in_comment);
        self.new_file_line(&code);
    }

    fn added(&mut self, i: usize, line: &str) {
        let code = blank_comments(line, &mut self.in_comment);
        self.new_file_line(&code);
        if code.trim().is_empty() {
            // A comment or blank line ends nothing and starts nothing.
            return;
        }
        let unit = self.open.get_or_insert_with(|| Unit {
            first: i,
            lines: Vec::new(),
            code: Vec::new(),
            file: self.file.clone(),
            new_line: self.new_line,
            returns: self.returns.clone(),
            function: self.function.clone(),
            complete: false,
            kind: Kind::Other,
        });
        unit.lines.push(line.to_string());
        unit.code.push(code.clone());
        self.depth += depth_change(&code);
        let t = code.trim_end();
        let ends = self.depth <= 0
            && (t.ends_with([';', '{', '}', ',', ')']) || t.starts_with('#') && !t.ends_with('\\'));
        if ends {
            let mut unit = self.open.take().expect("a unit is open");
            unit.complete = true;
            unit.kind = kind_of(&unit.code.join(" "));
            self.out.push(unit);
            self.depth = 0;
        }
    }

    /// A unit cut short by a context or removed line: kept for the
    /// operators that stay within one line.
    fn flush(&mut self) {
        if let Some(mut unit) = self.open.take() {
            unit.kind = kind_of(&unit.code.join(" "));
            self.out.push(unit);
        }
        self.depth = 0;
    }
}

/// `line` with `/* … */` and `// …` replaced by spaces; `in_comment`
/// carries a block comment over to the next line.
pub fn blank_comments(line: &str, in_comment: &mut bool) -> String {
    let b = line.as_bytes();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < b.len() {
        if *in_comment {
            if b[i..].starts_with(b"*/") {
                *in_comment = false;
                out.push_str("  ");
                i += 2;
            } else {
                out.push(if b[i] == b'\t' { '\t' } else { ' ' });
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            *in_comment = true;
            out.push_str("  ");
            i += 2;
        } else if b[i..].starts_with(b"//") {
            out.extend(std::iter::repeat_n(' ', b.len() - i));
            break;
        } else {
            let c = line[i..].chars().next().expect("in bounds");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

fn depth_change(code: &str) -> i32 {
    code.chars()
        .map(|c| match c {
            '(' | '[' => 1,
            ')' | ']' => -1,
            _ => 0,
        })
        .sum()
}

/// The return type and the name that a function definition's first line
/// names: `static vm_fault_t array_map_mmap_fault(` gives `vm_fault_t` and
/// `array_map_mmap_fault`.
fn signature(code: &str) -> Option<(String, String)> {
    let code = code.trim_end();
    if code.starts_with([' ', '\t']) || code.ends_with(';') || code.starts_with('#') {
        return None;
    }
    let head = code.split('(').next()?;
    if head.len() == code.len() || head.contains('=') {
        return None;
    }
    let words: Vec<&str> = head
        .split(|c: char| c.is_whitespace() || c == '*')
        .filter(|w| !w.is_empty())
        .collect();
    let ty = words.len().checked_sub(2).map(|i| words[i])?;
    const NOT_TYPES: &[&str] = &["if", "while", "for", "return", "static", "inline", "else"];
    let name = words[words.len() - 1];
    (!NOT_TYPES.contains(&name) && !NOT_TYPES.contains(&ty))
        .then(|| (ty.to_string(), name.to_string()))
}

fn kind_of(code: &str) -> Kind {
    let t = code.trim();
    let first = t
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .next()
        .unwrap_or("");
    const TYPES: &[&str] = &[
        "static", "const", "struct", "union", "enum", "unsigned", "signed", "int", "long", "short",
        "char", "bool", "void", "u8", "u16", "u32", "u64", "s32", "s64",
    ];
    match first {
        _ if t.starts_with("#define") => Kind::Define,
        _ if t.starts_with(['#', '{', '}']) => Kind::Other,
        "if" => Kind::If,
        "else" if t.starts_with("else if") => Kind::If,
        "while" => Kind::While,
        "for" => Kind::For,
        "return" => Kind::Return,
        _ if TYPES.contains(&first) || first.ends_with("_t") => Kind::Other,
        _ if t.starts_with('.') && t.ends_with(',') => Kind::Initializer,
        _ if t.ends_with(';') || !t.ends_with(')') => Kind::Statement,
        _ => Kind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATCH: &str = "\
--- a/k/a.c
+++ b/k/a.c
@@ -10,6 +10,14 @@ static int f(struct x *x)
 {
+\t/* a comment with if (x) in it */
+\tif ((u64)x->a * 2 >
 \t    limit)
 \t\treturn -EINVAL;
+\tvm_flags_set(vma, A | B |
+\t\t     C); /* trailing */
+\treturn 0;
+}
+
+static vm_fault_t g(struct vm_fault *vmf)
+{
+\tstruct page *page;
+\tvmf->page = x ? p
+\t\t    : q;
+#define WINDOW\t64
";

    #[test]
    fn added_code_is_cut_into_statements_with_their_function() {
        let got = units(PATCH);
        let brief: Vec<(usize, Kind, bool, Option<&str>)> = got
            .iter()
            .map(|u| (u.first, u.kind, u.complete, u.returns.as_deref()))
            .collect();
        assert_eq!(
            brief,
            [
                (5, Kind::If, false, Some("int")),
                (8, Kind::Statement, true, Some("int")),
                (10, Kind::Return, true, Some("int")),
                (11, Kind::Other, true, Some("int")),
                (13, Kind::Other, true, Some("vm_fault_t")),
                (14, Kind::Other, true, Some("vm_fault_t")),
                (15, Kind::Other, true, Some("vm_fault_t")),
                (16, Kind::Statement, true, Some("vm_fault_t")),
                (18, Kind::Define, true, Some("vm_fault_t")),
            ]
        );
        assert_eq!(got[1].lines.len(), 2, "a call over two lines is one unit");
        assert!(!got[1].code[1].contains("trailing"), "comments blanked");
        assert_eq!(got[1].code[1].len(), got[1].lines[1].len(), "columns kept");
        assert_eq!((got[0].file.as_str(), got[0].new_line), ("k/a.c", 12));
        assert_eq!(got[2].new_line, 17);
    }

    #[test]
    fn a_return_type_the_patch_changed_is_the_new_one() {
        // The second hunk's header names the old `static int fill(`: its
        // bare `return;` must not be forced to `return 0;` (did not build).
        let patch = "\
diff --git a/k/a.c b/k/a.c
--- a/k/a.c
+++ b/k/a.c
@@ -1,3 +1,3 @@
-static int fill(int a,
+static void fill(int a,
 \t\t int b)
 {
@@ -9,3 +9,4 @@ static int fill(int a,
 \tif (a)
+\t\treturn;
 \tb++;
";
        let got = units(patch);
        assert_eq!(
            got.len(),
            2,
            "{:?}",
            got.iter().map(|u| &u.lines).collect::<Vec<_>>()
        );
        assert_eq!(got[1].returns.as_deref(), Some("void"));
    }

    #[test]
    fn comments_spanning_lines_are_blanked_until_they_close() {
        let mut in_comment = false;
        assert_eq!(blank_comments("a /* b", &mut in_comment), "a     ");
        assert!(in_comment);
        assert_eq!(
            blank_comments(" c */ d // e", &mut in_comment),
            "      d     "
        );
        assert!(!in_comment);
    }
}
