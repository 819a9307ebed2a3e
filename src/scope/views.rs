//! The views of device memory bound to a scope ([`DeviceRef`], [`DeviceMut`]), what a
//! scope's operations accept for them ([`IntoDeviceRef`], [`IntoDeviceMut`]), and the
//! views as kernel arguments.

use std::fmt;
use std::marker::PhantomData;
use std::ops::RangeBounds;

#[cfg(doc)]
use super::StreamScope;
use super::sealed;
use crate::context::Brand;
use crate::driver::CUdeviceptr;
use crate::launch::{self, KernelArg};
use crate::memory::{self, DeviceBuffer, DeviceCopy, DeviceSlice};
use crate::span::Span;
use crate::span::Touched;
use crate::synchronous;

/// Read access to device memory for the length of a scope: a `Copy` handle that the
/// scope's operations accept wherever they read device memory. Made from a [`DeviceMut`]
/// ([`DeviceMut::into_ref`]); operations also take `&buffer` and `&buffer[range]` directly.
/// A source takes only these: a `DeviceMut` given where an operation reads is refused until
/// it is converted (`d.into_ref()`), so a swapped destination and source do not compile
/// (`ui-tests/fail/4_scopes/scope_device_mut_as_source.rs`).
///
/// # The brand
///
/// Both `'scope` (the scope's) and `'ctx` (the memory's, [the
/// brand](crate::context#the-brand)) are invariant, as in [`DeviceMut`]: views of two
/// contexts' memory never have one type, even when a function leaves their scopes free:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::DeviceRef;
///
/// /// Takes two views of memory of one context (of any scopes).
/// fn one_context<'ctx>(_: DeviceRef<'_, 'ctx, u32>, _: DeviceRef<'_, 'ctx, u32>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let (mut on_a, stream_a) = (a.zeroed::<u32>(4)?, a.new_stream()?);
///     with_context(&device, ContextFlags::default(), |b| {
///         let (mut on_b, stream_b) = (b.zeroed::<u32>(4)?, b.new_stream()?);
///         stream_a.scope(|sa| {
///             stream_b.scope(|sb| {
///                 let ra = sa.bind_mut(&mut on_a).into_ref();
///                 let rb = sb.bind_mut(&mut on_b).into_ref();
///                 one_context(ra, rb); // two contexts: does not compile
///                 Ok(())
///             })
///         })
///     })
/// })
/// # }
/// ```
pub struct DeviceRef<'scope, 'ctx, T> {
    pub(super) ptr: CUdeviceptr,
    pub(super) len: usize,
    /// Invariant in `'scope`, the binding scope's brand, as in `DeviceMut`.
    _scope: PhantomData<fn(&'scope ()) -> &'scope ()>,
    /// Invariant in `'ctx` (the crate's `Brand`), the memory's context, as in `DeviceMut`.
    _brand: Brand<'ctx>,
    _elem: PhantomData<*const T>,
}

/// Write access to device memory for the length of a scope: a `Copy` handle, so one
/// buffer can be written by several operations of the same stream (which run in order).
/// Made by [`StreamScope::bind_mut`], [`StreamScope::alloc_zeroed`] or
/// [`StreamScope::alloc`]; operations also take `&mut buffer` directly for a single use.
///
/// # The brand
///
/// Both `'scope` (the scope's) and `'ctx` (the memory's, [the
/// brand](crate::context#the-brand)) are invariant: views of two contexts' memory never
/// have one type, even when a function leaves their scopes free:
///
/// ```compile_fail,E0521
/// use cuda_brand::prelude::*;
/// use cuda_brand::DeviceMut;
///
/// /// Takes two views of memory of one context (of any scopes).
/// fn one_context<'ctx>(_: DeviceMut<'_, 'ctx, u32>, _: DeviceMut<'_, 'ctx, u32>) {}
///
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |a| {
///     let (mut on_a, stream_a) = (a.zeroed::<u32>(4)?, a.new_stream()?);
///     with_context(&device, ContextFlags::default(), |b| {
///         let (mut on_b, stream_b) = (b.zeroed::<u32>(4)?, b.new_stream()?);
///         stream_a.scope(|sa| {
///             stream_b.scope(|sb| {
///                 // two contexts: does not compile
///                 one_context(sa.bind_mut(&mut on_a), sb.bind_mut(&mut on_b));
///                 Ok(())
///             })
///         })
///     })
/// })
/// # }
/// ```
pub struct DeviceMut<'scope, 'ctx, T> {
    pub(super) ptr: CUdeviceptr,
    pub(super) len: usize,
    /// Invariant in `'scope`, the binding scope's brand: the memory stays borrowed until
    /// that scope has synchronized, and only that scope orders the operations on it.
    _scope: PhantomData<fn(&'scope ()) -> &'scope ()>,
    /// Invariant in `'ctx` (the crate's `Brand`), the memory's context, as the
    /// `DeviceSlice`'s it was bound from. Were it covariant, views of two contexts' memory
    /// could be shortened to one brand.
    _brand: Brand<'ctx>,
    _elem: PhantomData<*mut T>,
}

macro_rules! scoped_view {
    ($name:ident) => {
        impl<T> Clone for $name<'_, '_, T> {
            fn clone(&self) -> Self {
                *self
            }
        }
        impl<T> Copy for $name<'_, '_, T> {}

        impl<'scope, 'ctx, T> $name<'scope, 'ctx, T> {
            #[inline]
            pub(crate) fn new(ptr: CUdeviceptr, len: usize) -> Self {
                $name {
                    ptr,
                    len,
                    _scope: PhantomData,
                    _brand: PhantomData,
                    _elem: PhantomData,
                }
            }

            /// The number of elements.
            #[inline]
            pub fn len(&self) -> usize {
                self.len
            }

            /// Whether there are no elements.
            #[inline]
            pub fn is_empty(&self) -> bool {
                self.len == 0
            }

            /// The device address, for the crate's own calls.
            #[inline]
            pub(crate) fn device_ptr(&self) -> CUdeviceptr {
                self.ptr
            }

            /// The device address of the first element (`CUdeviceptr`), once the crate's
            /// pending synchronous operations on this memory are done.
            ///
            /// The scope orders each of its operations after the pending synchronous
            /// writes of the memory that operation names; an address passed as a number
            /// names none. So this call waits on the host for the pending synchronous
            /// operations on these bytes, as
            /// [`DeviceSlice::as_device_ptr`](crate::DeviceSlice::as_device_ptr) does. In a
            /// scope that is seldom a wait: the memory has been borrowed by the scope since
            /// it was bound, so only a write made before the binding can be pending, and
            /// it is forgotten once waited for; with nothing pending anywhere, the call is
            /// one atomic load. Work queued on the scope's stream with the address then
            /// runs after those writes and after the scope's earlier operations; raw work
            /// on another stream waits for the latter itself (an event recorded on the
            /// scope, `event.record(s)`, then waited for there).
            ///
            /// # Safety
            ///
            /// Taking the address does nothing the caller must check; `unsafe` marks what
            /// it allows behind the borrow checker's back, since a number outlives no
            /// borrow. The caller promises, for every use of the address (a kernel
            /// parameter, a driver call): it is not used after the scope has ended (its
            /// memory may be freed then); and work given it reads the memory only while
            /// nothing writes it and writes it only while nothing else uses it, until that
            /// work has finished, as the scope does for this view. Where the wait cannot
            /// run or fails, the address is returned all the same, as
            /// [`DeviceSlice::as_device_ptr`](crate::DeviceSlice::as_device_ptr) says.
            #[inline]
            pub unsafe fn as_device_ptr(&self) -> CUdeviceptr {
                if self.len != 0 {
                    let span = Span {
                        start: self.ptr,
                        bytes: self.bytes() as u64,
                        write: true,
                    };
                    synchronous::before_raw_escape(Touched::Spans(&[span]));
                }
                self.device_ptr()
            }

            #[inline]
            pub(super) fn bytes(&self) -> usize {
                memory::byte_len::<T>(self.len)
            }

            /// The elements in `range`, as a handle of the same kind.
            ///
            /// # Panics
            /// If the range is out of bounds; [`get`](Self::get) returns `None`
            /// instead.
            #[track_caller]
            pub fn slice(self, range: impl RangeBounds<usize>) -> Self {
                match self.get(range) {
                    Some(view) => view,
                    None => panic!(
                        "{}::slice: range out of bounds for {} elements",
                        stringify!($name),
                        self.len
                    ),
                }
            }

            /// The elements in `range`, or `None` if it is out of bounds.
            pub fn get(self, range: impl RangeBounds<usize>) -> Option<Self> {
                let (start, end) = memory::bounds(&range, self.len)?;
                Some(Self::new(
                    self.ptr + memory::byte_len::<T>(start) as CUdeviceptr,
                    end - start,
                ))
            }
        }

        impl<T> fmt::Debug for $name<'_, '_, T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(
                    f,
                    "{}({:#x}, len {})",
                    stringify!($name),
                    self.ptr,
                    self.len
                )
            }
        }
    };
}
scoped_view!(DeviceRef);
scoped_view!(DeviceMut);

impl<'scope, 'ctx, T> DeviceMut<'scope, 'ctx, T> {
    /// The same memory, for reading: the explicit conversion an operation's source needs,
    /// since a source takes only shared views ([`IntoDeviceRef`]). `DeviceMut` is `Copy`,
    /// so `d` stays usable: `s.copy_from_device(e, d.into_ref())` and later writes of `d`.
    #[inline]
    pub fn into_ref(self) -> DeviceRef<'scope, 'ctx, T> {
        DeviceRef::new(self.ptr, self.len)
    }
}

/// Device memory a scope's operation may write: `&mut buffer`, `&mut buffer[range]`, or a
/// [`DeviceMut`] of the scope. Sealed.
///
/// Only a scope makes a [`DeviceMut`] (`bind_mut`, the allocations): a bound
/// `D: IntoDeviceMut<..>` brings the hidden supertrait's method into scope in any crate, but
/// the method takes a value only the crate can make, so code outside it cannot turn a
/// `&mut buffer` into a handle of its own (the same holds for [`IntoDeviceRef`],
/// [`IntoHostMut`](crate::scope::IntoHostMut) and [`IntoHostRef`](crate::scope::IntoHostRef)):
///
/// ```compile_fail,E0061
/// use cuda_brand::scope::{DeviceMut, IntoDeviceMut};
///
/// fn handle<'s, 'c, D: IntoDeviceMut<'s, 'c, f32>>(d: D) -> DeviceMut<'s, 'c, f32> {
///     d.into_mut() // error: the method takes the crate's own token
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not device memory this scope may write",
    label = "expected `&mut buffer`, `&mut buffer[range]` or a `DeviceMut` of this scope",
    note = "to write a buffer in several operations of one scope, bind it once: `let d = s.bind_mut(&mut buffer);`",
    note = "see the guide, chapter 5 (`cuda_brand::guide`)"
)]
pub trait IntoDeviceMut<'scope, 'ctx, T>: sealed::IntoMut<'scope, 'ctx, T> {}

