// Rule: a library's kernel is looked up for a context with a guard that may load
// (`impl Allocates<'ctx>`): a plain guard, a setup-phase guard or a partition's, never a
// run-phase guard. `Library::function` and `Library::kernel` take that bound.
//
// `cuKernelGetFunction` loads the library's module into the context the first time it
// is asked for a kernel there (a library is loaded lazily, per context): device memory
// for its code and globals, allocated at that moment.
//
// Without it: the run phase, which promises no allocation (`cuda_brand::phase`), would
// allocate on the first lookup; the load can fail with `CUDA_ERROR_OUT_OF_MEMORY` in the
// middle of the run, or take device memory the program sized its pools around.
//
// Fix: look the kernel up in `Phases::setup`, and hand the `Kernel` to the run phase.

use cuda_brand::{ContextFlags, Device, Library, Out, with_phases};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    let library = Library::from_ptx(cuda_brand::samples::KERNELS_PTX)?;
    with_phases(&device, ContextFlags::default(), |phases| {
        let ((), run) = phases.setup(|_| Ok::<_, cuda_brand::Error>(()))?;
        // wrong: a lookup (and load) in the run phase
        // SAFETY: scale(float*, size_t, float) writes only x[0..x_len].
        let scale = unsafe { library.kernel::<(Out<f32>, f32)>(run, "scale") }?;
        let _ = scale;
        Ok::<_, cuda_brand::Error>(())
    })
}
