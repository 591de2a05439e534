//! What the guest runs, as `bpflab.*` words on the kernel command line:
//! written by the host harness ([`GuestCommand::words`]) and read back by
//! /init ([`parse`]), so both sides use one definition (pure code).

use crate::protocol::{param, Inject, Program};

/// Kernel name used when the command line does not carry `bpflab.kernel`.
pub const DEFAULT_KERNEL: &str = "unknown";

/// The program /init runs, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestCommand {
    pub program: Program,
    /// Which kernel the guest is told it runs on ("eager", "mainline", ...):
    /// which side of the plan's P/U cases the tests assert.
    pub kernel: String,
    /// Extra arguments for the program (no commas or spaces in them).
    pub args: Vec<String>,
    /// Harness self-tests only: a failure /init provokes.
    pub inject: Option<Inject>,
}

impl GuestCommand {
    /// The `bpflab.*` words for the kernel command line.
    pub fn words(&self) -> Vec<String> {
        let mut words = vec![
            format!("{}={}", param::RUN, self.program.name()),
            format!("{}={}", param::KERNEL, self.kernel),
        ];
        if !self.args.is_empty() {
            words.push(format!("{}={}", param::ARGS, self.args.join(",")));
        }
        if let Some(inject) = self.inject {
            words.push(format!("{}={}", param::INJECT, inject.name()));
        }
        words
    }
}

/// A parsed command line, and the non-fatal problems (unknown keys, a
/// missing kernel name) /init prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub command: GuestCommand,
    /// `bpflab.net=user`: configure the network from QEMU's DHCP.
    pub network: bool,
    pub warnings: Vec<String>,
}

/// Parses /proc/cmdline. Unknown `bpflab.*` keys become warnings; a known key
/// with an invalid value is an error, because it means the harness and the
/// guest disagree and any result would be meaningless.
pub fn parse(cmdline: &str) -> Result<Parsed, String> {
    let mut program = Program::Selftests;
    let mut kernel: Option<String> = None;
    let mut args = Vec::new();
    let mut inject = None;
    let mut network = false;
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
                program = Program::parse(value).ok_or(format!(
                    "bad {}={value:?} (selftests|bench|command)",
                    param::RUN
                ))?
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
            "net" if value == param::NET_USER => network = true,
            "net" => {
                return Err(format!(
                    "bad {}={value:?} ({})",
                    param::NET,
                    param::NET_USER
                ))
            }
            _ => warnings.push(format!("ignoring unknown key bpflab.{key}")),
        }
    }

    let kernel = kernel.unwrap_or_else(|| {
        warnings.push(format!("no bpflab.kernel=, using {DEFAULT_KERNEL:?}"));
        DEFAULT_KERNEL.to_string()
    });
    Ok(Parsed {
        command: GuestCommand {
            program,
            kernel,
            args,
            inject,
        },
        network,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(line: &str) -> GuestCommand {
        parse(line).unwrap().command
    }

    #[test]
    fn defaults() {
        let p = parse("console=ttyS0 quiet\n").unwrap();
        let c = &p.command;
        assert_eq!(c.program, Program::Selftests);
        assert_eq!(c.kernel, DEFAULT_KERNEL);
        assert!(c.args.is_empty());
        assert_eq!(c.inject, None);
        assert_eq!(p.warnings.len(), 1, "missing kernel warns");
    }

    #[test]
    fn what_the_host_writes_the_guest_reads() {
        let c = GuestCommand {
            program: Program::Selftests,
            kernel: "mainline".into(),
            args: vec!["--max-failures=1".into(), "t14".into()],
            inject: Some(Inject::Hang),
        };
        assert_eq!(
            c.words(),
            [
                "bpflab.run=selftests",
                "bpflab.kernel=mainline",
                "bpflab.args=--max-failures=1,t14",
                "bpflab.inject=hang"
            ]
        );
        let line = format!("console=ttyS0 {} panic=-1", c.words().join(" "));
        let p = parse(&line).unwrap();
        assert_eq!(p.command, c);
        assert!(p.warnings.is_empty());
    }

    #[test]
    fn all_keys() {
        let p = parse(
            "console=ttyS0 bpflab.run=bench bpflab.kernel=mainline \
             bpflab.args=--quick,--iterations,5 bpflab.inject=warn panic=-1\n",
        )
        .unwrap();
        let c = &p.command;
        assert_eq!(c.program, Program::Bench);
        assert_eq!(c.kernel, "mainline");
        assert_eq!(c.args, ["--quick", "--iterations", "5"]);
        assert_eq!(c.inject, Some(Inject::Warn));
        assert!(p.warnings.is_empty());
    }

    #[test]
    fn quoted_and_empty_values() {
        let c = cmd("bpflab.kernel=\"eager\" bpflab.args= bpflab.args=,a,,b,");
        assert_eq!(c.kernel, "eager");
        assert_eq!(c.args, ["a", "b"], "last bpflab.args wins, empties dropped");
        let c = cmd("bpflab.kernel=k bpflab.args=");
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
    fn the_network_is_asked_for_by_its_own_key() {
        assert!(!parse("bpflab.kernel=k").unwrap().network);
        let p = parse("bpflab.kernel=k bpflab.net=user").unwrap();
        assert!(p.network);
        assert!(p.warnings.is_empty());
        assert!(parse("bpflab.kernel=k bpflab.net=bridge").is_err());
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
            let c = cmd(&format!("bpflab.kernel=k bpflab.inject={word}"));
            assert_eq!(c.inject, Some(want));
        }
    }
}
