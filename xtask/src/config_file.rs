//! `bpflab.toml`: the developer's habitual flags. Each key stands for a
//! flag; its words go into the command line right after the subcommand,
//! for every subcommand that takes the flag and was not given it, so the
//! command line always wins. An unknown key, or a value of the wrong
//! type, is an error that names it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::parser::ValueSource;
use clap::CommandFactory;
use serde::Deserialize;

use crate::cli::Cli;

/// The file, at the project root; `$BPFLAB_CONFIG` names another, or
/// none when empty (`ci` runs its steps so).
pub const FILE: &str = "bpflab.toml";
pub const CONFIG_ENV: &str = "BPFLAB_CONFIG";

#[derive(Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    kernel_src: Option<PathBuf>,
    cache_dir: Option<PathBuf>,
    jobs: Option<u32>,
    /// For the commands that take a list of kernels (not `run`).
    kernels: Option<Vec<String>>,
    accel: Option<String>,
    cpus: Option<u32>,
    memory: Option<String>,
    /// For `run` and `kselftest`, where --share picks how; vmtest's
    /// --share turns sharing on, which a default should not.
    share: Option<String>,
    append: Option<Vec<String>>,
    qemu_args: Option<Vec<String>>,
    /// Kconfig fragments of the developer's own (`--config`).
    config: Option<Vec<PathBuf>>,
    /// The size `ci` and `cache --prune` trim the cache to (`20G`).
    cache_cap: Option<String>,
}

impl ConfigFile {
    /// Parses the file at `path`; its relative paths are taken from the
    /// file's directory, wherever the command runs.
    pub fn parse(text: &str, path: &Path) -> Result<ConfigFile> {
        let mut config: ConfigFile = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| format!(" line {}", text[..s.start].matches('\n').count() + 1))
                .unwrap_or_default();
            let what = e.message().trim().replace('\n', " ");
            anyhow::anyhow!("{}{line}: {what} (fix or remove it)", path.display())
        })?;
        let dir = path.parent().unwrap_or(Path::new(""));
        let rebase = |p: &mut PathBuf| *p = dir.join(&*p);
        config.kernel_src.iter_mut().for_each(rebase);
        config.cache_dir.iter_mut().for_each(rebase);
        config.config.iter_mut().flatten().for_each(rebase);
        Ok(config)
    }

    /// (clap argument id, its words) for every key that is set.
    fn flags(&self) -> Vec<(&'static str, Vec<String>)> {
        let one = |flag: &str, v: String| vec![format!("--{flag}"), v];
        let many = |flag: &str, vs: &[String]| -> Vec<String> {
            vs.iter().map(|v| format!("--{flag}={v}")).collect()
        };
        let path = |p: &PathBuf| p.display().to_string();
        let mut out = Vec::new();
        let mut push = |id: &'static str, words: Option<Vec<String>>| {
            if let Some(w) = words {
                out.push((id, w));
            }
        };
        push(
            "kernel_src",
            self.kernel_src.as_ref().map(|p| one("kernel-src", path(p))),
        );
        push(
            "cache_dir",
            self.cache_dir.as_ref().map(|p| one("cache-dir", path(p))),
        );
        push("jobs", self.jobs.map(|n| one("jobs", n.to_string())));
        push(
            "cache_cap",
            self.cache_cap.clone().map(|c| one("cache-cap", c)),
        );
        push(
            "kernels",
            self.kernels.as_ref().map(|k| one("kernel", k.join(","))),
        );
        push("accel", self.accel.clone().map(|a| one("accel", a)));
        push("cpus", self.cpus.map(|n| one("cpus", n.to_string())));
        push("memory", self.memory.clone().map(|m| one("memory", m)));
        push("share", self.share.clone().map(|s| one("share", s)));
        push("append", self.append.as_deref().map(|a| many("append", a)));
        push(
            "qemu_arg",
            self.qemu_args.as_deref().map(|a| many("qemu-arg", a)),
        );
        push(
            "config",
            self.config.as_ref().map(|c| {
                let paths: Vec<String> = c.iter().map(path).collect();
                many("config", &paths)
            }),
        );
        out
    }
}

/// Which file to read: `$BPFLAB_CONFIG` if set (none when empty), else
/// bpflab.toml at the project root if it is there.
fn config_path(env: Option<OsString>, root: &Path) -> Option<PathBuf> {
    match env {
        Some(v) if v.is_empty() => None,
        Some(v) => Some(PathBuf::from(v)),
        None => Some(root.join(FILE)).filter(|p| p.exists()),
    }
}

/// The process's arguments with the config file's defaults put in.
pub fn arguments(args: Vec<OsString>) -> Result<Vec<OsString>> {
    let Some(path) = config_path(std::env::var_os(CONFIG_ENV), &crate::project::root()) else {
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
    for (id, flag_words) in config.flags() {
        let skip = (id == "share" && name == "vmtest") || (id == "kernels" && name == "run");
        if skip || !takes(id) || given.value_source(id) == Some(ValueSource::CommandLine) {
            continue;
        }
        words.extend(flag_words.into_iter().map(OsString::from));
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
    fn unknown_keys_and_wrong_types_are_named() {
        let err = |text: &str| {
            ConfigFile::parse(text, Path::new("/p/bpflab.toml"))
                .unwrap_err()
                .to_string()
        };
        let e = err("cpus = 2\ncpu = 4\n");
        assert!(
            e.starts_with("/p/bpflab.toml line 2: unknown field `cpu`"),
            "{e}"
        );
        assert!(!e.contains('\n'), "one line: {e}");
        let e = err("cpus = \"two\"\n");
        assert!(e.contains("line 1") && e.contains("invalid type"), "{e}");
        assert_eq!(config(""), ConfigFile::default());
    }

    #[test]
    fn the_file_is_the_projects_unless_the_environment_says() {
        let root = std::env::temp_dir().join(format!("bpflab-config-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        assert_eq!(config_path(None, &root), None, "no file, no config");
        std::fs::write(root.join(FILE), "").unwrap();
        assert_eq!(config_path(None, &root), Some(root.join(FILE)));
        assert_eq!(config_path(Some("".into()), &root), None);
        assert_eq!(
            config_path(Some("/etc/other.toml".into()), &root),
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
