//! The guest image: the static /init and test binaries packed into an
//! uncompressed newc initramfs. Everything is built here; nothing is
//! downloaded at run time.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use guest_common::request::{Request, REQUEST_PATH};
use xshell::cmd;

/// The guest's target; binaries are static-pie so they need no libraries.
const GUEST_TARGET: &str = "x86_64-unknown-linux-gnu";

/// One entry of the initramfs.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    Dir {
        path: String,
    },
    File {
        path: String,
        contents: Vec<u8>,
        mode: u32,
    },
    CharDev {
        path: String,
        major: u32,
        minor: u32,
    },
}

/// Builds the guest binaries and writes the initramfs into `out_dir` (the
/// run's own directory: another run rebuilding it cannot pull it from
/// under a booting guest), with `extra` entries of the run's (the fuzz
/// client, a reproducer); returns its path.
pub fn build(out_dir: &Path, extra: &[Entry]) -> Result<PathBuf> {
    compile()?;
    let programs = PROGRAMS
        .iter()
        .map(|name| Ok((name.to_string(), read_bin(name)?)))
        .collect::<Result<Vec<_>>>()?;
    let mut entries = layout(read_bin("init")?, Some(programs));
    entries.extend(extra.iter().cloned());
    write_image(&out_dir.join("initramfs.cpio"), &entries)
}

/// The test programs in /bin of the hermetic image.
pub const PROGRAMS: &[&str] = &["selftests", "bench", "fuzz"];

/// A file for the image, with the directories it needs before it.
pub fn file_entries(path: &str, contents: Vec<u8>, mode: u32) -> Vec<Entry> {
    let path = path.trim_start_matches('/');
    let mut entries: Vec<Entry> = path
        .match_indices('/')
        .map(|(i, _)| Entry::Dir {
            path: path[..i].to_string(),
        })
        .collect();
    entries.push(Entry::File {
        path: path.to_string(),
        contents,
        mode,
    });
    entries
}

/// An initramfs with /init and the host's request only: the programs
/// come from the share. Written as `out`.
pub fn build_for_share(out: &Path, request: &Request) -> Result<PathBuf> {
    compile()?;
    let mut entries = layout(read_bin("init")?, None);
    entries.extend(request_entries(request));
    write_image(out, &entries)
}

/// The request as a file at `guest_common::request::REQUEST_PATH`.
pub fn request_entries(request: &Request) -> Vec<Entry> {
    let path = REQUEST_PATH.trim_start_matches('/');
    let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
    vec![
        Entry::Dir { path: dir.into() },
        Entry::File {
            path: path.into(),
            contents: request.encode(),
            mode: 0o644,
        },
    ]
}

/// `cargo build` of the static guest binaries, once per process.
pub fn compile() -> Result<()> {
    static BUILT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    if BUILT.get().is_some() {
        return Ok(());
    }
    cargo_build()?;
    let _ = BUILT.set(());
    Ok(())
}

fn cargo_build() -> Result<()> {
    let sh = crate::project::shell()?;
    let target_dir = crate::project::root().join("target/guest");
    let _env = (
        sh.push_env("RUSTFLAGS", "-C target-feature=+crt-static"),
        sh.push_env("CARGO_TARGET_DIR", &target_dir),
    );
    crate::status!(
        "guest",
        "building the static guest binaries (init, selftests, bench, fuzz)"
    );
    cmd!(
        sh,
        "cargo build --quiet --release --target {GUEST_TARGET} -p guest-init -p selftests -p bench -p map-fuzz"
    )
    .quiet()
    .run()
    .context("building the guest binaries (cargo build for the guest failed)")
}

fn read_bin(name: &str) -> Result<Vec<u8>> {
    let path = guest_bin_dir().join(name);
    fs::read(&path).with_context(|| format!("reading the guest binary {}", path.display()))
}

/// Written beside and renamed into place: a guest booting an image of
/// the same name never reads a half-written one.
fn write_image(out: &Path, entries: &[Entry]) -> Result<PathBuf> {
    static WRITES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = out.with_extension(format!("tmp{}-{n}", std::process::id()));
    let mut file = fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    write_newc(entries, &mut file).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, out).with_context(|| format!("renaming {} into place", tmp.display()))?;
    Ok(out.to_path_buf())
}

/// Where the static guest binaries are built.
pub fn guest_bin_dir() -> PathBuf {
    crate::project::root()
        .join("target/guest")
        .join(GUEST_TARGET)
        .join("release")
}

