//! The runner's command line (no clap in the guest: a few flags by hand).

use super::Kernel;

pub const USAGE: &str =
    "usage: selftests [--kernel eager|mainline|direct|prefault|adaptive] [--results PATH] [--list]
                 [--fail-fast] [--max-failures N] [--timeout-scale N]
                 [--inject crash|freeze|stall:TEST] [FILTER...]
  --kernel K         run the tests (guest mode) on kernel K; without it every
                     selected test is reported as skipped (host mode)
  --results PATH     also write BPFLAB- result lines to PATH (e.g. /dev/ttyS1)
  --list             print the selected test names and exit
  --fail-fast        stop after the first failure (the rest: not run)
  --max-failures N   stop after N failures (the rest: not run)
  --timeout-scale N  multiply every per-test timeout by N (slow kernels)
  --inject W:TEST    harness self-test when TEST starts: crash the kernel
                     (crash), wedge the runner (freeze), or hang the test (stall)
  FILTER             run only tests whose name contains one of the substrings";

pub use guest_common::protocol::TestInject as InjectKind;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Injection {
    pub kind: InjectKind,
    pub test: String,
}

#[derive(Debug, Default)]
pub struct Options {
    pub kernel: Option<Kernel>,
    pub results: Option<String>,
    pub list: bool,
    pub help: bool,
    /// Stop after this many failures; None runs everything.
    pub max_failures: Option<usize>,
    pub timeout_scale: u32,
    pub inject: Option<Injection>,
    pub filters: Vec<String>,
}

fn parse_inject(v: &str) -> Result<Injection, String> {
    let (kind, test) = InjectKind::parse_spec(v)?;
    Ok(Injection { kind, test })
}

fn parse_count(flag: &str, v: &str) -> Result<u32, String> {
    match v.parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{flag} {v:?}: want a whole number above 0")),
    }
}

pub fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        timeout_scale: 1,
        ..Options::default()
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or(format!("{name} needs a value"))
        };
        match flag {
            "--kernel" => {
                let name = value("--kernel")?;
                o.kernel = Some(Kernel::from_name(&name).ok_or(format!(
                    "unknown kernel {name:?} (want eager, mainline, direct, prefault or adaptive)"
                ))?)
            }
            "--results" => o.results = Some(value("--results")?),
            "--list" => o.list = true,
            "--fail-fast" => o.max_failures = Some(1),
            "--max-failures" => {
                o.max_failures = Some(parse_count(flag, &value(flag)?)? as usize);
            }
            "--timeout-scale" => o.timeout_scale = parse_count(flag, &value(flag)?)?,
            "--inject" => o.inject = Some(parse_inject(&value(flag)?)?),
            "-h" | "--help" => o.help = true,
            f if f.starts_with('-') => return Err(format!("unknown option {f}")),
            _ => o.filters.push(a.clone()),
        }
    }
    Ok(o)
}

/// A command line from string literals, for tests.
#[cfg(test)]
pub(super) fn args(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn option_parsing() {
        let o = parse_args(&args(&[
            "--kernel",
            "mainline",
            "--results=/dev/ttyS1",
            "t01",
            "t14",
        ]))
        .unwrap();
        assert_eq!(o.kernel, Some(Kernel::Mainline));
        assert_eq!(o.results.as_deref(), Some("/dev/ttyS1"));
        assert_eq!(o.filters, vec!["t01", "t14"]);
        assert_eq!((o.list, o.max_failures, o.timeout_scale), (false, None, 1));
        assert_eq!(
            parse_args(&args(&["--kernel=eager", "--list"]))
                .unwrap()
                .kernel,
            Some(Kernel::Eager)
        );
        assert!(parse_args(&args(&["--kernel", "other"])).is_err());
        assert!(parse_args(&args(&["--kernel"])).is_err());
        assert!(parse_args(&args(&["--bogus"])).is_err());
    }

    #[test]
    fn stopping_and_scaling() {
        let o = parse_args(&args(&["--fail-fast", "--timeout-scale", "3"])).unwrap();
        assert_eq!((o.max_failures, o.timeout_scale), (Some(1), 3));
        let o = parse_args(&args(&["--max-failures=4"])).unwrap();
        assert_eq!(o.max_failures, Some(4));
        assert!(parse_args(&args(&["--max-failures", "0"])).is_err());
        assert!(parse_args(&args(&["--timeout-scale", "x"])).is_err());
    }

    #[test]
    fn injections() {
        let o = parse_args(&args(&["--inject", "crash:t11_split_middle_page"])).unwrap();
        assert_eq!(
            o.inject,
            Some(Injection {
                kind: InjectKind::Crash,
                test: "t11_split_middle_page".into()
            })
        );
        assert_eq!(
            parse_args(&args(&["--inject=stall:t03"]))
                .unwrap()
                .inject
                .unwrap()
                .kind,
            InjectKind::Stall
        );
        assert!(parse_args(&args(&["--inject", "boom:t03"])).is_err());
        assert!(parse_args(&args(&["--inject", "crash"])).is_err());
        assert!(parse_args(&args(&["--inject", "crash:"])).is_err());
    }
}
