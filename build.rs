//! Makes `-lcuda` link on a machine without the CUDA driver library.
//!
//! The crate loads the driver at run time (`src/driver.rs`) and references no symbol of it,
//! but `cuda-driver-sys`, whose types it uses, always asks the linker for `-lcuda`. Where
//! no `libcuda.so` is on the linker's path, this writes `$OUT_DIR/stub/libcuda.so`, a GNU
//! ld linker script that is only a comment, and adds its directory to the search path:
//! `-lcuda` then resolves to nothing, and a binary gets no `NEEDED libcuda` entry.
//!
//! Where a real `libcuda.so` is found, the stub stays off the search path: the linker
//! takes the real one, and since rustc links with `--as-needed`, a binary that calls no
//! driver symbol itself still gets no `NEEDED libcuda` entry, while one that does (a
//! benchmark comparing raw driver calls) still links. The stub would shadow the real
//! library for every binary of the build, because `-L` directories come before the
//! linker's default ones.

use std::path::{Path, PathBuf};
use std::process::Command;

const STUB: &str = "/* cuda-brand: satisfies -lcuda; the driver is loaded at run time */\n";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CUDA_LIBRARY_PATH");
    println!("cargo:rerun-if-env-changed=LIBRARY_PATH");
    println!("cargo:rerun-if-env-changed=CC");
    // GNU ld scripts: Linux targets only (the MSVC linker and ld64 do not read them).
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return;
    }
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let stub_dir = out_dir.join("stub");
    std::fs::create_dir_all(&stub_dir).expect("create $OUT_DIR/stub");
    std::fs::write(stub_dir.join("libcuda.so"), STUB).expect("write $OUT_DIR/stub/libcuda.so");

    match real_libcuda() {
        Some(found) => {
            // Removing it makes cargo run this script again (and use the stub).
            println!("cargo:rerun-if-changed={}", found.display());
        }
        None => {
            println!("cargo:rustc-link-search=native={}", stub_dir.display());
            // Installing a driver library there makes cargo run this script again.
            for dir in SYSTEM_DIRS {
                if Path::new(dir).is_dir() {
                    println!("cargo:rerun-if-changed={dir}");
                }
            }
        }
    }
}

/// Where distributions install the driver library.
const SYSTEM_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
];

/// A `libcuda.so` that `-lcuda` would find: in a directory `cuda-driver-sys` adds to the
/// search path, or (as the C compiler driving the link reports) on the default one.
fn real_libcuda() -> Option<PathBuf> {
    cuda_driver_sys_dirs()
        .into_iter()
        .map(|dir| dir.join("libcuda.so"))
        .find(|lib| lib.exists())
        .or_else(compiler_finds_libcuda)
}

/// The directories `cuda-driver-sys` 0.3's build script passes to the linker.
fn cuda_driver_sys_dirs() -> Vec<PathBuf> {
    let mut bases: Vec<PathBuf> = std::env::var("CUDA_LIBRARY_PATH")
        .map(|p| p.split(':').map(PathBuf::from).collect())
        .unwrap_or_default();
    bases.push("/opt/cuda".into());
    bases.push("/usr/local/cuda".into());
    if let Ok(entries) = std::fs::read_dir("/usr/local") {
        bases.extend(
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("cuda-"))
                .map(|e| e.path()),
        );
    }
    let mut dirs = Vec::new();
    for base in bases {
        dirs.push(base.join("lib64"));
        dirs.push(base.join("lib64/stubs"));
        dirs.push(base.join("targets/x86_64-linux/lib"));
        dirs.push(base.join("targets/x86_64-linux/lib/stubs"));
    }
    dirs
}

/// `cc -print-file-name=libcuda.so` prints the path where the compiler's link would find
/// the library, or the bare name when it would not.
fn compiler_finds_libcuda() -> Option<PathBuf> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let output = Command::new(cc)
        .arg("-print-file-name=libcuda.so")
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8(output.stdout).ok()?.trim());
    (output.status.success() && path.is_absolute() && path.exists()).then_some(path)
}
