// Allowed: a `SharedContext` (from `ctx.share()`) goes to scoped threads of a
// `std::thread::scope` opened inside the closure; each worker `enter`s the context and gets
// a guard of the same brand, and sends plain data back through `join`.

use cuda_brand::{ContextFlags, Device, DeviceBuffer, with_context};

fn four_workers(device: &Device) -> cuda_brand::Result<Vec<u32>> {
    with_context(device, ContextFlags::default(), |ctx| {
        let shared = ctx.share();
        std::thread::scope(|s| {
            let workers: Vec<_> = (0..4u32)
                .map(|i| {
                    s.spawn(move || {
                        shared.enter(|ctx| {
                            let buffer = DeviceBuffer::from_slice(ctx, &[i; 8])?;
                            ctx.synchronize()?;
                            Ok(buffer.to_vec()?.iter().sum::<u32>())
                        })
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().expect("worker panicked"))
                .collect()
        })
    })
}

fn main() {
    let Ok(device) = Device::get(0) else { return };
    match four_workers(&device) {
        Ok(sums) => println!("sums {sums:?}"),
        Err(e) => println!("error: {e}"),
    }
}
