//! [`Batch`]: what an awaited batch owns while its work runs, and the views its closure
//! gets of it.

use std::sync::Arc;

use crate::launch::sealed::Crate;
use crate::launch::{KernelParams, ScopedKernel};
use crate::memory::{DeviceBuffer, DeviceCopy, PinnedBuffer};
use crate::owned::handle::Owned;
use crate::owned::handle::OwnedContext;
use crate::owned::kernel::OwnedKernel;
use crate::scope::{DeviceMut, DeviceRef, HostMut};

pub(crate) mod sealed {
    /// Seals [`Batch`](super::Batch): only the crate's types implement it.
    pub trait Sealed {}
}

/// What an awaited batch ([`Owned::submit`](crate::owned::Owned::submit)) owns while its
/// work runs, handed back when it is done: owned values only, so that no borrow can end
/// while the GPU still uses memory (a forgotten future ends no borrow, it leaks):
///
/// | part | the closure gets |
/// |---|---|
/// | [`OwnedDeviceBuffer<T>`](crate::owned::OwnedDeviceBuffer) | [`DeviceMut<'scope, 'ctx, T>`](DeviceMut): written |
/// | `Arc<OwnedDeviceBuffer<T>>` | [`DeviceRef<'scope, 'ctx, T>`](DeviceRef): read (other batches may read it at once; nobody can write it while it is shared) |
/// | [`OwnedPinnedBuffer<T>`](crate::owned::OwnedPinnedBuffer), `Vec<T>` | [`HostMut<'scope, T>`](HostMut): host memory, for `copy_from_host_view` and `copy_to_host_view` (see below) |
/// | `Arc<OwnedKernel<P>>` | [`ScopedKernel<'scope, 'ctx, P>`](ScopedKernel) |
/// | `()`, and tuples of up to eight parts | `()`, the tuple of the parts' views |
///
/// **Page-locked or pageable host memory.** The driver copies between the device and
/// pageable memory (a `Vec`) synchronously with the host: a copy into a `Vec` queued in a
/// batch makes [`submit`](crate::owned::Owned::submit) itself wait until the copy is done,
/// that is, until the work queued before it is done (measured on an H100: a batch of a
/// 100 ms kernel and a copy into a `Vec` returned from `submit` after 104 ms). A copy from
/// a `Vec` returns once the driver has staged it. For work that is awaited rather than
/// waited for, use an [`OwnedPinnedBuffer`](crate::owned::OwnedPinnedBuffer).
///
/// Sealed: the crate decides what a batch can hold (its methods take a value only the
/// crate can make).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be part of an awaited batch",
    label = "a batch owns everything its work touches",
    note = "a batch is owned values, or a tuple of them: `OwnedDeviceBuffer<T>` (written), `Arc<OwnedDeviceBuffer<T>>` (read), `OwnedPinnedBuffer<T>` or `Vec<T>` (host memory), `Arc<OwnedKernel<P>>`; a borrow could end while the GPU still uses it (a forgotten future)",
    note = "a branded value becomes an owned part with `OwnedContext::unbind(ctx, value)`",
    note = "see the guide, chapter 11 (`cuda_brand::guide`)"
)]
pub trait Batch: sealed::Sealed + Send + 'static {
    /// The views the batch's closure gets, for a scope `'scope` of the context `'ctx`.
    type Views<'scope, 'ctx>;

    /// `Ok` if every owned part is of `home`'s context.
    #[doc(hidden)]
    fn check(&self, home: &OwnedContext, by: Crate) -> crate::error::Result<()>;

    /// The views of the parts.
    ///
    /// # Safety
    /// The scope `'scope` is of the context `'ctx`, which is `home`'s (checked), and the
    /// batch is neither moved out of, touched nor dropped until that scope's work is done.
    #[doc(hidden)]
    unsafe fn views<'scope, 'ctx>(&mut self, by: Crate) -> Self::Views<'scope, 'ctx>;
}

type CheckResult = crate::error::Result<()>;

impl<T: DeviceCopy + Send + Sync> sealed::Sealed for Owned<DeviceBuffer<'static, T>> {}
impl<T: DeviceCopy + Send + Sync> Batch for Owned<DeviceBuffer<'static, T>> {
    type Views<'scope, 'ctx> = DeviceMut<'scope, 'ctx, T>;

    fn check(&self, home: &OwnedContext, _: Crate) -> CheckResult {
        same_home(self.context(), home)
    }

    unsafe fn views<'scope, 'ctx>(&mut self, _: Crate) -> Self::Views<'scope, 'ctx> {
        // SAFETY: the caller's promise: `self` is of the scope's context and owned by the
        // batch until the scope's work is done.
        let buf = unsafe { self.value_mut() };
        DeviceMut::new(buf.device_ptr(), buf.len())
    }
}

