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
    /// "directory" or "tarball".
    pub kind: String,
    pub path: PathBuf,
    /// Where the harness's own copy of the tree lives.
    pub pristine: PathBuf,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KernelInfo {
    /// "base", "patched", "base-debug" or "patched-debug".
    pub name: String,
    pub bzimage: PathBuf,
    pub vmlinux: PathBuf,
    pub version: String,
    pub config: PathBuf,
    pub build_log: PathBuf,
    /// Empty for base kernels.
    pub patches: Vec<PatchInfo>,
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
        let back: Manifest = serde_json::from_value(v).unwrap();
        assert_eq!(back.kernels[0].version, "6.12.117");
    }
}
