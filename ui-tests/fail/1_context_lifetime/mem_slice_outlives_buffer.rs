// Rule: a view of device memory (`&buf[..]`, a `&DeviceSlice`) cannot outlive the
// `DeviceBuffer` it borrows from, exactly as a `&[T]` cannot outlive its `Vec<T>`.
//
// The view is an ordinary borrow of the buffer, and dropping the buffer frees the memory
// (`cuMemFree`), so the borrow checker ends the view's use before the drop.
//
// Without it: the view would hold the address of freed device memory. Measured for this
// case (H100, driver 580.159.04): a copy from a freed address returns
// CUDA_ERROR_INVALID_VALUE, but only until the next allocation of the same size, which gets
// the very same address; from then on the copy returns CUDA_SUCCESS and reads the new
// allocation's data.

use cuda_brand::{ContextFlags, Device, DeviceBuffer, with_context};

fn main() -> cuda_brand::Result<()> {
    let device = Device::get(0)?;
    with_context(&device, ContextFlags::default(), |ctx| {
        let first_half;
        {
            let buf = DeviceBuffer::from_slice(ctx, &[1u32, 2, 3, 4])?;
            first_half = &buf[..2];
        } // `buf` is freed here
        assert_eq!(first_half.to_vec()?, [1, 2]);
        Ok(())
    })
}
