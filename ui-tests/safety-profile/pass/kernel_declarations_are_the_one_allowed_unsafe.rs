// Safety profile: what stays allowed. A program denies `unsafe` code at its root and allows
// it in one module, its kernel declarations (`Module::kernel`, `Module::kernel_mut`,
// `Function::typed`, `Library::kernel`): the one promise the crate cannot check, that the
// kernel's C parameter list is the declared one and it stays in bounds. Everything else it
// does is safe code, which the lint lets through: loading, allocating, copying, launching
// in a scope, and the items that are no escape hatch (`Device::as_raw`, a device ordinal;
// the `sys` types). Returns early without a GPU.

#![deny(unsafe_code)]

use cuda_brand::prelude::*;

/// The program's kernel declarations: its only `unsafe` code, each with its promise.
#[allow(unsafe_code)]
mod kernels {
    use cuda_brand::{In, Kernel, Module, Out};

    /// `vector_add(const float *a, size_t a_len, const float *b, size_t b_len, float *c,
    /// size_t c_len)`.
    pub fn vector_add<'m, 'ctx>(
        module: &'m Module<'ctx>,
    ) -> cuda_brand::Result<Kernel<'m, 'ctx, (In<f32>, In<f32>, Out<f32>)>> {
        // SAFETY: it reads a and b, writes c, and stays below the lengths.
        unsafe { module.kernel("vector_add") }
    }
}

fn main() -> cuda_brand::Result<()> {
    let Ok(device) = Device::get(0) else {
        return Ok(()); // no GPU here: compiling is the test
    };
    let ordinal: cuda_brand::sys::CUdevice = device.as_raw();
    println!("device {ordinal}");
    with_context(&device, ContextFlags::default(), |ctx| {
        let module = ctx.module_from_ptx(include_str!("../../../kernels/kernels.ptx"))?;
        let add = kernels::vector_add(&module)?;
        let a = ctx.from_slice(&[1.0f32, 2.0, 3.0])?;
        let b = ctx.from_slice(&[10.0f32, 20.0, 30.0])?;
        let mut c = ctx.zeroed::<f32>(3)?;
        ctx.new_stream()?
            .scope(|s| s.launch(&add, add.config_for(3)?, (&a, &b, &mut c)))?;
        assert_eq!(c.to_vec()?, [11.0, 22.0, 33.0]);
        Ok(())
    })
}
