//! `cargo test` on the host: the guest tests cannot run here (they need
//! the base or patched kernel), so the runner reports each as skipped in
//! host mode and we close with a libtest-style summary line.

/// libtest options that take a value (so it is not mistaken for a filter).
const VALUE_FLAGS: &[&str] = &[
    "--test-threads",
    "--format",
    "--color",
    "--skip",
    "--logfile",
    "-Z",
    "--shuffle-seed",
    "--report-time",
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut filters = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if VALUE_FLAGS.contains(&a.as_str()) {
            it.next();
        } else if !a.starts_with('-') {
            filters.push(a.clone());
        }
    }
    if args.iter().any(|a| a == "--list") {
        for t in selftests::runner::selected(&filters) {
            println!("{}: test", t.name);
        }
        return;
    }
    let total = selftests::tests::ALL.len();
    let transcript = std::env::temp_dir().join(format!("selftests-host-{}", std::process::id()));
    let n = selftests::runner::run_host(&filters, transcript.to_str()).expect("host mode");
    let text = std::fs::read_to_string(&transcript).expect("reading the host transcript");
    let _ = std::fs::remove_file(&transcript);
    let names: Vec<&str> = selftests::runner::selected(&filters)
        .iter()
        .map(|t| t.name)
        .collect();
    if let Err(why) = check_transcript(&text, &names) {
        eprintln!("host mode wrote a transcript the harness would refuse: {why}");
        std::process::exit(1);
    }
    println!(
        "\ntest result: ok. 0 passed; 0 failed; {n} ignored; 0 measured; {} filtered out; finished in 0.00s\n",
        total - n
    );
}

/// What host mode wrote, read as the harness reads the channel: one plan
/// naming the selected tests in order, then each one skipped, once.
fn check_transcript(text: &str, names: &[&str]) -> Result<(), String> {
    use guest_common::protocol::{Line, ResultWord};
    let lines: Vec<Line> = text
        .lines()
        .map(|l| l.parse::<Line>().map_err(|e| format!("{l:?}: {e}")))
        .collect::<Result<_, _>>()?;
    let Some((
        Line::Plan {
            count,
            names: planned,
        },
        results,
    )) = lines.split_first()
    else {
        return Err("it does not start with a plan".into());
    };
    if *count != names.len() || planned != names {
        return Err(format!(
            "it plans {planned:?}, the filters select {names:?}"
        ));
    }
    let skipped: Vec<&str> = results
        .iter()
        .filter_map(|l| match l {
            Line::Result(r) if r.word == ResultWord::Skip => Some(r.name.as_str()),
            _ => None,
        })
        .collect();
    if skipped != names || results.len() != names.len() {
        return Err(format!("it skips {skipped:?} in {} lines", results.len()));
    }
    Ok(())
}
