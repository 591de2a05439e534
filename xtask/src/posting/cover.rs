//! The cover letter, from the template kept with the series
//! (`patches/cover-letter.txt`: a subject line, `Cc:` lines for every
//! mail and a `Prefix:` for their subjects, a blank line, the body) with the bench record's table and the
//! changelog of this version (`patches/changelog.txt`) put in where the
//! body says.

use anyhow::{bail, Context, Result};

use crate::bench::{BenchRecord, RecordRow};
use guest_common::bench::grid::PATTERNS;

pub const TEMPLATE: &str = "patches/cover-letter.txt";
pub const CHANGELOG: &str = "patches/changelog.txt";

/// Where the body takes the bench table and the changelog.
const TABLE_MARK: &str = "@BENCH_TABLE@";
const CHANGES_MARK: &str = "@CHANGELOG@";

/// The cover letter's own text, and who every mail of the posting goes to
/// besides what get_maintainer.pl says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cover {
    pub subject: String,
    pub cc: Vec<String>,
    /// The subjects' prefix (`RFC PATCH bpf-next`), if the template says.
    pub prefix: Option<String>,
    pub body: String,
}

/// The template filled in with `table` (None: the template must not ask
/// for it) and `changes` (where it asks for them).
pub fn fill(template: &str, table: Option<&str>, changes: &str) -> Result<Cover> {
    let mut lines = template.lines().filter(|l| !l.starts_with('#'));
    let subject = lines.next().unwrap_or_default().trim().to_string();
    if subject.is_empty() {
        bail!("the cover letter starts with no subject line: put its subject first");
    }
    let (mut cc, mut prefix) = (Vec::new(), None);
    for line in lines.by_ref() {
        if line.trim().is_empty() {
            break;
        }
        if let Some(to) = line.strip_prefix("Cc:") {
            cc.push(to.trim().to_string());
        } else if let Some(p) = line.strip_prefix("Prefix:") {
            prefix = Some(p.trim().to_string());
        } else {
            bail!(
                "the cover letter's `{line}` after the subject: only `Cc:` and `Prefix:` lines go \
                 there, then a blank line"
            );
        }
    }
    let body: Vec<&str> = lines.collect();
    let body = body.join("\n");
    match (table, body.contains(TABLE_MARK)) {
        (Some(_), false) => {
            bail!("the cover letter has no {TABLE_MARK} line: the body says where the table goes")
        }
        (None, true) => bail!(
            "the cover letter asks for {TABLE_MARK}, the bench record of this project's own \
             series: leave it out of your series' cover letter"
        ),
        _ => {}
    }
    if !changes.is_empty() && !body.contains(CHANGES_MARK) {
        bail!("the cover letter has no {CHANGES_MARK} line: the body says where the changes go");
    }
    let body = body
        .replace(TABLE_MARK, table.unwrap_or_default().trim_end())
        .replace(CHANGES_MARK, changes.trim_end());
    Ok(Cover {
        subject,
        cc,
        prefix,
        body: body.trim().to_string() + "\n",
    })
}

/// The newest version the changelog has a section for, if any.
pub fn newest_version(changelog: &str) -> Option<u32> {
    changelog.lines().filter_map(version_of).max()
}

/// The version a changelog line heads (`v2:`), if it heads one.
fn version_of(line: &str) -> Option<u32> {
    line.strip_prefix('v')?.strip_suffix(':')?.parse().ok()
}