/// What the guest's root file system holds: /init, and the test programs
/// (name, binary) in /bin unless they come from the share.
pub fn layout(init: Vec<u8>, programs: Option<Vec<(String, Vec<u8>)>>) -> Vec<Entry> {
    let dir = |p: &str| Entry::Dir { path: p.into() };
    let exe = |p: &str, contents| Entry::File {
        path: p.into(),
        contents,
        mode: 0o755,
    };
    let mut entries = vec![
        dir("bin"),
        dir("dev"),
        // The kernel opens /dev/console for /init's stdio before anything
        // is mounted, so the node must be in the archive itself.
        Entry::CharDev {
            path: "dev/console".into(),
            major: 5,
            minor: 1,
        },
        dir("proc"),
        dir("sys"),
        dir("tmp"),
        exe("init", init),
    ];
    for (name, binary) in programs.into_iter().flatten() {
        entries.push(exe(&format!("bin/{name}"), binary));
    }
    entries
}

/// Writes `entries` as a newc cpio archive.
pub fn write_newc(entries: &[Entry], mut w: impl Write) -> Result<()> {
    use cpio::newc::{trailer, Builder};
    for (ino, entry) in (1u32..).zip(entries) {
        let (builder, contents): (Builder, &[u8]) = match entry {
            Entry::Dir { path } => (Builder::new(path).mode(0o040755).nlink(2), &[]),
            Entry::File {
                path,
                contents,
                mode,
            } => (Builder::new(path).mode(0o100000 | mode).nlink(1), contents),
            Entry::CharDev { path, major, minor } => (
                Builder::new(path)
                    .mode(0o020600)
                    .nlink(1)
                    .rdev_major(*major)
                    .rdev_minor(*minor),
                &[],
            ),
        };
        let size = u32::try_from(contents.len()).context("guest file larger than 4 GiB")?;
        let mut writer = builder.ino(ino).write(&mut w, size);
        writer.write_all(contents)?;
        writer.finish()?;
    }
    trailer(&mut w)?;
    Ok(())
}

/// Reads back the names in a newc archive (for tests and diagnostics).
#[cfg(test)]
pub fn list_newc(mut data: &[u8]) -> Result<Vec<(String, u32, u32)>> {
    let mut names = Vec::new();
    loop {
        let reader = cpio::newc::Reader::new(data)?;
        if reader.entry().is_trailer() {
            break;
        }
        let e = reader.entry();
        names.push((e.name().to_string(), e.mode(), e.file_size()));
        data = reader.finish()?;
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_has_init_console_and_binaries() {
        let mut entries = layout(
            b"INIT".to_vec(),
            Some(vec![
                ("selftests".into(), b"TESTS".to_vec()),
                ("bench".into(), b"BENCH".to_vec()),
            ]),
        );
        entries.extend(file_entries(
            "/fuzz/replay.ops",
            b"lookup m0 0\n".to_vec(),
            0o644,
        ));
        let mut buf = Vec::new();
        write_newc(&entries, &mut buf).unwrap();
        let listed = list_newc(&buf).unwrap();
        let find = |n: &str| listed.iter().find(|e| e.0 == n).cloned();
        assert_eq!(find("init"), Some(("init".into(), 0o100755, 4)));
        assert_eq!(find("bin/selftests").unwrap().2, 5);
        assert_eq!(
            find("fuzz").unwrap().1 & 0o170000,
            0o040000,
            "its directory first"
        );
        assert_eq!(
            find("fuzz/replay.ops"),
            Some(("fuzz/replay.ops".into(), 0o100644, 12))
        );
        assert_eq!(find("dev/console").unwrap().1 & 0o170000, 0o020000);
        assert_eq!(find("tmp").unwrap().1 & 0o170000, 0o040000);
        // newc: 110-byte headers, 4-byte alignment, a TRAILER!!! at the end.
        assert_eq!(buf.len() % 4, 0);
        assert!(buf.windows(10).any(|w| w == b"TRAILER!!!"));
    }

    #[test]
    fn a_shared_run_carries_the_request_and_no_programs() {
        let request = Request {
            share: Some(guest_common::request::Share {
                kind: guest_common::request::ShareKind::Virtiofs,
                project: "/w".into(),
                bindir: None,
            }),
            command: None,
        };
        let mut entries = layout(b"INIT".to_vec(), None);
        entries.extend(request_entries(&request));
        let mut buf = Vec::new();
        write_newc(&entries, &mut buf).unwrap();
        let listed = list_newc(&buf).unwrap();
        let names: Vec<&str> = listed.iter().map(|e| e.0.as_str()).collect();
        assert!(names.contains(&"bpflab") && names.contains(&"bpflab/request"));
        assert!(!names.contains(&"bin/selftests"));
        let size = listed.iter().find(|e| e.0 == "bpflab/request").unwrap().2;
        assert_eq!(size as usize, request.encode().len());
    }
}
