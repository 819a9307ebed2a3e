//! Makes `-lcuda` link on a machine without the CUDA driver library.
//!
//! The crate loads the driver at run time (`src/driver/`) and references no symbol of it,
//! but `cuda-driver-sys`, whose types it uses, always asks the linker for `-lcuda`. Where
//! no `libcuda.so` is on the linker's path, this writes `$OUT_DIR/stub/libcuda.a`, an
//! empty static archive, and adds its directory to the search path: `-lcuda` then resolves
//! to an archive with no members, and a binary gets no `NEEDED libcuda` entry.
//!
//! The stub must be something the *dynamic* loader never opens: cargo puts every link
//! search directory inside the target directory on `LD_LIBRARY_PATH` for `cargo run` and
//! `cargo test`, and the crate's loader asks for `libcuda.so` by name. An archive is named
//! `libcuda.a`, which `dlopen("libcuda.so")` never considers (an earlier stub, a linker
//! script named `libcuda.so`, was found there and reported as "invalid ELF header"). GNU
//! ld, gold and lld (rustc's default linker on x86_64 Linux) take an archive for `-lcuda`
//! when no `libcuda.so` comes first, and one without members adds nothing to the binary.
//!
//! Where a real `libcuda.so` is found, the stub stays off the search path: the linker
//! takes the real one, and since rustc links with `--as-needed`, a binary that calls no
//! driver symbol itself still gets no `NEEDED libcuda` entry, while one that does (a
//! benchmark comparing raw driver calls) still links. The stub would shadow the real
//! library for every binary of the build, because `-L` directories come before the
//! linker's default ones.

use std::path::{Path, PathBuf};
use std::process::Command;

/// An ar archive with no members: the magic line and nothing else.
const STUB: &[u8] = b"!<arch>\n";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=CUDA_LIBRARY_PATH");
    println!("cargo:rerun-if-env-changed=LIBRARY_PATH");
    println!("cargo:rerun-if-env-changed=CC");
    // Linux targets only: the placeholder is a GNU-style archive for `-lcuda` (the MSVC
    // linker would look for `cuda.lib`), and only there is the driver `libcuda.so`.
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("linux") {
        return;
    }
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let stub_dir = out_dir.join("stub");
    std::fs::create_dir_all(&stub_dir).expect("create $OUT_DIR/stub");
    // An earlier version of this script wrote a linker script here under the shared
    // library's name; cargo keeps `OUT_DIR` between builds, and the loader would find it.
    match std::fs::remove_file(stub_dir.join("libcuda.so")) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => panic!("remove the old $OUT_DIR/stub/libcuda.so: {e}"),
    }
    std::fs::write(stub_dir.join("libcuda.a"), STUB).expect("write $OUT_DIR/stub/libcuda.a");
    // The loader never reports a file in this directory (`failure_text` in
    // `src/driver/dylib.rs`), and the no-device tests put it on `LD_LIBRARY_PATH` as cargo
    // does.
    println!(
        "cargo:rustc-env=CUDA_BRAND_LINK_STUB_DIR={}",
        stub_dir.display()
    );

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