/// The changelog's sections for versions 2 to `version` (`v2:` and the
/// lines under it), newest first: what changed since each version
/// before. A version after the first without its section is refused.
pub fn changes_for(changelog: &str, version: u32) -> Result<String> {
    let mut sections: Vec<(u32, Vec<&str>)> = Vec::new();
    for line in changelog.lines().filter(|l| !l.starts_with('#')) {
        match (version_of(line), sections.last_mut()) {
            (Some(n), _) => sections.push((n, vec![line])),
            (None, Some((_, lines))) => lines.push(line),
            (None, None) if line.trim().is_empty() => {}
            (None, None) => bail!("{CHANGELOG}: `{line}` before any `vN:` line"),
        }
    }
    if version > 1 && !sections.iter().any(|(n, _)| *n == version) {
        bail!(
            "{CHANGELOG} has no `v{version}:` section: say there what changed since v{}",
            version - 1
        );
    }
    let mut kept: Vec<&(u32, Vec<&str>)> = sections.iter().filter(|(n, _)| *n <= version).collect();
    kept.sort_by_key(|(n, _)| std::cmp::Reverse(*n));
    Ok(kept
        .iter()
        .map(|(_, lines)| lines.join("\n").trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n\n"))
}

/// The cells the cover letter's table shows: pattern label and map size
/// in pages, one thread.
const CELLS: &[(&str, u64)] = &[
    ("no access", 2048),
    ("write all", 2048),
    ("read all", 2048),
    ("MAP_POPULATE", 2048),
    ("write 1% at random", 16384),
    ("write all", 16),
    ("write all", 1),
];

/// The kernels the table compares: before the lazy mapping, as merged,
/// and with this series (its whole, `head`).
fn columns(head: &str) -> [(&str, String); 3] {
    [
        ("eager", "before lazy mmap".to_string()),
        ("mainline", "7.3 as merged".to_string()),
        (head, "with this series".to_string()),
    ]
}

/// The record's figures for the cells, one thread: guest instructions in
/// thousands and user page faults per mmap(), access and munmap(), for
/// each kernel of `columns`.
pub fn bench_table(record: &BenchRecord, head: &str) -> Result<String> {
    let cols = columns(head);
    let mut out = format!("{:<30}", "");
    for (_, title) in &cols {
        out += &format!("{title:>22}");
    }
    out.push('\n');
    for &(label, pages) in CELLS {
        let row_label = format!("{label}, {}", size(pages));
        out += &format!("{row_label:<30}");
        for (kernel, _) in &cols {
            let row = cell(record, kernel, label, pages)?;
            let figure = format!(
                "{:.1}k / {}",
                row.instructions / 1000.0,
                row.user_faults.round()
            );
            out += &format!("{figure:>22}");
        }
        out.push('\n');
    }
    out += &format!(
        "\nEach cell: guest instructions (thousands) / user page faults for one\n\
         mmap(), the access and munmap() of a BPF_F_MMAPABLE array map, one\n\
         thread, the median of {} boots under QEMU TCG with -icount (exact\n\
         instruction counts; boots agree within 0.2%). \"before lazy mmap\" is\n\
         7.3 with f5b57e9e9cfd reverted.\n",
        record.boots
    );
    Ok(out)
}

/// The record's row of `kernel` for the pattern `label` at `pages`, one
/// thread.
pub fn cell<'a>(
    record: &'a BenchRecord,
    kernel: &str,
    label: &str,
    pages: u64,
) -> Result<&'a RecordRow> {
    let scenario = PATTERNS
        .iter()
        .find(|p| p.label == label)
        .with_context(|| format!("no bench pattern is labelled {label:?}"))?
        .scenario
        .name();
    record
        .kernels
        .get(kernel)
        .and_then(|rows| {
            rows.iter()
                .find(|r| r.scenario == scenario && r.pages == pages && r.threads == 1)
        })
        .with_context(|| {
            format!(
                "the bench record has no {kernel} row for {label} at {pages} pages: \
                 record the bench with every kernel (`cargo xtask bench --record`)"
            )
        })
}

/// A map size in pages, as the table says it.
fn size(pages: u64) -> String {
    let kib = pages * 4;
    match kib {
        k if k >= 1024 => format!("{} MiB", k / 1024),
        k => format!("{k} KiB"),
    }
}

