//! What two other Rust crates over the driver API do with the misuses that cuda-brand
//! refuses to compile, all in safe code except where a crate itself makes launching
//! `unsafe`: cudarc 0.19.10 (two non-primary contexts A and B on device 0) and
//! rustacuda 0.1.3. For docs/driver-facts.md, "What rustacuda and cudarc do".
//!
//! Each case runs in a child process of its own (this program started again with the
//! case's name), so that a segmentation fault or a panic ends only that case and is
//! recorded as the child's exit status. The parent prints what each child printed, how it
//! ended, and at the end one line per case.
//!
//! ```text
//! cargo run --release --example peer_crates            # every case
//! cargo run --release --example peer_crates -- CASE    # one case, in this process
//! ```
//!
//! Its recorded output is `bench/examples/peer_crates.out`. Without a GPU every case
//! prints the driver's error and exits 1.

use std::process::{Command, ExitCode};
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaModule, DevicePtr, LaunchConfig, PushKernelArg};
use rustacuda::memory::CopyDestination;

const PTX: &str = include_str!("../../kernels/kernels.ptx");

/// Every case: its name (the child's argument), the crate, and the misuse.
const CASES: &[(&str, &str, &str)] = &[
    (
        "cudarc-kernel-of-b-writes-buffer-of-a",
        "cudarc 0.19.10",
        "kernel of context B writes a buffer of context A",
    ),
    (
        "cudarc-function-of-a-on-stream-of-b",
        "cudarc 0.19.10",
        "function of A launched on a stream of B",
    ),
    (
        "cudarc-htod-on-stream-of-b-into-buffer-of-a",
        "cudarc 0.19.10",
        "`memcpy_htod` on B's stream into A's buffer",
    ),
    (
        "cudarc-buffer-kept-after-context-dropped",
        "cudarc 0.19.10",
        "drop context A (and its stream), keep A's buffer",
    ),
    (
        "rustacuda-buffer-kept-after-context-dropped",
        "rustacuda 0.1.3",
        "keep a `DeviceBuffer` after its `Context` is dropped",
    ),
    (
        "rustacuda-stream-synchronize-after-context-dropped",
        "rustacuda 0.1.3",
        "`Stream::synchronize` after its `Context` is dropped",
    ),
    (
        "rustacuda-copy-while-other-context-current",
        "rustacuda 0.1.3",
        "copy from and into A's buffer while B is current",
    ),
];

type Res = Result<(), Box<dyn std::error::Error>>;

fn main() -> ExitCode {
    if let Some(case) = std::env::args().nth(1) {
        let result = match case.as_str() {
            "cudarc-kernel-of-b-writes-buffer-of-a" => cudarc_kernel_of_b_writes_buffer_of_a(),
            "cudarc-function-of-a-on-stream-of-b" => cudarc_function_of_a_on_stream_of_b(),
            "cudarc-htod-on-stream-of-b-into-buffer-of-a" => cudarc_htod_on_stream_of_b(),
            "cudarc-buffer-kept-after-context-dropped" => cudarc_buffer_kept(),
            "rustacuda-buffer-kept-after-context-dropped" => rustacuda_buffer_kept(),
            "rustacuda-stream-synchronize-after-context-dropped" => rustacuda_stream_sync(),
            "rustacuda-copy-while-other-context-current" => rustacuda_copy_other_current(),
            other => {
                eprintln!("peer_crates: no case {other:?}");
                return ExitCode::from(2);
            }
        };
        return match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                println!("setup failed: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let exe = std::env::current_exe().expect("the probe's own path");
    let mut summary = Vec::new();
    for (case, krate, misuse) in CASES {
        println!("=== {krate}: {misuse} ({case})");
        let out = Command::new(&exe)
            .arg(case)
            .output()
            .expect("starting the child");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        for line in stdout.lines() {
            println!("  {line}");
        }
        for line in stderr.lines() {
            println!("  stderr: {line}");
        }
        let ended = ended(&out.status);
        println!("  => {ended}");
        let mut what: Vec<String> = stdout.lines().map(str::to_owned).collect();
        what.extend(stderr.lines().take(1).map(|l| format!("stderr: {l}")));
        what.push(ended);
        summary.push(format!("| {misuse} | {krate} | {} |", what.join("; ")));
    }
    println!("=== one line per case");
    println!("| misuse | crate | what happened at run time |");
    println!("|---|---|---|");
    for line in summary {
        println!("{line}");
    }
    ExitCode::SUCCESS
}

fn ended(status: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(11)) => "killed by signal 11 (segmentation fault)".to_owned(),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        (None, None) => format!("{status}"),
    }
}

