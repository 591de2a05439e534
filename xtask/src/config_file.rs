//! `bpflab.toml`: the developer's habitual flags. Each key stands for a
//! flag that several subcommands share, and is that flag's id in cli.rs
//! (its field's name, or the `id` a group of one flag gives it); its
//! value is checked by the flag's own parser, and its words go into the
//! command line right after the subcommand, for every subcommand that
//! takes the flag and was not given it, so the command line always wins.
//! An unknown key, or a value the flag does not take, is an error that
//! names it.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::ops::Range;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, CommandFactory};
use toml::{Spanned, Value};

use crate::cli::Cli;

/// The file, at the project root; `$BPFLAB_CONFIG` names another, or
/// none when empty (`ci` runs its steps so).
pub const FILE: &str = "bpflab.toml";
pub const CONFIG_ENV: &str = "BPFLAB_CONFIG";

/// The keys, in the order their words go into the command line. A key is
/// the id of a flag several subcommands take from one definition (the
/// unit test below holds this list to cli.rs): `kernels` is the booting
/// commands' `--kernel` (run's takes one kernel, build-kernel's no
/// bzImage), `share` is run's and kselftest's `--share` (vmtest's turns
/// sharing on, which a default should not), `cache_cap` is ci's and
/// cache's.
pub const KEYS: &[&str] = &[
    "kernel_src",
    "source",
    "cache_dir",
    "patches",
    "base",
    "head",
    "variants",
    "jobs",
    "cache_cap",
    "kernels",
    "kernel_config",
    "accel",
    "cpus",
    "memory",
    "share",
    "append",
    "qemu_args",
    "config",
    "network",
    "gdb",
    "vms",
    "llvm",
];

/// The keys that are set, each with its flag's words, in `KEYS`' order.
#[derive(Debug, Default, PartialEq)]
pub struct ConfigFile {
    settings: Vec<(&'static str, Vec<String>)>,
}

impl ConfigFile {
    /// Parses the file at `path`; its relative paths are taken from the
    /// file's directory, wherever the command runs.
    pub fn parse(text: &str, path: &Path) -> Result<ConfigFile> {
        let fail = |span: Option<Range<usize>>, what: String| {
            let line = span
                .map(|s| format!(" line {}", text[..s.start].matches('\n').count() + 1))
                .unwrap_or_default();
            anyhow::anyhow!("{}{line}: {what} (fix or remove it)", path.display())
        };
        let table: BTreeMap<Spanned<String>, Spanned<Value>> = toml::from_str(text)
            .map_err(|e| fail(e.span(), e.message().trim().replace('\n', " ")))?;
        let mut entries: Vec<_> = table.into_iter().collect();
        entries.sort_by_key(|(key, _)| key.span().start);
        let mut cli = Cli::command();
        cli.build();
        let dir = path.parent().unwrap_or(Path::new(""));
        let mut settings = Vec::new();
        for (key, value) in entries {
            let Some(name) = KEYS.iter().copied().find(|k| k == key.get_ref()) else {
                let known: Vec<String> = KEYS.iter().map(|k| format!("`{k}`")).collect();
                let what = format!(
                    "unknown field `{}`, expected one of {}",
                    key.get_ref(),
                    known.join(", ")
                );
                return Err(fail(Some(key.span()), what));
            };
            let flag = shared_flag(&cli, name)?;
            let words = words(flag, value.get_ref(), dir)
                .map_err(|what| fail(Some(key.span()), format!("{name}: {what}")))?;
            settings.extend(words.map(|w| (name, w)));
        }
        settings.sort_by_key(|(name, _)| KEYS.iter().position(|k| k == name));
        Ok(ConfigFile { settings })
    }
}

/// The flag a key stands for, from the first subcommand that takes it.
fn shared_flag<'c>(cli: &'c clap::Command, key: &str) -> Result<&'c Arg> {
    cli.get_subcommands()
        .flat_map(|sub| sub.get_arguments())
        .find(|arg| arg.get_id() == key)
        .with_context(|| format!("bpflab.toml's key {key} is no subcommand's flag"))
}