/// Device memory a scope's operation may read: `&buffer`, `&buffer[range]` or a
/// [`DeviceRef`] of the scope. Sealed.
///
/// Only shared views: an exclusive one (`&mut buffer`, a [`DeviceMut`]) is a destination,
/// so a copy whose destination and source are swapped does not compile. A `DeviceMut`
/// read by an operation is converted explicitly, [`d.into_ref()`](DeviceMut::into_ref):
///
/// ```compile_fail,E0277
/// use cuda_brand::prelude::*;
/// # fn main() -> cuda_brand::Result<()> {
/// # let device = Device::get(0)?;
/// with_context(&device, ContextFlags::default(), |ctx| {
///     let (mut a, mut b) = (ctx.zeroed::<u32>(4)?, ctx.zeroed::<u32>(4)?);
///     ctx.new_stream()?.scope(|s| {
///         let (a, b) = (s.bind_mut(&mut a), s.bind_mut(&mut b));
///         s.copy_from_device(a, b) // the source is a `DeviceMut`: `b.into_ref()`
///     })
/// })
/// # }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not device memory this scope may read",
    label = "expected `&buffer`, `&buffer[range]` or a `DeviceRef` of this scope",
    note = "a source takes only shared views: `&buffer`, or `d.into_ref()` for a `DeviceMut` `d`; destinations come first",
    note = "see the guide, chapter 5 (`cuda_brand::guide`)"
)]
pub trait IntoDeviceRef<'scope, 'ctx, T>: sealed::IntoRef<'scope, 'ctx, T> {}

