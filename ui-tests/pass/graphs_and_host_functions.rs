// The uses the graph and host-function rules must keep allowed: a capture whose input and
// output the graph lends back between replays, replays on two streams and in a multi-stream
// scope, an update to other buffers, the buffers free again once the graph is gone, and host
// functions that borrow from their environment and read bound host memory in stream order.
// Returns early without a GPU.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let Ok(device) = Device::get(0) else {
        return Ok(());
    };
    with_context(&device, ContextFlags::default(), |ctx| {
        let module = ctx.module_from_ptx(include_str!("../../kernels/kernels.ptx"))?;
        // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
        let scale = unsafe { module.kernel::<(Out<f32>, f32)>("scale") }?;
        let mut input = ctx.pinned_zeroed::<f32>(256)?;
        let mut output = ctx.pinned_zeroed::<f32>(256)?;
        let (mut x, mut other) = (ctx.zeroed::<f32>(256)?, ctx.zeroed::<f32>(256)?);
        let (graph, (inp, out)) = ctx.capture(|g| {
            let (input, inp) = g.lend_host(&mut input);
            let (output, out) = g.lend_host(&mut output);
            let x = g.bind_mut(&mut x);
            g.copy_from_host(x, input.into_ref())?;
            g.launch(&scale, LaunchConfig::linear(1, 256), (x, 2.0f32))?;
            g.copy_to_host(output, x.into_ref())?;
            Ok((inp, out))
        })?;
        let mut exec = graph.instantiate()?;
        let (s1, s2) = (ctx.new_stream()?, ctx.new_stream()?);
        exec.host_mut(inp).fill(1.0);
        s1.scope(|s| exec.launch(s))?;
        assert_eq!(exec.host(out)[0], 2.0);
        s2.scope(|s| exec.launch(s))?;
        s1.scope_pair(&s2, |a, b| {
            exec.launch(a)?;
            exec.launch(b)
        })?;
        drop(exec); // `input`, `output` and `x` are free again
        // a graph of `x`, rebound to `other`: afterwards `x` is free again, `other` is held
        let (again, ()) = ctx.capture(|g| {
            let o = g.bind_mut(&mut other);
            g.launch(&scale, LaunchConfig::linear(1, 256), (o, 2.0f32))
        })?;
        let first = ctx.capture(|g| g.fill(&mut x, 1.0f32))?.0.instantiate()?;
        let exec = match first.update_or_keep(again) {
            Ok(updated) => updated,
            Err(refused) => {
                println!("{}", refused.error());
                return Ok(());
            }
        };
        s1.scope(|s| exec.launch(s))?;
        drop(exec);
        println!("{:?} {:?}", x.to_vec()?[0], other.to_vec()?[0]);
        // host functions
        let count = AtomicUsize::new(0);
        let seen = Mutex::new(Vec::new());
        let mut host = vec![0.0f32; 256];
        s1.scope(|s| {
            let (d, h) = (s.bind_mut(&mut x), s.bind_host_mut(&mut host));
            s.fill(d, 3.0)?;
            s.copy_to_host_view(h, d.into_ref())?;
            s.host_fn_on(h, |values| seen.lock().unwrap().push(values[0]))?;
            s.host_fn(|| {
                count.fetch_add(1, Ordering::Relaxed);
            })
        })?;
        assert_eq!((count.into_inner(), seen.into_inner().unwrap()), (1, vec![3.0]));
        Ok(())
    })
}