/// The words that give `flag` the key's `value` (none for `false`), its
/// relative paths taken from `dir`; checked by parsing them as clap
/// would, or what is wrong with them.
fn words(flag: &Arg, value: &Value, dir: &Path) -> Result<Option<Vec<String>>, String> {
    let can_stand_alone = flag.get_num_args().is_some_and(|n| n.min_values() == 0);
    let values = match value {
        Value::Boolean(false) if can_stand_alone => return Ok(None),
        Value::Boolean(true) if can_stand_alone => Vec::new(),
        Value::Array(items) => items.iter().map(scalar).collect::<Result<_, _>>()?,
        other => vec![scalar(other)?],
    };
    let is_path = flag.get_value_parser().type_id() == clap::value_parser!(PathBuf).type_id();
    let values: Vec<String> = if is_path {
        values
            .iter()
            .map(|v| dir.join(v).display().to_string())
            .collect()
    } else {
        values
    };
    let long = format!("--{}", flag.get_long().unwrap_or_default());
    let words = match (flag.get_value_delimiter(), flag.get_action()) {
        _ if values.is_empty() => vec![long],
        (Some(delimiter), _) => vec![long, values.join(&delimiter.to_string())],
        (None, ArgAction::Append) => values.iter().map(|v| format!("{long}={v}")).collect(),
        (None, _) if values.len() == 1 => vec![long, values[0].clone()],
        (None, _) => return Err(format!("{long} takes one value, not a list")),
    };
    let check = clap::Command::new(FILE)
        .no_binary_name(true)
        .arg(flag.clone());
    check
        .try_get_matches_from(&words)
        .map_err(|e| clap_says(&e))?;
    Ok(Some(words))
}

/// A value of a list or of a key, as a word: a string or a number.
fn scalar(value: &Value) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Integer(n) => Ok(n.to_string()),
        other => Err(format!(
            "invalid type: {}, expected a string or a number",
            other.type_str()
        )),
    }
}

/// What clap's error says, on one line, without its usage and advice.
fn clap_says(err: &clap::Error) -> String {
    err.to_string()
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty() && !l.starts_with("For more information") && !l.starts_with("Usage:")
        })
        .map(|l| l.trim_start_matches("error: "))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Which file to read: `$BPFLAB_CONFIG` if set (none when empty), else
/// bpflab.toml in the current directory (a developer's kernel tree),
/// else at the project root, whichever is there first.
fn config_path(env: Option<OsString>, cwd: Option<&Path>, root: &Path) -> Option<PathBuf> {
    match env {
        Some(v) if v.is_empty() => None,
        Some(v) => Some(PathBuf::from(v)),
        None => cwd
            .into_iter()
            .chain([root])
            .map(|dir| dir.join(FILE))
            .find(|p| p.exists()),
    }
}

/// The process's arguments with the config file's defaults put in.
pub fn arguments(args: Vec<OsString>) -> Result<Vec<OsString>> {
    let cwd = std::env::current_dir().ok();
    let env = std::env::var_os(CONFIG_ENV);
    let Some(path) = config_path(env, cwd.as_deref(), &crate::project::root()) else {
        return Ok(args);
    };
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    with_defaults(&ConfigFile::parse(&text, &path)?, args)
}

