//! Several scoped threads share one context, each with its own stream: every thread
//! scales its own part of one buffer on the GPU, then the main thread checks the result.
//!
//! `cargo run --release --example threads`. Without a GPU it prints the driver's error
//! and exits 1.

use std::process::ExitCode;

use cuda_brand::{
    ContextFlags, Device, DeviceBuffer, Error, LaunchConfig, Module, Out, Stream, StreamFlags,
    with_context,
};

const THREADS: usize = 4;
const PER_THREAD: usize = 1 << 20;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), Error> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let module = Module::from_ptx(ctx, include_str!("../kernels/kernels.ptx"))?;
        // SAFETY: `scale(float *x, size_t x_len, float k)` writes only x[0..x_len].
        let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
        let mut data = DeviceBuffer::from_slice(ctx, &vec![1.0f32; THREADS * PER_THREAD])?;
        let shared = ctx.share();

        std::thread::scope(|s| {
            let workers: Vec<_> = data
                .chunks_mut(PER_THREAD)
                .enumerate()
                .map(|(i, part)| {
                    let scale = &scale;
                    s.spawn(move || {
                        shared.enter(|ctx| {
                            // each thread its own stream, in the shared context
                            let stream = Stream::new(ctx, StreamFlags::NonBlocking)?;
                            stream.scope(|s| {
                                s.launch(
                                    scale,
                                    LaunchConfig::linear(256, 256),
                                    (part, (i + 1) as f32),
                                )
                            })?;
                            // SAFETY: the handle is only printed.
                            let handle = unsafe { stream.as_raw() };
                            println!(
                                "thread {i}: stream {handle:?} scaled its {PER_THREAD} elements by {}",
                                i + 1
                            );
                            Ok::<_, Error>(())
                        })
                    })
                })
                .collect();
            workers
                .into_iter()
                .try_for_each(|w| w.join().expect("worker panicked"))
        })?;

        let result = data.to_vec()?;
        for (i, part) in result.chunks(PER_THREAD).enumerate() {
            assert!(part.iter().all(|&x| x == (i + 1) as f32), "part {i}");
        }
        println!("verified: {THREADS} threads, {} elements", result.len());
        Ok(())
    })
}
