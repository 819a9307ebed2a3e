// Rule: memory passed to a captured launch for a pointer parameter (`InPtr<T>`,
// `OutPtr<T>`) is held by the graph for its whole life, as a slice argument is: `&mut y`
// for an `OutPtr` borrows `y` (here a whole pitched buffer, `pitch_bytes() * rows`
// bytes) exclusively until the graph and every executable graph made from it are dropped.
//
// Without it: the graph's kernel node keeps `y`'s address, and every replay writes
// there; dropped, `y` goes back to the allocator, and a replay writes memory that is no
// longer `y` (another buffer's, a pool's next block), reported by no call.
//
// Fix: drop `exec` before `y`, or keep `y` for as long as the graph is replayed.

use cuda_brand::prelude::*;
use cuda_brand::DeviceBuffer2D;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let module = ctx.module_from_ptx(cuda_brand::samples::KERNELS_PTX)?;
        // SAFETY: saxpy(int n, float a, const float *x, float *y) reads x[0..n] and writes
        // y[0..n]; every launch below passes n at most both lengths.
        let saxpy = unsafe { module.kernel::<(i32, f32, InPtr<f32>, OutPtr<f32>)>("saxpy") }?;
        let x = ctx.zeroed::<f32>(64)?;
        let mut y = DeviceBuffer2D::<f32>::zeroed(ctx, 64, 1)?;
        let config = LaunchConfig::linear(1, 64);
        let (graph, ()) = ctx.capture(|g| g.launch(&saxpy, config, (64i32, 2.0f32, &x, &mut y)))?;
        let exec = graph.instantiate()?;
        // wrong: `y` freed while `exec` may still replay into it
        drop(y);
        ctx.new_stream()?.scope(|s| exec.launch(s))
    })
}