impl<T: DeviceCopy + Send + Sync> sealed::Sealed for Arc<Owned<DeviceBuffer<'static, T>>> {}
impl<T: DeviceCopy + Send + Sync> Batch for Arc<Owned<DeviceBuffer<'static, T>>> {
    type Views<'scope, 'ctx> = DeviceRef<'scope, 'ctx, T>;

    fn check(&self, home: &OwnedContext, _: Crate) -> CheckResult {
        same_home(self.context(), home)
    }

    unsafe fn views<'scope, 'ctx>(&mut self, _: Crate) -> Self::Views<'scope, 'ctx> {
        // SAFETY: as above; shared, and nobody writes memory behind an `Arc` of the handle
        // (writing needs `&mut`, which a shared `Arc` does not give).
        let buf = unsafe { self.value() };
        DeviceRef::new(buf.device_ptr(), buf.len())
    }
}

impl<T: DeviceCopy + Send + Sync> sealed::Sealed for Owned<PinnedBuffer<'static, T>> {}
impl<T: DeviceCopy + Send + Sync> Batch for Owned<PinnedBuffer<'static, T>> {
    type Views<'scope, 'ctx> = HostMut<'scope, T>;

    fn check(&self, home: &OwnedContext, _: Crate) -> CheckResult {
        same_home(self.context(), home)
    }

    unsafe fn views<'scope, 'ctx>(&mut self, _: Crate) -> Self::Views<'scope, 'ctx> {
        // SAFETY: as above.
        let buf = unsafe { self.value_mut() };
        HostMut::new(buf.as_mut_ptr(), buf.len())
    }
}

impl<T: DeviceCopy + Send> sealed::Sealed for Vec<T> {}
impl<T: DeviceCopy + Send> Batch for Vec<T> {
    type Views<'scope, 'ctx> = HostMut<'scope, T>;

    fn check(&self, _: &OwnedContext, _: Crate) -> CheckResult {
        Ok(())
    }

    unsafe fn views<'scope, 'ctx>(&mut self, _: Crate) -> Self::Views<'scope, 'ctx> {
        // the vector's heap memory does not move when the batch (the vector's header) does
        HostMut::new(self.as_mut_ptr(), self.len())
    }
}

impl<P: KernelParams + 'static> sealed::Sealed for Arc<OwnedKernel<P>> {}
impl<P: KernelParams + 'static> Batch for Arc<OwnedKernel<P>> {
    type Views<'scope, 'ctx> = ScopedKernel<'scope, 'ctx, P>;

    fn check(&self, home: &OwnedContext, _: Crate) -> CheckResult {
        same_home(self.context(), home)
    }

    unsafe fn views<'scope, 'ctx>(&mut self, _: Crate) -> Self::Views<'scope, 'ctx> {
        // SAFETY: the caller's promise: the scope is of the kernel's context, and the
        // batch keeps the kernel (so its module) until the scope's work is done.
        unsafe { self.scoped() }
    }
}

impl sealed::Sealed for () {}
impl Batch for () {
    type Views<'scope, 'ctx> = ();

    fn check(&self, _: &OwnedContext, _: Crate) -> CheckResult {
        Ok(())
    }

    unsafe fn views<'scope, 'ctx>(&mut self, _: Crate) -> Self::Views<'scope, 'ctx> {}
}

macro_rules! tuple_batch {
    ($($part:ident $i:tt),+) => {
        impl<$($part: Batch),+> sealed::Sealed for ($($part,)+) {}
        impl<$($part: Batch),+> Batch for ($($part,)+) {
            type Views<'scope, 'ctx> = ($($part::Views<'scope, 'ctx>,)+);

            fn check(&self, home: &OwnedContext, by: Crate) -> CheckResult {
                $(self.$i.check(home, by)?;)+
                Ok(())
            }

            unsafe fn views<'scope, 'ctx>(&mut self, by: Crate) -> Self::Views<'scope, 'ctx> {
                // SAFETY: the caller's promise, for each part.
                unsafe { ($(self.$i.views(by),)+) }
            }
        }
    };
}

tuple_batch!(A 0);
tuple_batch!(A 0, B 1);
tuple_batch!(A 0, B 1, C 2);
tuple_batch!(A 0, B 1, C 2, D 3);
tuple_batch!(A 0, B 1, C 2, D 3, E 4);
tuple_batch!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple_batch!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_batch!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);

/// `Ok` if `part` is a handle of `home`'s context, else an error naming both.
fn same_home(part: &OwnedContext, home: &OwnedContext) -> CheckResult {
    if part.same_context(home) {
        Ok(())
    } else {
        Err(crate::owned::handle::wrong_context(
            "Owned::submit",
            part.raw(),
            home.raw(),
        ))
    }
}
