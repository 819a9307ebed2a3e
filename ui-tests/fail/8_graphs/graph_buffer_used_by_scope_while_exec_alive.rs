// Rule: while an executable graph exists, no other work can use memory the graph writes:
// a scope cannot borrow it (the graph holds it exclusively), so no replay races another
// stream's work on it.
//
// Without it: a kernel or copy on another stream writes the buffer while a replay writes
// or reads it, with nothing ordering the two.

use cuda_brand::prelude::*;

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let mut x = ctx.zeroed::<u32>(1024)?;
        let exec = ctx.capture(|g| g.fill(&mut x, 7))?.0.instantiate()?;
        let (a, b) = (ctx.new_stream()?, ctx.new_stream()?);
        a.scope_pair(&b, |sa, sb| {
            exec.launch(sa)?;
            sb.fill(&mut x, 1) // wrong: the graph writes `x`, unordered with this fill
        })
    })
}
