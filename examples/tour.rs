//! A tour of contexts: list the devices, open a context, print its properties, nest a
//! second context inside it, and share it with scoped threads.
//!
//! `cargo run --example tour`. Without a GPU it prints the driver's error and exits 1.

use std::process::ExitCode;

use cuda_brand::{
    ContextFlags, Device, ResourceLimit, Scheduling, with_context, with_primary_context,
};

fn main() -> ExitCode {
    match tour() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn tour() -> cuda_brand::Result<()> {
    println!(
        "driver: CUDA {}",
        format_version(cuda_brand::driver_version()?)
    );
    for device in Device::all()? {
        println!(
            "device {}: {} (compute {}, {:.1} GiB, {})",
            device.ordinal(),
            device.name()?,
            device.compute_capability()?,
            device.total_memory()? as f64 / (1u64 << 30) as f64,
            device.uuid()?,
        );
    }

    let device = Device::get(0)?;
    let flags = ContextFlags::new().schedule(Scheduling::BlockingSync);
    with_context(&device, flags, |ctx| {
        // The driver's handle: an escape hatch, hence `unsafe` (see "Safety profile" in the
        // crate docs); the guard's `Debug` form shows it too.
        // SAFETY: the handle is only printed.
        let handle = unsafe { ctx.as_raw() };
        println!("\ncontext {handle:?} on {}", ctx.device()?.name()?);
        println!("  API version        {}", ctx.api_version()?);
        println!("  flags              {:?}", ctx.flags()?);
        println!("  cache config       {:?}", ctx.cache_config()?);
        println!("  shared memory      {:?}", ctx.shared_memory_config()?);
        println!(
            "  stack size         {} bytes",
            ctx.limit(ResourceLimit::StackSize)?
        );
        println!(
            "  malloc heap        {} bytes",
            ctx.limit(ResourceLimit::MallocHeapSize)?
        );
        println!("  stream priorities  {:?}", ctx.stream_priority_range()?);

        // Nesting: the primary context is current inside, the outer guard still works, and
        // the outer context is current again afterwards.
        with_primary_context(&device, |primary| {
            // SAFETY: the handle is only printed.
            let handle = unsafe { primary.as_raw() };
            println!(
                "\nnested primary context {handle:?}; outer still answers: API {}",
                ctx.api_version()?
            );
            Ok::<_, cuda_brand::Error>(())
        })?;

        // Scoped threads share the context through a `SharedContext`.
        let shared = ctx.share();
        let answers = std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|i| s.spawn(move || shared.enter(|ctx| ctx.synchronize().map(|()| i))))
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().expect("worker panicked"))
                .collect::<cuda_brand::Result<Vec<_>>>()
        })?;
        println!("4 scoped threads entered the context and synchronized: {answers:?}");
        Ok(())
    })
}

fn format_version(v: i32) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}
