//! Builds the XDP programs in `ebpf/programs` when the `afxdp` feature is on.
//!
//! The eBPF crate is `no_std` for `bpfel-unknown-none`, which needs nightly (`-Z build-std=core`)
//! and `bpf-linker`; `scripts/setup` installs both. The object lands in `$OUT_DIR/ofan-ebpf.o`,
//! which `afxdp::steer` embeds with `aya::include_bytes_aligned!`. Without the feature this
//! script does nothing, so the pure crate builds anywhere.

use std::{
    env,
    ffi::OsString,
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{bail, Context as _, Result};

/// The target every eBPF object is built for (little-endian BPF).
const BPF_TARGET: &str = "bpfel-unknown-none";
/// The binary target of the `ofan-ebpf` package.
const EBPF_BIN: &str = "ofan-ebpf";
/// Variables of the outer build that would leak into, and break, the nested nightly build.
const LEAKING_ENV: &[&str] = &[
    "RUSTC",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTDOC",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_BUILD_RUSTFLAGS",
    "CARGO_BUILD_TARGET",
    "CARGO_TARGET_DIR",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_MANIFEST_DIR",
    "CARGO_PKG_NAME",
    "RUSTUP_TOOLCHAIN",
    "CARGO",
];

const SETUP_HINT: &str = "run `sudo scripts/setup` to install the eBPF toolchain \
                          (nightly with rust-src, bpf-linker built against LLVM 22)";

fn main() -> Result<()> {
    println!("cargo::rerun-if-changed=build.rs");
    if env::var_os("CARGO_FEATURE_AFXDP").is_none() {
        return Ok(());
    }
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?);
    let ebpf_dir = manifest_dir.join("../ebpf");
    for watched in [
        "programs/src",
        "programs/Cargo.toml",
        "programs/Cargo.lock",
        "common/src",
        "common/Cargo.toml",
    ] {
        println!(
            "cargo::rerun-if-changed={}",
            ebpf_dir.join(watched).display()
        );
    }

    check_toolchain()?;

    let out_dir = PathBuf::from(env::var("OUT_DIR")?);
    let target_dir = out_dir.join("ebpf-target");
    let manifest = ebpf_dir.join("programs/Cargo.toml");
    // `--cfg bpf_target_arch` is what aya-build passes (aya-ebpf uses it for kprobe helpers);
    // `--btf` makes bpf-linker emit BTF so verifier logs and bpftool show names.
    let host_arch = env::var("CARGO_CFG_TARGET_ARCH")?;
    let rustflags = [
        format!("--cfg=bpf_target_arch=\"{host_arch}\""),
        "-Cdebuginfo=2".to_owned(),
        "-Clink-arg=--btf".to_owned(),
    ]
    .join("\x1f");

    let mut build = Command::new("rustup");
    build
        .args(["run", "nightly", "cargo", "build", "--release", "--locked"])
        .args([
            "--target",
            BPF_TARGET,
            "-Z",
            "build-std=core",
            "--bin",
            EBPF_BIN,
        ])
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(&target_dir);
    for name in LEAKING_ENV {
        build.env_remove(name);
    }
    build.env("CARGO_ENCODED_RUSTFLAGS", rustflags);
    let status = build
        .status()
        .with_context(|| format!("running {build:?}"))?;
    if !status.success() {
        bail!("building the XDP programs in {} failed ({status}); if the toolchain is the problem, {SETUP_HINT}", manifest.display());
    }

    let object = target_dir.join(BPF_TARGET).join("release").join(EBPF_BIN);
    let embedded = out_dir.join("ofan-ebpf.o");
    fs::copy(&object, &embedded)
        .with_context(|| format!("copying {} to {}", object.display(), embedded.display()))?;
    Ok(())
}

/// Fails with one clear message when nightly, its `rust-src` or `bpf-linker` is missing.
fn check_toolchain() -> Result<()> {
    let nightly_sysroot = Command::new("rustup")
        .args(["run", "nightly", "rustc", "--print", "sysroot"])
        .env_remove("RUSTUP_TOOLCHAIN")
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| OsString::from(String::from_utf8_lossy(&output.stdout).trim().to_owned()));
    let Some(sysroot) = nightly_sysroot else {
        bail!(
            "the `afxdp` feature needs the nightly Rust toolchain (through rustup): {SETUP_HINT}"
        );
    };
    let core_src = Path::new(&sysroot).join("lib/rustlib/src/rust/library/core");
    if !core_src.is_dir() {
        bail!("the `afxdp` feature needs nightly's rust-src component (for -Z build-std=core): {SETUP_HINT}");
    }
    let linker = Command::new("bpf-linker")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !linker.is_ok_and(|status| status.success()) {
        bail!("the `afxdp` feature needs `bpf-linker` on PATH: {SETUP_HINT}");
    }
    Ok(())
}