macro_rules! into_view {
    ($trait:ident, $sealed:ident, $method:ident, $view:ident: $($arg:ty),*) => { $(
        impl<'scope, 'ctx, T: DeviceCopy> sealed::$sealed<'scope, 'ctx, T> for $arg {
            #[inline(always)]
            fn $method(self, _by: crate::launch::sealed::Crate) -> $view<'scope, 'ctx, T> {
                $view::new(self.device_ptr(), self.len())
            }
        }
        impl<'scope, 'ctx, T: DeviceCopy> $trait<'scope, 'ctx, T> for $arg {}
    )* };
}
into_view!(IntoDeviceMut, IntoMut, into_mut, DeviceMut: &'scope mut DeviceSlice<'ctx, T>, &'scope mut DeviceBuffer<'ctx, T>, DeviceMut<'scope, 'ctx, T>);
into_view!(IntoDeviceRef, IntoRef, into_ref, DeviceRef: &'scope DeviceSlice<'ctx, T>, &'scope DeviceBuffer<'ctx, T>, DeviceRef<'scope, 'ctx, T>);

/// The scope's views as kernel arguments: a `DeviceRef` or a `DeviceMut` for an `In` or an
/// `InPtr`, a `DeviceMut` for an `Out` or an `OutPtr`; lowered by `$lower`
/// (`launch::slice_raw` or `launch::pointer_raw`: one span, whichever).
macro_rules! view_args {
    ($param:ident, $write:literal, $lower:ident: $($arg:ty),*) => { $(
        impl<'scope, 'ctx, T: DeviceCopy> launch::sealed::Arg<'scope, 'ctx, launch::$param<T>> for $arg {
            #[inline(always)]
            fn lower(
                self,
                _: launch::sealed::Crate,
            ) -> (<launch::$param<T> as launch::sealed::Param>::Raw, Span) {
                launch::$lower(self.ptr, self.len, std::mem::size_of::<T>(), $write)
            }
        }
        impl<'scope, 'ctx, T: DeviceCopy> KernelArg<'scope, 'ctx, launch::$param<T>> for $arg {}
    )* };
}
view_args!(In, false, slice_raw: DeviceRef<'scope, 'ctx, T>, DeviceMut<'scope, 'ctx, T>);
view_args!(Out, true, slice_raw: DeviceMut<'scope, 'ctx, T>);
view_args!(InPtr, false, pointer_raw: DeviceRef<'scope, 'ctx, T>, DeviceMut<'scope, 'ctx, T>);
view_args!(OutPtr, true, pointer_raw: DeviceMut<'scope, 'ctx, T>);

