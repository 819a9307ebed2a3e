// Safety profile: what stays. A program built with the profile can deny `unsafe` code
// everywhere but in its kernel declarations (`Module::kernel`, `Module::kernel_mut`,
// `Function::typed`): the one promise the crate cannot check, that the kernel's C
// parameter list is the declared one and it stays in bounds. `#[derive(DeviceCopy)]`
// checks its own `unsafe impl`, so it needs no `allow`.

#![deny(unsafe_code)]

use cuda_brand::prelude::*;
use cuda_brand::{Kernel, Module};

#[derive(Clone, Copy, Debug, PartialEq, DeviceCopy)]
#[repr(C)]
struct Pair {
    a: f32,
    b: f32,
}

/// The program's one `unsafe` block, allowed here and nowhere else.
#[allow(unsafe_code)]
fn declare_vector_add<'m, 'ctx>(
    module: &'m Module<'ctx>,
) -> cuda_brand::Result<Kernel<'m, 'ctx, (In<f32>, In<f32>, Out<f32>)>> {
    // SAFETY: `vector_add(const float *a, size_t a_len, const float *b, size_t b_len,
    // float *c, size_t c_len)` reads a and b, writes c, and stays below the lengths.
    unsafe { module.kernel::<(In<f32>, In<f32>, Out<f32>)>("vector_add") }
}

fn main() -> cuda_brand::Result<()> {
    let Ok(device) = Device::get(0) else {
        return Ok(()); // no GPU here: compiling is the test
    };
    with_context(&device, ContextFlags::default(), |ctx| {
        let module = ctx.load_ptx(include_str!("../../../kernels/kernels.ptx"))?;
        let add = declare_vector_add(&module)?;
        let a = ctx.from_slice(&[1.0f32, 2.0, 3.0])?;
        let b = ctx.from_slice(&[10.0f32, 20.0, 30.0])?;
        let mut c = ctx.zeroed::<f32>(3)?;
        ctx.stream()?
            .scope(|s| s.launch(&add, add.config_for(3)?, (&a, &b, &mut c)))?;
        assert_eq!(c.to_vec()?, [11.0, 22.0, 33.0]);
        let pairs = ctx.from_slice(&[Pair { a: 1.0, b: 2.0 }; 4])?;
        assert_eq!(pairs.to_vec()?, [Pair { a: 1.0, b: 2.0 }; 4]);
        Ok(())
    })
}
