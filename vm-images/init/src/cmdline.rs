//! From the parsed kernel command line (`guest_common::cmdline`) to the
//! program /init starts.

use guest_common::cmdline::GuestCommand;
use guest_common::protocol::Program;
use guest_common::request::{Share, HOST_ROOT};

/// The program's path: /bin/<name> in the initramfs, or in the host's
/// build directory when the guest binaries come from the share.
pub fn program_path(program: Program, share: Option<&Share>) -> String {
    match share.and_then(|s| s.bindir.as_deref()) {
        Some(dir) => format!("{HOST_ROOT}{dir}/{}", program.name()),
        None => format!("/bin/{}", program.name()),
    }
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
    use guest_common::request::ShareKind;

    #[test]
    fn argv_and_paths() {
        let c = GuestCommand {
            program: Program::Bench,
            kernel: "mainline".into(),
            args: vec!["--quick".into(), "--iterations".into(), "5".into()],
            inject: None,
        };
        assert_eq!(
            program_args(&c, "/dev/ttyS1"),
            [
                "--kernel",
                "mainline",
                "--results",
                "/dev/ttyS1",
                "--quick",
                "--iterations",
                "5"
            ]
        );
        assert_eq!(program_path(Program::Selftests, None), "/bin/selftests");
        assert_eq!(program_path(Program::Bench, None), "/bin/bench");
        let share = Share {
            kind: ShareKind::Virtiofs,
            project: "/p".into(),
            bindir: Some("/p/target/guest/release".into()),
        };
        assert_eq!(
            program_path(Program::Selftests, Some(&share)),
            "/host/p/target/guest/release/selftests"
        );
    }
}