#[inline(always)]
pub(super) fn write_span<T>(v: &DeviceMut<'_, '_, T>) -> Span {
    Span {
        start: v.ptr,
        bytes: v.bytes() as u64,
        write: true,
    }
}

#[inline(always)]
pub(super) fn read_span<T>(v: &DeviceRef<'_, '_, T>) -> Span {
    Span {
        start: v.ptr,
        bytes: v.bytes() as u64,
        write: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_views_slice_like_slices() {
        let v: DeviceMut<'static, 'static, u32> = DeviceMut::new(0x1000, 10);
        let part = v.slice(2..5);
        assert_eq!((part.device_ptr(), part.len()), (0x1008, 3));
        assert_eq!(part.slice(1..).device_ptr(), 0x100c);
        assert_eq!(v.into_ref().slice(..=9).len(), 10);
        assert!(v.get(..11).is_none());
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = 7..3;
        assert!(v.get(reversed).is_none());
        assert!(v.slice(10..).is_empty());
        let panicked = std::panic::catch_unwind(|| v.slice(3..12)).unwrap_err();
        assert_eq!(
            panicked.downcast_ref::<String>().unwrap(),
            "DeviceMut::slice: range out of bounds for 10 elements"
        );
        // zero-sized elements: any count, no bytes
        let z: DeviceRef<'static, 'static, ()> =
            DeviceRef::new(memory::empty_address::<()>(), usize::MAX);
        assert_eq!(z.slice(5..).len(), usize::MAX - 5);
        assert_eq!(z.slice(5..).device_ptr(), memory::empty_address::<()>());
    }
}
