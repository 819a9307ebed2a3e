//! Warns (never fails) when the CUDA driver library cannot be found, saying how to get it.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CUDA_LIBRARY_PATH");
    if !cfg!(target_os = "linux") {
        return;
    }
    let mut dirs: Vec<String> = std::env::var("CUDA_LIBRARY_PATH")
        .map(|p| p.split(':').map(str::to_owned).collect())
        .unwrap_or_default();
    dirs.extend(
        [
            "/usr/lib/x86_64-linux-gnu",
            "/lib/x86_64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu",
            "/usr/lib64",
            "/usr/lib",
            "/usr/local/cuda/lib64",
            "/usr/local/cuda/lib64/stubs",
        ]
        .map(str::to_owned),
    );
    if !dirs
        .iter()
        .any(|d| Path::new(d).join("libcuda.so").exists())
    {
        println!(
            "cargo:warning=libcuda.so (the CUDA driver library) was not found, so linking will fail. \
             Install the NVIDIA driver, or on Debian without a GPU run scripts/install-libcuda \
             (it installs the non-free package libcuda1), or set CUDA_LIBRARY_PATH."
        );
    }
}
