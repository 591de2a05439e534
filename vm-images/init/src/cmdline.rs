//! Parsing of the `bpflab.*` keys on the kernel command line (pure code).

use guest_common::protocol::{param, Program as P};
pub use guest_common::protocol::{Inject, Program};

/// The program's path in the initramfs: /bin/<name>.
pub fn program_path(program: Program) -> String {
    format!("/bin/{}", program.name())
}

/// Kernel name used when the command line does not carry `bpflab.kernel`.
pub const DEFAULT_KERNEL: &str = "unknown";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub program: Program,
    pub kernel: String,
    /// Extra arguments appended after the fixed ones.
    pub args: Vec<String>,
    pub inject: Option<Inject>,
    /// Non-fatal problems (unknown keys, missing kernel name) to print.
    pub warnings: Vec<String>,
}

/// Parses /proc/cmdline. Unknown `bpflab.*` keys become warnings; a known key
/// with an invalid value is an error, because it means the harness and the
/// guest disagree and any result would be meaningless.
pub fn parse(cmdline: &str) -> Result<Config, String> {
    let mut program = P::Selftests;
    let mut kernel: Option<String> = None;
    let mut args = Vec::new();
    let mut inject = None;
    let mut warnings = Vec::new();

    for word in cmdline.split_whitespace() {
        let Some(rest) = word.strip_prefix(param::PREFIX) else {
            continue;
        };
        let (key, value) = match rest.split_once('=') {
            Some((k, v)) => (k, unquote(v)),
            None => (rest, ""),
        };
        match key {
            "run" => {
                program = Program::parse(value)
                    .ok_or(format!("bad {}={value:?} (selftests|bench)", param::RUN))?
            }
            "kernel" if !value.is_empty() => kernel = Some(value.to_string()),
            "kernel" => return Err("empty bpflab.kernel=".to_string()),
            "args" => args = split_args(value),
            "inject" => {
                inject = Some(Inject::parse(value).ok_or(format!(
                    "bad {}={value:?} (panic|warn|hang|flood)",
                    param::INJECT
                ))?)
            }
            _ => warnings.push(format!("ignoring unknown key bpflab.{key}")),
        }
    }

    let kernel = kernel.unwrap_or_else(|| {
        warnings.push(format!("no bpflab.kernel=, using {DEFAULT_KERNEL:?}"));
        DEFAULT_KERNEL.to_string()
    });
    Ok(Config {
        program,
        kernel,
        args,
        inject,
        warnings,
    })
}

/// `a,b,,c` -> [a, b, c]: empty items are dropped so `bpflab.args=` is valid.
fn split_args(value: &str) -> Vec<String> {
    value
        .split(',')
        .filter(|a| !a.is_empty())
        .map(str::to_string)
        .collect()
}

/// The kernel keeps double quotes around a value in /proc/cmdline.
fn unquote(value: &str) -> &str {
    value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value)
}

/// The full argv (without argv[0]) for the program.
pub fn program_args(config: &Config, results: &str) -> Vec<String> {
    let mut argv = vec![
        "--kernel".to_string(),
        config.kernel.clone(),
        "--results".to_string(),
        results.to_string(),
    ];
    argv.extend(config.args.iter().cloned());
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let c = parse("console=ttyS0 quiet\n").unwrap();
        assert_eq!(c.program, Program::Selftests);
        assert_eq!(c.kernel, DEFAULT_KERNEL);
        assert!(c.args.is_empty());
        assert_eq!(c.inject, None);
        assert_eq!(c.warnings.len(), 1, "missing kernel warns");
    }

    #[test]
    fn all_keys() {
        let c = parse(
            "console=ttyS0 bpflab.run=bench bpflab.kernel=patched \
             bpflab.args=--quick,--iterations,5 bpflab.inject=warn panic=-1\n",
        )
        .unwrap();
        assert_eq!(c.program, Program::Bench);
        assert_eq!(c.kernel, "patched");
        assert_eq!(c.args, ["--quick", "--iterations", "5"]);
        assert_eq!(c.inject, Some(Inject::Warn));
        assert!(c.warnings.is_empty());
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
    }

    #[test]
    fn quoted_and_empty_values() {
        let c = parse("bpflab.kernel=\"base\" bpflab.args= bpflab.args=,a,,b,").unwrap();
        assert_eq!(c.kernel, "base");
        assert_eq!(c.args, ["a", "b"], "last bpflab.args wins, empties dropped");
        let c = parse("bpflab.kernel=k bpflab.args=").unwrap();
        assert!(c.args.is_empty());
    }

    #[test]
    fn unknown_key_warns() {
        let c = parse("bpflab.kernel=k bpflab.colour=red bpflab.flag").unwrap();
        assert_eq!(
            c.warnings,
            [
                "ignoring unknown key bpflab.colour",
                "ignoring unknown key bpflab.flag"
            ]
        );
    }

    #[test]
    fn bad_values_are_errors() {
        assert!(parse("bpflab.run=everything").is_err());
        assert!(parse("bpflab.inject=oops").is_err());
        assert!(parse("bpflab.kernel=").is_err());
    }

    #[test]
    fn each_injection() {
        for (word, want) in [
            ("panic", Inject::Panic),
            ("warn", Inject::Warn),
            ("hang", Inject::Hang),
            ("flood", Inject::Flood),
        ] {
            let c = parse(&format!("bpflab.kernel=k bpflab.inject={word}")).unwrap();
            assert_eq!(c.inject, Some(want));
        }
    }

    #[test]
    fn program_paths() {
        assert_eq!(program_path(Program::Selftests), "/bin/selftests");
        assert_eq!(program_path(Program::Bench), "/bin/bench");
    }
}
