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
    let n = selftests::runner::run_host(&filters, None).expect("host mode");
    println!(
        "\ntest result: ok. 0 passed; 0 failed; {n} ignored; 0 measured; {} filtered out; finished in 0.00s\n",
        total - n
    );
}