fn scale_config() -> LaunchConfig {
    LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (32, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Four floats at `ptr`, memory of `ctx`, read with raw driver calls: independent of the
/// error state cudarc keeps per context (after an error, cudarc refuses further calls).
fn raw_read(ctx: &CudaContext, ptr: u64) -> String {
    use cuda_driver_sys::{CUresult, cuCtxSetCurrent, cuMemcpyDtoH_v2};
    let mut host = [0f32; 4];
    // SAFETY: `ctx` is alive (borrowed); `ptr` is an allocation of at least 16 bytes of
    // it, still alive (its `CudaSlice` is alive in the caller); `host` has 16 bytes.
    let r = unsafe { cuCtxSetCurrent(ctx.cu_ctx().cast()) };
    if r != CUresult::CUDA_SUCCESS {
        return format!("cuCtxSetCurrent -> {r:?}");
    }
    // SAFETY: as above.
    let r = unsafe { cuMemcpyDtoH_v2(host.as_mut_ptr().cast(), ptr, 16) };
    format!("cuMemcpyDtoH -> {r:?}, {host:?}")
}

/// The device address of a cudarc buffer (taken before any misuse).
fn address(
    buffer: &cudarc::driver::CudaSlice<f32>,
    stream: &Arc<cudarc::driver::CudaStream>,
) -> u64 {
    let (ptr, _record) = buffer.device_ptr(stream);
    ptr
}

fn cudarc_module(ctx: &Arc<CudaContext>) -> Result<Arc<CudaModule>, cudarc::driver::DriverError> {
    ctx.load_module(cudarc::nvrtc::Ptx::from_src(PTX))
}

/// B's `scale(x, 4, 7.0)` on B's stream, given A's buffer of 1.0s.
fn cudarc_kernel_of_b_writes_buffer_of_a() -> Res {
    let a = CudaContext::new_non_primary(0, 0)?;
    let stream_a = a.new_stream()?;
    let mut in_a = stream_a.clone_htod(&[1.0f32; 4])?;
    let ptr_a = address(&in_a, &stream_a);
    stream_a.synchronize()?;
    let b = CudaContext::new_non_primary(0, 0)?;
    let scale_of_b = cudarc_module(&b)?.load_function("scale")?;
    let stream_b = b.new_stream()?;
    let (n, k) = (4usize, 7.0f32);
    let mut launch = stream_b.launch_builder(&scale_of_b);
    launch.arg(&mut in_a).arg(&n).arg(&k);
    // SAFETY: scale(float *x, size_t x_len, float k) has this parameter list and stays in
    // bounds; which context the buffer belongs to is the misuse under test.
    let launched = unsafe { launch.launch(scale_config()) };
    println!("launch on B's stream with A's buffer -> {launched:?}");
    println!("B's stream synchronize -> {:?}", stream_b.synchronize());
    println!(
        "A's buffer read back on A's stream -> {:?}",
        stream_a.clone_dtoh(&in_a)
    );
    println!(
        "A's buffer read back with raw driver calls -> {}",
        raw_read(&a, ptr_a)
    );
    Ok(())
}

/// A's `scale` launched on B's stream, with A's buffer.
fn cudarc_function_of_a_on_stream_of_b() -> Res {
    let a = CudaContext::new_non_primary(0, 0)?;
    let scale_of_a = cudarc_module(&a)?.load_function("scale")?;
    let stream_a = a.new_stream()?;
    let mut in_a = stream_a.clone_htod(&[1.0f32; 4])?;
    let ptr_a = address(&in_a, &stream_a);
    stream_a.synchronize()?;
    let b = CudaContext::new_non_primary(0, 0)?;
    let stream_b = b.new_stream()?;
    let (n, k) = (4usize, 7.0f32);
    let mut launch = stream_b.launch_builder(&scale_of_a);
    launch.arg(&mut in_a).arg(&n).arg(&k);
    // SAFETY: as above; the function's context is the misuse under test.
    let launched = unsafe { launch.launch(scale_config()) };
    println!("launch of A's function on B's stream -> {launched:?}");
    println!("B's stream synchronize -> {:?}", stream_b.synchronize());
    println!(
        "A's buffer read back on A's stream -> {:?}",
        stream_a.clone_dtoh(&in_a)
    );
    println!(
        "A's buffer read back with raw driver calls -> {}",
        raw_read(&a, ptr_a)
    );
    Ok(())
}

/// A copy of 2.0s into A's buffer, queued on B's stream.
fn cudarc_htod_on_stream_of_b() -> Res {
    let a = CudaContext::new_non_primary(0, 0)?;
    let stream_a = a.new_stream()?;
    let mut in_a = stream_a.clone_htod(&[1.0f32; 4])?;
    let ptr_a = address(&in_a, &stream_a);
    stream_a.synchronize()?;
    let b = CudaContext::new_non_primary(0, 0)?;
    let stream_b = b.new_stream()?;
    println!(
        "memcpy_htod on B's stream into A's buffer -> {:?}",
        stream_b.memcpy_htod(&[2.0f32; 4], &mut in_a)
    );
    println!("B's stream synchronize -> {:?}", stream_b.synchronize());
    println!(
        "B's stream synchronize again -> {:?}",
        stream_b.synchronize()
    );
    println!(
        "A's buffer read back on A's stream -> {:?}",
        stream_a.clone_dtoh(&in_a)
    );
    println!(
        "A's buffer read back with raw driver calls -> {}",
        raw_read(&a, ptr_a)
    );
    Ok(())
}

/// Every handle of context A dropped but its buffer, which is then used.
fn cudarc_buffer_kept() -> Res {
    let a = CudaContext::new_non_primary(0, 0)?;
    let stream_a = a.new_stream()?;
    let in_a = stream_a.clone_htod(&[1.0f32; 4])?;
    drop(stream_a);
    drop(a);
    println!("context A and its stream dropped by the program; the buffer is kept");
    let stream = in_a.stream().clone();
    println!(
        "strong references to A's context still held: {}",
        Arc::strong_count(stream.context())
    );
    println!(
        "the buffer read back on its own stream -> {:?}",
        stream.clone_dtoh(&in_a)
    );
    Ok(())
}

fn rustacuda_context() -> Result<rustacuda::context::Context, rustacuda::error::CudaError> {
    use rustacuda::context::{Context, ContextFlags};
    rustacuda::init(rustacuda::CudaFlags::empty())?;
    let device = rustacuda::device::Device::get_device(0)?;
    Context::create_and_push(ContextFlags::MAP_HOST | ContextFlags::SCHED_AUTO, device)
}

/// A `DeviceBuffer` used and dropped after its `Context` is dropped.
fn rustacuda_buffer_kept() -> Res {
    let ctx = rustacuda_context()?;
    let mut buffer = rustacuda::memory::DeviceBuffer::from_slice(&[1u32; 4])?;
    drop(ctx);
    println!("Context dropped; the DeviceBuffer is kept");
    let mut host = [0u32; 4];
    println!("copy_to -> {:?}", buffer.copy_to(&mut host[..]));
    println!("copy_from -> {:?}", buffer.copy_from(&[2u32; 4][..]));
    println!("dropping the DeviceBuffer ...");
    drop(buffer);
    println!("(the drop returned)");
    Ok(())
}

/// `Stream::synchronize` after the stream's `Context` is dropped.
fn rustacuda_stream_sync() -> Res {
    use rustacuda::stream::{Stream, StreamFlags};
    let ctx = rustacuda_context()?;
    let stream = Stream::new(StreamFlags::NON_BLOCKING, None)?;
    drop(ctx);
    println!("Context dropped; the Stream is kept");
    println!("Stream::synchronize ...");
    println!("Stream::synchronize -> {:?}", stream.synchronize());
    Ok(())
}

/// Copies from and into A's buffer while B is current.
fn rustacuda_copy_other_current() -> Res {
    use rustacuda::context::{Context, ContextFlags};
    let ctx_a = rustacuda_context()?;
    let mut in_a = rustacuda::memory::DeviceBuffer::from_slice(&[1u32; 4])?;
    let device = rustacuda::device::Device::get_device(0)?;
    let ctx_b =
        Context::create_and_push(ContextFlags::MAP_HOST | ContextFlags::SCHED_AUTO, device)?;
    println!("Context B created, and current");
    println!(
        "copy_from into A's buffer -> {:?}",
        in_a.copy_from(&[2u32; 4][..])
    );
    let mut host = [0u32; 4];
    println!(
        "copy_to from A's buffer -> {:?}",
        in_a.copy_to(&mut host[..])
    );
    println!("=> host: {host:?}");
    drop(in_a);
    drop(ctx_b);
    drop(ctx_a);
    Ok(())
}