/// `letter` (git format-patch's cover letter) with `cover`'s subject and
/// body in place of its two placeholders.
pub fn into_letter(letter: &str, cover: &Cover) -> Result<String> {
    const SUBJECT: &str = "*** SUBJECT HERE ***";
    const BLURB: &str = "*** BLURB HERE ***";
    if !letter.contains(SUBJECT) || !letter.contains(BLURB) {
        bail!("git format-patch's cover letter lacks its placeholders: {SUBJECT} and {BLURB}");
    }
    Ok(letter
        .replacen(SUBJECT, &cover.subject, 1)
        .replacen(BLURB, cover.body.trim_end(), 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEMPLATE_TEXT: &str = "# a comment\nbpf: Fewer faults\nCc: linux-mm@kvack.org\n\nWhy.\n\n@BENCH_TABLE@\n\n@CHANGELOG@\n";

    #[test]
    fn the_template_takes_the_table_and_the_changes() {
        let c = fill(TEMPLATE_TEXT, Some("TABLE\n"), "v2:\n - x\n").unwrap();
        assert_eq!(c.subject, "bpf: Fewer faults");
        assert_eq!(c.cc, ["linux-mm@kvack.org"]);
        assert_eq!(c.prefix, None);
        let rfc = fill("s\nPrefix: RFC PATCH bpf-next\n\nWhy.\n", None, "").unwrap();
        assert_eq!(rfc.prefix.as_deref(), Some("RFC PATCH bpf-next"));
        assert_eq!(c.body, "Why.\n\nTABLE\n\nv2:\n - x\n");
        let no_mark = fill("s\n\nbody\n@CHANGELOG@\n", Some(""), "").unwrap_err();
        assert!(no_mark.to_string().contains("@BENCH_TABLE@"), "{no_mark}");
        let theirs = fill("s\n\nbody\n@BENCH_TABLE@\n", None, "").unwrap_err();
        assert!(theirs.to_string().contains("own series"), "{theirs}");
        let plain = fill("s\n\nJust why.\n", None, "").unwrap();
        assert_eq!(plain.body, "Just why.\n");
        let no_changes = fill("s\n\nWhy.\n", None, "v2:\n - x").unwrap_err();
        assert!(
            no_changes.to_string().contains("@CHANGELOG@"),
            "{no_changes}"
        );
        let stray = fill("s\nTo: x\n\n@BENCH_TABLE@ @CHANGELOG@", Some(""), "").unwrap_err();
        assert!(
            stray.to_string().contains("only `Cc:` and `Prefix:`"),
            "{stray}"
        );
    }

    #[test]
    fn a_version_carries_its_changes_and_a_later_one_needs_its_own() {
        let log = "# comment\nv3:\n - c\n\nv2:\n - b\n";
        assert_eq!(newest_version(log), Some(3));
        assert_eq!(newest_version("# none yet\n"), None);
        assert_eq!(changes_for(log, 1).unwrap(), "");
        assert_eq!(changes_for(log, 2).unwrap(), "v2:\n - b");
        assert_eq!(changes_for(log, 3).unwrap(), "v3:\n - c\n\nv2:\n - b");
        // Newest first, whatever order the file keeps them in.
        let oldest_first = "v2:\n - b\nv3:\n - c\n";
        assert_eq!(
            changes_for(oldest_first, 3).unwrap(),
            "v3:\n - c\n\nv2:\n - b"
        );
        let missing = changes_for(log, 4).unwrap_err().to_string();
        assert!(
            missing.contains("no `v4:` section") && missing.contains("since v3"),
            "{missing}"
        );
    }

    /// Every figure of the table is the record's, cell for cell: the
    /// table of the real record parsed back.
    #[test]
    fn every_cell_of_the_table_is_the_records() {
        let record = crate::bench::recorded().unwrap();
        let table = bench_table(&record, "adaptive").unwrap();
        let rows: Vec<&str> = table.lines().skip(1).take(CELLS.len()).collect();
        for (line, &(label, pages)) in rows.iter().zip(CELLS) {
            assert!(
                line.starts_with(&format!("{label}, {}", size(pages))),
                "{line}"
            );
            let figures: Vec<&str> = line[30..].split_whitespace().collect();
            // "1517.6k / 38" three times.
            assert_eq!(figures.len(), 9, "{line}");
            for (i, kernel) in ["eager", "mainline", "adaptive"].iter().enumerate() {
                let row = cell(&record, kernel, label, pages).unwrap();
                let k: f64 = figures[3 * i].trim_end_matches('k').parse().unwrap();
                let faults: f64 = figures[3 * i + 2].parse().unwrap();
                assert!(
                    (k - row.instructions / 1000.0).abs() <= 0.05,
                    "{kernel} {line}"
                );
                assert_eq!(faults, row.user_faults.round(), "{kernel} {line}");
            }
        }
        let median = format!("the median of {} boots", record.boots);
        assert!(table.contains(&median), "{table}");
    }

    #[test]
    fn the_letter_takes_the_subject_and_the_body() {
        let cover = Cover {
            subject: "bpf: S".into(),
            cc: vec![],
            prefix: None,
            body: "B\n".into(),
        };
        let letter = "Subject: [PATCH 0/2] *** SUBJECT HERE ***\n\n*** BLURB HERE ***\n\nA (1):\n";
        let filled = into_letter(letter, &cover).unwrap();
        assert_eq!(filled, "Subject: [PATCH 0/2] bpf: S\n\nB\n\nA (1):\n");
        assert!(into_letter("no placeholders", &cover).is_err());
    }
}
