//! Building `fuzz-client`, the fuzzer guest's real user of libbpf's
//! skeleton path for global data (`vm-images/map-fuzz/client`): a BPF object
//! whose `.data`, `.bss` and `.rodata` libbpf turns into mmap-able array
//! maps, its skeleton from bpftool, and a fully static client (it runs in
//! an initramfs with no libraries) that checks every page of them.
//!
//! `fuzz::campaign` (for `cargo xtask fuzz` and `mutants --judge fuzz`)
//! builds it with libbpf and bpftool from the tree under test
//! (`tools.rs`) and packs it into the guest image as /bin/fuzz-client.
//!
//! `steps` is the recipe, pure so it can be tested; [`build`]
//! runs it, and skips it while the binary is newer than every input.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use anyhow::{bail, Context, Result};

use crate::util::write_atomic;

/// Debian's clang-19, the compiler of the BPF object.
pub const CLANG: &str = "/usr/lib/llvm-19/bin/clang";

/// Debian's multiarch headers: `<linux/bpf.h>` includes `<asm/types.h>`,
/// which lives here, and clang `-target bpf` does not search it itself.
/// `-idirafter` so the libbpf headers and the tree's own come first.
pub const MULTIARCH_INCLUDE: &str = "/usr/include/x86_64-linux-gnu";

/// The sources in the source directory, all inputs of the build.
pub const SOURCES: &[&str] = &["fuzz_client.bpf.c", "fuzz_client.h", "client.c"];

/// The built binary's name in the output directory.
pub const BINARY: &str = "fuzz-client";

const BPF_SOURCE: &str = "fuzz_client.bpf.c";
const CLIENT_SOURCE: &str = "client.c";
const BPF_OBJECT: &str = "fuzz_client.bpf.o";
const SKELETON: &str = "fuzz_client.skel.h";
/// The skeleton's name: its types and functions are `fuzz_client__*`.
const SKELETON_NAME: &str = "fuzz_client";

/// Where the tools, libbpf and the sources are, and where the build goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientPaths {
    /// clang that can target BPF (normally [`CLANG`]).
    pub clang: PathBuf,
    /// bpftool, for `gen skeleton`.
    pub bpftool: PathBuf,
    /// The installed libbpf headers: holds `bpf/bpf_helpers.h` and `bpf/libbpf.h`.
    pub libbpf_include: PathBuf,
    /// The static libbpf, `libbpf.a`.
    pub libbpf_archive: PathBuf,
    /// `vm-images/map-fuzz/client`.
    pub source_dir: PathBuf,
    /// Where the object, the skeleton and the binary are written.
    pub out_dir: PathBuf,
}

impl ClientPaths {
    /// The static binary the build produces.
    pub fn binary(&self) -> PathBuf {
        self.out_dir.join(BINARY)
    }

    /// Everything whose change must rebuild the binary: the sources, the
    /// tools and libbpf (its headers are installed along with the archive).
    fn inputs(&self) -> Vec<PathBuf> {
        let mut inputs: Vec<PathBuf> = SOURCES.iter().map(|s| self.source_dir.join(s)).collect();
        inputs.extend([
            self.clang.clone(),
            self.bpftool.clone(),
            self.libbpf_archive.clone(),
        ]);
        inputs
    }
}

/// One step of the recipe: its argv and, for bpftool, the file that
/// receives its stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Step {
    what: &'static str,
    argv: Vec<String>,
    stdout_to: Option<PathBuf>,
}

/// A path as an argument. The paths are the harness's own (cache, checkout),
/// so a lossy conversion never changes one in practice.
fn arg(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

fn steps(paths: &ClientPaths) -> Vec<Step> {
    let include = format!("-I{}", arg(&paths.libbpf_include));
    let object = paths.out_dir.join(BPF_OBJECT);
    let compile_bpf = vec![
        arg(&paths.clang),
        "-g".into(), // BTF, which libbpf and bpftool need, comes from -g
        "-O2".into(),
        "-target".into(),
        "bpf".into(),
        include.clone(),
        "-idirafter".into(),
        MULTIARCH_INCLUDE.into(),
        "-c".into(),
        arg(&paths.source_dir.join(BPF_SOURCE)),
        "-o".into(),
        arg(&object),
    ];
    let skeleton = vec![
        arg(&paths.bpftool),
        "gen".into(),
        "skeleton".into(),
        arg(&object),
        "name".into(),
        SKELETON_NAME.into(),
    ];
    let link_client = vec![
        "gcc".into(),
        "-static".into(),
        "-O2".into(),
        "-Wall".into(),
        "-Wextra".into(),
        include,
        format!("-I{}", arg(&paths.out_dir)),
        arg(&paths.source_dir.join(CLIENT_SOURCE)),
        // libbpf's own dependencies follow it, as a static link needs.
        arg(&paths.libbpf_archive),
        "-lelf".into(),
        "-lz".into(),
        "-lzstd".into(),
        "-o".into(),
        arg(&paths.binary()),
    ];
    vec![
        Step {
            what: "compiling the BPF object",
            argv: compile_bpf,
            stdout_to: None,
        },
        Step {
            what: "generating the skeleton",
            argv: skeleton,
            stdout_to: Some(paths.out_dir.join(SKELETON)),
        },
        Step {
            what: "building the static client",
            argv: link_client,
            stdout_to: None,
        },
    ]
}

/// The argv of each step, in order. The second (bpftool) writes the
/// skeleton to its stdout, which [`build`] puts in `<out>/fuzz_client.skel.h`.
#[cfg(test)]
pub fn build_commands(paths: &ClientPaths) -> Vec<Vec<String>> {
    steps(paths).into_iter().map(|step| step.argv).collect()
}

/// Builds `<out>/fuzz-client` unless it is newer than every input, and
/// returns its path.
pub fn build(paths: &ClientPaths) -> Result<PathBuf> {
    let binary = paths.binary();
    if up_to_date(&binary, &paths.inputs())? {
        return Ok(binary);
    }
    fs::create_dir_all(&paths.out_dir)
        .with_context(|| format!("creating {}", paths.out_dir.display()))?;
    // A step that fails must not leave an old binary that looks fresh.
    match fs::remove_file(&binary) {
        Err(err) if err.kind() != ErrorKind::NotFound => {
            return Err(err).with_context(|| format!("removing {}", binary.display()));
        }
        _ => {}
    }
    for step in steps(paths) {
        run_step(&step).with_context(|| format!("fuzz-client: {}", step.what))?;
    }
    Ok(binary)
}

fn run_step(step: &Step) -> Result<()> {
    let (program, args) = step.argv.split_first().context("an empty command")?;
    let output = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("running {program}"))?;
    if !output.status.success() {
        bail!(
            "`{}` failed ({}):\n{}",
            step.argv.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim_end()
        );
    }
    if let Some(path) = &step.stdout_to {
        // Atomically, so an interrupted build leaves no half header.
        write_atomic(path, &output.stdout)?;
    }
    Ok(())
}

