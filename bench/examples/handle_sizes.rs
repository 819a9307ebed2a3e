//! The size of each handle type, in cuda-brand, cudarc 0.19.10 and rustacuda 0.1.3 (what
//! a value of the type takes where it is stored; an `Arc<T>` points to a heap block of
//! `T` and two reference counts, and `T`'s size is given next to it). For docs/driver-facts.md, "Handle sizes". Needs no GPU and
//! makes no driver call.
//!
//! `cargo run --release --example handle_sizes`; its recorded output is
//! `bench/examples/handle_sizes.out`.

use std::mem::size_of;
use std::sync::Arc;

use cuda_brand::{
    ContextGuard, DeviceBuffer, DeviceMut, DeviceRef, DeviceSlice, Event, Function, In, Kernel,
    Module, Out, PeerAccess, PinnedBuffer, SharedContext, Stream,
};

macro_rules! show {
    ($($t:ty),+ $(,)?) => {
        $(println!("  {:<44} {:>3} bytes", stringify!($t), size_of::<$t>());)+
    };
}

fn main() {
    println!(
        "size_of on {} ({}-bit pointers)",
        std::env::consts::ARCH,
        usize::BITS
    );
    println!("cuda-brand (this repository):");
    show!(
        ContextGuard<'static>,
        SharedContext<'static>,
        Stream<'static>,
        Event<'static>,
        Module<'static>,
        Function<'static, 'static>,
        Kernel<'static, 'static, (In<u32>, Out<u32>)>,
        DeviceBuffer<'static, u32>,
        &DeviceSlice<'static, u32>,
        DeviceRef<'static, 'static, u32>,
        DeviceMut<'static, 'static, u32>,
        PinnedBuffer<'static, u32>,
        PeerAccess<'static, 'static>,
    );
    println!("cudarc 0.19.10:");
    show!(
        cudarc::driver::CudaSlice<u32>,
        cudarc::driver::CudaView<'static, u32>,
        Arc<cudarc::driver::CudaContext>,
        cudarc::driver::CudaContext,
        Arc<cudarc::driver::CudaStream>,
        cudarc::driver::CudaStream,
        cudarc::driver::CudaEvent,
        Arc<cudarc::driver::CudaModule>,
        cudarc::driver::CudaFunction,
    );
    println!("rustacuda 0.1.3:");
    show!(
        rustacuda::context::Context,
        rustacuda::stream::Stream,
        rustacuda::event::Event,
        rustacuda::module::Module,
        rustacuda::function::Function<'static>,
        rustacuda::memory::DeviceBuffer<u32>,
        &rustacuda::memory::DeviceSlice<u32>,
        rustacuda::memory::DeviceBox<u32>,
    );
}
