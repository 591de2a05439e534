//! Parsing of the `bpflab.*` keys on the kernel command line (pure code).

/// Which guest program /init runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    Selftests,
    Bench,
}

impl Program {
    /// Name of the program, which is also its file name under /bin.
    pub fn name(self) -> &'static str {
        match self {
            Program::Selftests => "selftests",
            Program::Bench => "bench",
        }
    }

    pub fn path(self) -> String {
        format!("/bin/{}", self.name())
    }
}

/// A deliberate failure the harness asks for, to test its own failure paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inject {
    /// Crash the kernel through sysrq before running the program.
    Panic,
    /// Provoke a kernel WARNING through lkdtm, then run the program.
    Warn,
    /// Run the program, then never write a verdict.
    Hang,
    /// Run the program, then write more to the console than the host
    /// keeps: the host must bound its log and still report.
    Flood,
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
    let mut program = Program::Selftests;
    let mut kernel: Option<String> = None;
    let mut args = Vec::new();
    let mut inject = None;
    let mut warnings = Vec::new();

    for word in cmdline.split_whitespace() {
        let Some(rest) = word.strip_prefix("bpflab.") else {
            continue;
        };
        let (key, value) = match rest.split_once('=') {
            Some((k, v)) => (k, unquote(v)),
            None => (rest, ""),
        };
        match key {
            "run" => {
                program = match value {
                    "selftests" => Program::Selftests,
                    "bench" => Program::Bench,
                    _ => return Err(format!("bad bpflab.run={value:?} (selftests|bench)")),
                }
            }
            "kernel" if !value.is_empty() => kernel = Some(value.to_string()),
            "kernel" => return Err("empty bpflab.kernel=".to_string()),
            "args" => args = split_args(value),
            "inject" => {
                inject = Some(match value {
                    "panic" => Inject::Panic,
                    "warn" => Inject::Warn,
                    "hang" => Inject::Hang,
                    "flood" => Inject::Flood,
                    _ => {
                        return Err(format!(
                            "bad bpflab.inject={value:?} (panic|warn|hang|flood)"
                        ))
                    }
                })
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
        assert_eq!(Program::Selftests.path(), "/bin/selftests");
        assert_eq!(Program::Bench.path(), "/bin/bench");
    }
}