/// Whether `output` exists and is newer than every one of `inputs`; an
/// input that cannot be read is an error that names it.
fn up_to_date(output: &Path, inputs: &[PathBuf]) -> Result<bool> {
    let built = match fs::metadata(output) {
        Ok(meta) => meta.modified()?,
        Err(err) if err.kind() == ErrorKind::NotFound => return Ok(false),
        Err(err) => return Err(err).with_context(|| format!("reading {}", output.display())),
    };
    for input in inputs {
        let changed: SystemTime = fs::metadata(input)
            .and_then(|meta| meta.modified())
            .with_context(|| format!("reading the input {}", input.display()))?;
        if changed >= built {
            return Ok(false);
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn paths() -> ClientPaths {
        ClientPaths {
            clang: CLANG.into(),
            bpftool: "/b/bpftool".into(),
            libbpf_include: "/l/include".into(),
            libbpf_archive: "/l/lib64/libbpf.a".into(),
            source_dir: "/src/client".into(),
            out_dir: "/out".into(),
        }
    }

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_recipe_is_clang_then_bpftool_then_a_static_gcc() {
        let got = build_commands(&paths());
        let want = vec![
            words(
                "/usr/lib/llvm-19/bin/clang -g -O2 -target bpf -I/l/include \
                 -idirafter /usr/include/x86_64-linux-gnu \
                 -c /src/client/fuzz_client.bpf.c -o /out/fuzz_client.bpf.o",
            ),
            words("/b/bpftool gen skeleton /out/fuzz_client.bpf.o name fuzz_client"),
            words(
                "gcc -static -O2 -Wall -Wextra -I/l/include -I/out /src/client/client.c \
                 /l/lib64/libbpf.a -lelf -lz -lzstd -o /out/fuzz-client",
            ),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn only_bpftool_s_stdout_is_kept_and_it_is_the_skeleton() {
        let kept: Vec<Option<PathBuf>> = steps(&paths()).into_iter().map(|s| s.stdout_to).collect();
        assert_eq!(
            kept,
            [None, Some(PathBuf::from("/out/fuzz_client.skel.h")), None]
        );
    }

    #[test]
    fn every_source_tool_and_libbpf_is_an_input() {
        let inputs = paths().inputs();
        for source in SOURCES {
            assert!(inputs.contains(&Path::new("/src/client").join(source)));
        }
        for tool in [CLANG, "/b/bpftool", "/l/lib64/libbpf.a"] {
            assert!(inputs.contains(&PathBuf::from(tool)), "{tool}");
        }
    }

    #[test]
    fn the_binary_is_fresh_only_when_newer_than_every_input() {
        let dir = crate::util::tempdir();
        let (input, other, output) = (dir.join("a.c"), dir.join("b.c"), dir.join("bin"));
        let inputs = [input.clone(), other.clone()];
        for f in &inputs {
            fs::write(f, "x").unwrap();
        }
        assert!(!up_to_date(&output, &inputs).unwrap(), "no output yet");

        let now = SystemTime::now();
        let set = |path: &Path, time: SystemTime| {
            fs::File::options()
                .write(true)
                .open(path)
                .unwrap()
                .set_modified(time)
                .unwrap()
        };
        fs::write(&output, "x").unwrap();
        set(&input, now - Duration::from_secs(20));
        set(&other, now - Duration::from_secs(10));
        set(&output, now);
        assert!(up_to_date(&output, &inputs).unwrap());

        set(&other, now + Duration::from_secs(10));
        assert!(!up_to_date(&output, &inputs).unwrap(), "an input changed");

        fs::remove_file(&other).unwrap();
        let err = up_to_date(&output, &inputs).unwrap_err();
        assert!(format!("{err:#}").contains("b.c"), "{err:#}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
