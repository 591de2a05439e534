//! The build manifest: what `build-kernel --json` prints and later
//! subcommands (vmtest, bench, ci) read.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub cache_dir: PathBuf,
    pub source: SourceInfo,
    pub kernels: Vec<KernelInfo>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SourceInfo {
    /// "directory", "tarball", "git" or "debian".
    pub kind: String,
    pub path: PathBuf,
    /// Where the harness's own copy of the tree lives.
    pub pristine: PathBuf,
    /// Debian's package, with the exact upload, for a `debian:` source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<DebianPackage>,
}

/// The upload of Debian's linux-source a build came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DebianPackage {
    pub name: String,
    /// e.g. 7.3.4-1~bpo13+1
    pub version: String,
    pub suite: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KernelInfo {
    /// "eager", "mainline", "base" (a tree of your own), "mainline-debug", ...
    pub name: String,
    pub bzimage: PathBuf,
    pub vmlinux: PathBuf,
    pub version: String,
    pub config: PathBuf,
    pub build_log: PathBuf,
    /// Every patch the kernel's tree was given, a Debian baseline's first;
    /// none for the base kernel of a tree of the developer's.
    pub patches: Vec<PatchInfo>,
    /// What of the tree's own BPF selftests config (bpf-ci) the kernel
    /// does not have: `CONFIG_X=v from FRAGMENT: why`, one per option.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_not_taken: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PatchInfo {
    pub name: String,
    pub sha256: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_shape() {
        let m = Manifest {
            cache_dir: "/c".into(),
            source: SourceInfo {
                kind: "tarball".into(),
                path: "/usr/src/linux-source-6.12.tar.xz".into(),
                pristine: "/c/sources/x/pristine".into(),
                package: None,
            },
            kernels: vec![KernelInfo {
                name: "patched".into(),
                bzimage: "/c/b/arch/x86/boot/bzImage".into(),
                vmlinux: "/c/b/vmlinux".into(),
                version: "6.12.117".into(),
                config: "/c/b/.config".into(),
                build_log: "/c/b/build.log".into(),
                patches: vec![PatchInfo {
                    name: "0001-x.patch".into(),
                    sha256: "ab".into(),
                }],
                config_not_taken: vec![],
            }],
        };
        let v: serde_json::Value = serde_json::to_value(&m).unwrap();
        let k = &v["kernels"][0];
        for field in ["name", "bzimage", "vmlinux", "version", "config", "patches"] {
            assert!(!k[field].is_null(), "kernel entry lacks {field}: {k}");
        }
        assert_eq!(k["patches"][0]["name"], "0001-x.patch");
        assert_eq!(k["patches"][0]["sha256"], "ab");
        assert_eq!(v["source"]["kind"], "tarball");
        assert!(k["config_not_taken"].is_null(), "only when there is any");
        let back: Manifest = serde_json::from_value(v).unwrap();
        assert_eq!(back.kernels[0].version, "6.12.117");
        let mut m = back;
        m.kernels[0].config_not_taken = vec!["CONFIG_X=y from config.x86_64: why".into()];
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v["kernels"][0]["config_not_taken"][0],
            "CONFIG_X=y from config.x86_64: why"
        );
    }
}
