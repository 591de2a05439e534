//! Guest entry point; see `selftests::runner` for the command line.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(selftests::runner::main_with_args(&args));
}