/// `args` with the words of every flag of `config` that their subcommand
/// takes and was not given. Arguments clap cannot parse are left as they
/// are, for clap to report.
pub fn with_defaults(config: &ConfigFile, args: Vec<OsString>) -> Result<Vec<OsString>> {
    let Ok(matches) = Cli::command().try_get_matches_from(&args) else {
        return Ok(args);
    };
    let Some((name, given)) = matches.subcommand() else {
        return Ok(args);
    };
    let cli = Cli::command();
    let Some(sub) = cli.find_subcommand(name) else {
        bail!("clap matched the subcommand {name}, which it does not have");
    };
    let takes = |id: &str| sub.get_arguments().any(|a| a.get_id().as_str() == id);
    let mut words: Vec<OsString> = Vec::new();
    for (id, flag_words) in &config.settings {
        if !takes(id) || given.value_source(id) == Some(ValueSource::CommandLine) {
            continue;
        }
        words.extend(flag_words.iter().map(OsString::from));
    }
    let at = args
        .iter()
        .position(|a| a == name)
        .map_or(args.len(), |i| i + 1);
    let mut out = args;
    out.splice(at..at, words);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn config(text: &str) -> ConfigFile {
        ConfigFile::parse(text, Path::new("bpflab.toml")).unwrap()
    }

    fn with(text: &str, args: &str) -> String {
        let args = args.split_whitespace().map(OsString::from).collect();
        let out = with_defaults(&config(text), args).unwrap();
        out.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    const HABITS: &str = r#"
kernels = ["base", "adaptive"]
cpus = 2
memory = "6G"
append = ["nokaslr", "loglevel=7"]
qemu_args = ["-device", "virtio-rng-pci"]
share = "9p"
"#;

    #[test]
    fn the_cache_cap_goes_to_ci_and_cache_alone() {
        let cap = "cache_cap = \"20G\"\n";
        assert_eq!(with(cap, "x ci"), "x ci --cache-cap 20G");
        assert_eq!(
            with(cap, "x cache --prune"),
            "x cache --cache-cap 20G --prune"
        );
        assert_eq!(with(cap, "x vmtest"), "x vmtest");
    }

    #[test]
    fn defaults_go_after_the_subcommand_for_the_flags_it_takes() {
        assert_eq!(
            with(HABITS, "x vmtest -- t33"),
            "x vmtest --kernel base,adaptive --cpus 2 --memory 6G --append=nokaslr \
             --append=loglevel=7 --qemu-arg=-device --qemu-arg=virtio-rng-pci -- t33"
        );
        // run takes one kernel and picks its share; check-patches boots nothing.
        assert_eq!(
            with(HABITS, "x run -- true"),
            "x run --cpus 2 --memory 6G --share 9p --append=nokaslr --append=loglevel=7 \
             --qemu-arg=-device --qemu-arg=virtio-rng-pci -- true"
        );
        assert_eq!(with(HABITS, "x check-patches"), "x check-patches");
    }

    #[test]
    fn the_command_line_wins() {
        let out = with(HABITS, "x bench --cpus 4 --kernel patched --append quiet");
        assert!(
            out.starts_with("x bench --memory 6G --qemu-arg=-device"),
            "{out}"
        );
        assert!(
            !out.contains("--cpus 2") && !out.contains("nokaslr"),
            "{out}"
        );
        // And the parsed command has the command line's values.
        let args: Vec<OsString> = out.split_whitespace().map(OsString::from).collect();
        let cli = <Cli as clap::Parser>::try_parse_from(args).unwrap();
        let crate::cli::Command::Bench(b) = cli.command else {
            panic!("not bench");
        };
        assert_eq!(b.vm.kernels, ["patched"]);
        assert_eq!(b.vm.machine.machine().cpus, Some(4));
        assert_eq!(b.vm.machine.machine().memory_mib, Some(6144));
    }

    #[test]
    fn unknown_keys_and_wrong_values_are_named() {
        let err = |text: &str| {
            ConfigFile::parse(text, Path::new("/p/bpflab.toml"))
                .unwrap_err()
                .to_string()
        };
        let e = err("cpus = 2\ncpu = 4\n");
        assert!(
            e.starts_with(
                "/p/bpflab.toml line 2: unknown field `cpu`, expected one of `kernel_src`"
            ),
            "{e}"
        );
        assert!(!e.contains('\n'), "one line: {e}");
        // Each value goes through its flag's own parser.
        for (text, says) in [
            (
                "cpus = \"two\"",
                "line 1: cpus: invalid value 'two' for '--cpus <N>'",
            ),
            (
                "\ncpus = 0",
                "line 2: cpus: invalid value '0' for '--cpus <N>': 0 is not in 1..=64",
            ),
            (
                "memory = \"4T\"",
                "memory: invalid value '4T' for '--memory <SIZE>'",
            ),
            ("accel = \"fast\"", "[possible values: auto, kvm, tcg]"),
            ("cpus = [1, 2]", "cpus: --cpus takes one value, not a list"),
            (
                "network = true",
                "network: invalid type: boolean, expected a string or a number",
            ),
            (
                "append = [{}]",
                "append: invalid type: table, expected a string or a number",
            ),
        ] {
            let e = err(text);
            assert!(e.contains(says) && e.ends_with("(fix or remove it)"), "{e}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
        assert_eq!(config(""), ConfigFile::default());
    }

    #[test]
    fn the_later_keys_reach_their_flags() {
        let text = "network = \"user\"\ngdb = true\nkernel_config = \"bpf-ci\"\nvms = 2\n\
                    patches = \"mine\"\n";
        assert_eq!(
            with(text, "x fuzz"),
            "x fuzz --patches mine --kernel-config bpf-ci --network user --gdb --vms 2"
        );
        assert_eq!(
            with(text, "x run --gdb 4000"),
            "x run --patches mine --kernel-config bpf-ci --network user --gdb 4000"
        );
        assert_eq!(with(text, "x cache"), "x cache --patches mine");
        assert_eq!(
            with(text, "x bundle --out b"),
            "x bundle --patches mine --kernel-config bpf-ci --out b"
        );
        assert_eq!(with("gdb = 4321", "x vmtest"), "x vmtest --gdb 4321");
        let cuts = "variants = [\"one=HEAD~2\", \"two=HEAD~1\"]\n";
        assert_eq!(
            with(cuts, "x run -- true"),
            "x run --variant one=HEAD~2,two=HEAD~1 -- true"
        );
        assert_eq!(with("gdb = false", "x vmtest"), "x vmtest");
    }

    #[test]
    fn the_llvm_goes_to_what_builds_test_progs_and_too_old_a_one_is_refused() {
        let llvm = "llvm = 20\n";
        assert_eq!(with(llvm, "x kselftest"), "x kselftest --llvm 20");
        assert_eq!(with(llvm, "x bundle --out b"), "x bundle --llvm 20 --out b");
        assert_eq!(with(llvm, "x vmtest"), "x vmtest");
        assert_eq!(with(llvm, "x ci"), "x ci");
        let e = ConfigFile::parse("llvm = 17", Path::new("bpflab.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("llvm: invalid value '17' for '--llvm <N>': LLVM 17 is too old"),
            "{e}"
        );
    }

    /// The flags several subcommands share that are no key, and why.
    const NOT_KEYS: &[(&str, &str)] = &[
        (
            "debug",
            "a default of true could not be undone: there is no --no-debug",
        ),
        (
            "timeout",
            "its defaults differ by command (10 minutes to 4 hours, none for --shell and \
             --gdb): one would cut the others' runs short or hold their limits off",
        ),
        (
            "claim",
            "it goes with one run's kernel the plan does not know (a bzImage, a branch's variant)",
        ),
        (
            "bundle",
            "$BPFLAB_BUNDLE defaults it already, and a bundle is one CI job's",
        ),
        ("inject", "a hidden harness self-test"),
        (
            "clean",
            "a default of true could not be undone: there is no --no-clean",
        ),
    ];

    #[test]
    fn every_shared_flag_is_a_key_unless_said_why_not() {
        let definitions = crate::cli::flag_definitions();
        let keys: BTreeSet<&str> = KEYS.iter().copied().collect();
        let not_keys: BTreeSet<&str> = NOT_KEYS.iter().map(|(id, _)| *id).collect();
        let shared: BTreeSet<&str> = definitions
            .iter()
            .filter(|d| d.subcommands.len() > 1)
            .map(|d| d.id.as_str())
            .collect();
        let missing: Vec<_> = shared
            .difference(&keys)
            .filter(|id| !not_keys.contains(*id))
            .collect();
        assert!(
            missing.is_empty(),
            "flags several subcommands share, with no bpflab.toml key: {missing:?}; \
             add each to KEYS (and USAGE.md), or to NOT_KEYS with why"
        );
        for key in &keys {
            let flags: Vec<_> = definitions.iter().filter(|d| d.id == *key).collect();
            assert_eq!(flags.len(), 1, "key {key} is not one flag's id: {flags:?}");
        }
        assert!(keys.is_disjoint(&not_keys), "a key in NOT_KEYS");
        assert!(
            not_keys.is_subset(&shared),
            "NOT_KEYS names a flag no two subcommands share"
        );
    }

    #[test]
    fn the_file_is_the_current_directory_s_then_the_projects_unless_the_environment_says() {
        let root = crate::util::tempdir();
        let here = root.join("linux");
        std::fs::create_dir_all(&here).unwrap();
        let at = |env: Option<&str>| config_path(env.map(OsString::from), Some(&here), &root);
        assert_eq!(at(None), None, "no file, no config");
        std::fs::write(root.join(FILE), "").unwrap();
        assert_eq!(at(None), Some(root.join(FILE)));
        std::fs::write(here.join(FILE), "").unwrap();
        assert_eq!(at(None), Some(here.join(FILE)));
        assert_eq!(at(Some("")), None);
        assert_eq!(
            at(Some("/etc/other.toml")),
            Some(PathBuf::from("/etc/other.toml"))
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn fragments_and_paths_are_taken_from_the_files_directory() {
        let c = ConfigFile::parse(
            "config = [\"net.config\", \"/abs/mine.config\"]\nkernel_src = \"../linux\"\n",
            Path::new("/home/dev/proj/bpflab.toml"),
        )
        .unwrap();
        let out =
            with_defaults(&c, ["x", "run", "--", "true"].map(OsString::from).to_vec()).unwrap();
        let out: Vec<String> = out
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            out.join(" "),
            "x run --kernel-src /home/dev/proj/../linux \
             --config=/home/dev/proj/net.config --config=/abs/mine.config -- true"
        );
        // build-kernel takes --config too; the command line's wins.
        let given = with_defaults(
            &c,
            ["x", "build-kernel", "--config", "other.config"]
                .map(OsString::from)
                .to_vec(),
        )
        .unwrap();
        assert!(!given
            .iter()
            .any(|a| a.to_string_lossy().contains("net.config")));
    }

    #[test]
    fn bad_command_lines_are_left_to_clap() {
        assert_eq!(with(HABITS, "x vmtest --bogus"), "x vmtest --bogus");
        assert_eq!(with(HABITS, "x"), "x");
    }
}
