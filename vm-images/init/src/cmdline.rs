//! From the parsed kernel command line (`guest_common::cmdline`) to the
//! program /init starts.

use guest_common::cmdline::GuestCommand;
use guest_common::protocol::Program;

/// The program's path in the initramfs: /bin/<name>.
pub fn program_path(program: Program) -> String {
    format!("/bin/{}", program.name())
}

/// The full argv (without argv[0]) for the program.
pub fn program_args(command: &GuestCommand, results: &str) -> Vec<String> {
    let mut argv = vec![
        "--kernel".to_string(),
        command.kernel.clone(),
        "--results".to_string(),
        results.to_string(),
    ];
    argv.extend(command.args.iter().cloned());
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_and_paths() {
        let c = GuestCommand {
            program: Program::Bench,
            kernel: "patched".into(),
            args: vec!["--quick".into(), "--iterations".into(), "5".into()],
            inject: None,
        };
        assert_eq!(
            program_args(&c, "/dev/ttyS1"),
            [
                "--kernel",
                "patched",
                "--results",
                "/dev/ttyS1",
                "--quick",
                "--iterations",
                "5"
            ]
        );
        assert_eq!(program_path(Program::Selftests), "/bin/selftests");
        assert_eq!(program_path(Program::Bench), "/bin/bench");
    }
}
