//! [`Plan`]: a kernel launch with everything decided before the driver call, made by
//! [`plan`] and queued by [`Plan::issue`]. It is the one launch path: a stream scope
//! ([`StreamScope::launch`](crate::StreamScope::launch)) and a graph capture
//! ([`Capture::launch`](crate::Capture::launch)) both plan and issue through it, and add
//! only what is theirs (a scope orders its other streams around the launch; a capture
//! records a failure and refuses a priority).

use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Mutex;

use super::attributes::{self, LaunchCache, Prepared};
use super::sealed::{self, Crate};
use super::{KernelArgs, KernelParams, Launch, LaunchConfig, check_config, launch_overlap};
use crate::driver::{self, CUfunction, CUstream};
use crate::error::Result;
use crate::span::Span;
use crate::tracker::first_overlap;

/// A checked launch, ready for the driver: the kernel's function, its checked
/// configuration, its checked attributes laid out for `cuLaunchKernelEx`, the stream it
/// was checked for, the `void**` parameter array and the memory each argument touches.
/// It lives inside [`plan`]'s call, whose frame holds the arguments' bytes (`'a`).
pub(crate) struct Plan<'a> {
    function: CUfunction,
    config: LaunchConfig,
    stream: CUstream,
    /// The attributes, checked and laid out (in `plan`'s frame); `None`: a plain launch
    /// (`cuLaunchKernel`).
    attributes: Option<&'a Prepared>,
    /// The memory each argument touches, in argument order (none for a scalar).
    pub(crate) spans: &'a [Span],
    /// The module whose globals the kernel writes, for a [`KernelMut`](super::KernelMut).
    pub(crate) globals: Option<usize>,
    /// One pointer per C parameter, each to a value of its type in `plan`'s frame.
    params: *mut *mut c_void,
    /// The arguments' bytes that `params` points at, alive for `'a`.
    _frame: PhantomData<&'a mut [*mut c_void]>,
}

/// Plans a launch of `kernel` with `config` and `args` on `stream`, and hands the plan to
/// `then`, which issues it ([`Plan::issue`]) after what its caller adds. Checked first, in
/// this order, each an error before any driver call is queued: the configuration against
/// the kernel's limits ([`check_config`]); a configuration's attributes, with what `cache`
/// holds of the stream's device and the kernel (see
/// [`LaunchConfig`](LaunchConfig#launch-attributes)); that no `Out` or `OutPtr` argument
/// overlaps another slice or pointer argument.
///
/// # Safety
/// `stream` is live and of the kernel's context (one brand), for this call.
#[inline(always)]
pub(crate) unsafe fn plan<'s, 'ctx, P: KernelParams>(
    kernel: impl Launch<'s, 'ctx, P>,
    config: LaunchConfig,
    args: impl KernelArgs<'s, 'ctx, P>,
    stream: CUstream,
    cache: &Mutex<LaunchCache>,
    then: impl FnOnce(&Plan<'_>) -> Result<()>,
) -> Result<()> {
    let target = sealed::Launch::target(&kernel);
    check_config(&config, &target)?;
    let attributes = if config.has_attributes() {
        // SAFETY: the caller guarantees the stream; the target's function is the kernel's,
        // borrowed by the launch, of the stream's context (one brand).
        Some(unsafe { attributes::prepare(cache, stream, &target, &config) }?)
    } else {
        None
    };
    sealed::Args::with_params(args, Crate(()), |spans, params| {
        if let Some((i, j)) = first_overlap(spans) {
            return Err(launch_overlap(spans, <P as sealed::Params>::KINDS, i, j));
        }
        then(&Plan {
            function: target.function,
            config,
            stream,
            attributes: attributes.as_ref(),
            spans,
            globals: target.globals,
            params,
            _frame: PhantomData,
        })
    })
}

impl Plan<'_> {
    /// Queues the launch on the stream it was planned for: `cuLaunchKernel`, or for a
    /// configuration with attributes `cuLaunchKernelEx` (`cuLaunchCooperativeKernel` on a
    /// driver before CUDA 11.8). On a capturing stream the driver records it, with its
    /// attributes, as a kernel node.
    ///
    /// # Safety
    /// Every memory the kernel reaches (each argument's, and its module's) stays valid
    /// until the stream has run the launch (for a capture, for the graph's life), and no
    /// work the stream is not ordered with writes it, or reads what an `Out` or `OutPtr`
    /// argument names, meanwhile.
    #[inline(always)]
    pub(crate) unsafe fn issue(&self) -> Result<()> {
        let c = &self.config;
        match self.attributes {
            // SAFETY: the kernel's declaration (the promise of `Module::kernel`) makes
            // `params` one pointer per C parameter, each to a value of its type, alive for
            // this call (`'a`: `plan` has not returned); the stream is live and of the
            // kernel's context (`plan`'s promise); the memory is the caller's promise.
            None => unsafe {
                driver::launch_kernel(
                    self.function,
                    c.grid,
                    c.block,
                    c.shared_mem_bytes,
                    self.stream,
                    self.params,
                )
            },
            // SAFETY: as above; the attributes were checked for this function, stream and
            // configuration and laid out by `attributes::prepare`.
            Some(prepared) => unsafe {
                prepared.launch(self.function, c, self.stream, self.params)
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::error::ErrorCode;
    use crate::launch::sealed::Target;
    use crate::launch::{In, InPtr, Out, OutPtr};
    use crate::memory::DeviceSlice;

    /// A kernel whose limits the test chooses; never launched (no plan here is issued).
    struct Fake;
    impl<'s, 'c, P> sealed::Launch<'s, 'c, P> for Fake {
        fn target(&self) -> Target {
            Target {
                function: std::ptr::null_mut(),
                max_threads: 1024,
                max_dynamic_shared: 48 << 10,
                globals: Some(7),
            }
        }
    }
    impl<'s, 'c, P: KernelParams> Launch<'s, 'c, P> for Fake {}

    type Params = (In<u32>, Out<u32>, u32);

    /// Views of made-up addresses: nothing here dereferences them or hands them to the
    /// driver, since no plan is issued.
    fn views(
        a: u64,
        b: u64,
    ) -> (
        &'static DeviceSlice<'static, u32>,
        &'static mut DeviceSlice<'static, u32>,
    ) {
        // SAFETY: a `DeviceSlice` has size zero, so the reference is valid at any non-zero
        // address; the memory behind it is never read or written (see above).
        let input = unsafe { DeviceSlice::from_raw_parts(a, 4) };
        // SAFETY: as above; the two views are only compared as spans.
        let output = unsafe { DeviceSlice::from_raw_parts_mut(b, 4) };
        (input, output)
    }

    /// Plans a launch of `Fake` with no stream and no attributes, counting the calls of
    /// the caller's step.
    fn planned(
        config: LaunchConfig,
        (a, b): (u64, u64),
        calls: &Cell<u32>,
        then: impl FnOnce(&Plan<'_>),
    ) -> Result<()> {
        let (input, output) = views(a, b);
        let cache = Mutex::new(LaunchCache::default());
        let args = (input, output, 5u32);
        let then = |plan: &Plan<'_>| {
            calls.set(calls.get() + 1);
            then(plan);
            Ok(())
        };
        // SAFETY: no attributes, so nothing looks at the (null) stream; nothing is issued.
        unsafe { plan::<Params>(Fake, config, args, std::ptr::null_mut(), &cache, then) }
    }

    #[test]
    fn a_plan_holds_the_checked_launch_its_spans_and_its_parameters() {
        let calls = Cell::new(0);
        let config = LaunchConfig::linear(2, 128).with_shared_mem(64);
        planned(config, (0x1000, 0x2000), &calls, |plan| {
            assert_eq!(plan.config, config);
            assert!(plan.attributes.is_none(), "a plain launch");
            assert_eq!(plan.globals, Some(7));
            let span = |start, write| Span {
                start,
                bytes: 16,
                write,
            };
            assert_eq!(
                plan.spans,
                [span(0x1000, false), span(0x2000, true), Span::NONE]
            );
            // SAFETY: `params` has one pointer per C parameter (five), in `plan`'s frame,
            // which is alive while this closure runs.
            let params = unsafe { std::slice::from_raw_parts(plan.params, 5) };
            let words = [0, 1, 2, 3].map(|i| {
                // SAFETY: each points at its value in the same frame: the pointers and
                // lengths of the two slices are `u64`s.
                unsafe { *params[i].cast::<u64>() }
            });
            // SAFETY: as above: the scalar is a `u32`.
            let scalar = unsafe { *params[4].cast::<u32>() };
            assert_eq!(words, [0x1000, 4, 0x2000, 4]);
            assert_eq!(scalar, 5);
        })
        .unwrap();
        assert_eq!(calls.get(), 1);
    }

    #[test]
    fn a_plan_refuses_a_bad_configuration_then_an_overlap_before_its_caller_runs() {
        let calls = Cell::new(0);
        // both wrong: the configuration is reported
        let e = planned(
            LaunchConfig::linear(1, 2048),
            (0x1000, 0x1008),
            &calls,
            |_| {},
        )
        .unwrap_err();
        assert_eq!(
            (e.call(), e.code()),
            ("StreamScope::launch", ErrorCode::InvalidInput)
        );
        assert!(
            e.to_string()
                .contains("more threads than the kernel allows"),
            "{e}"
        );
        let e = planned(
            LaunchConfig::linear(1, 32),
            (0x1000, 0x1008),
            &calls,
            |_| {},
        )
        .unwrap_err();
        assert_eq!(
            e.invalid(),
            Some(&crate::error::Invalid::Overlap {
                first: "`In` argument 0".into(),
                first_range: (0x1000, 16),
                second: "`Out` argument 1".into(),
                second_range: (0x1008, 16),
            })
        );
        assert_eq!(calls.get(), 0, "the caller's step never ran");
    }

    /// A pointer kind is one C parameter (the address alone) with the span of the whole
    /// slice passed, so the overlap check sees it as it sees a slice, and names its kind.
    #[test]
    fn pointer_arguments_are_one_parameter_each_and_overlap_like_slices() {
        type Saxpy = (i32, f32, InPtr<u32>, OutPtr<u32>);
        let cache = Mutex::new(LaunchCache::default());
        let run = |(a, b): (u64, u64), then: &dyn Fn(&Plan<'_>)| {
            let (x, y) = views(a, b);
            let then = |plan: &Plan<'_>| {
                then(plan);
                Ok(())
            };
            let config = LaunchConfig::linear(1, 32);
            // SAFETY: as in `planned`: no attributes, nothing issued.
            unsafe {
                plan::<Saxpy>(
                    Fake,
                    config,
                    (4i32, 3.0f32, x, y),
                    std::ptr::null_mut(),
                    &cache,
                    then,
                )
            }
        };
        run((0x1000, 0x2000), &|plan| {
            let span = |start, write| Span {
                start,
                bytes: 16,
                write,
            };
            assert_eq!(
                plan.spans,
                [
                    Span::NONE,
                    Span::NONE,
                    span(0x1000, false),
                    span(0x2000, true)
                ]
            );
            // SAFETY: four C parameters, one per declared one, in `plan`'s frame.
            let params = unsafe { std::slice::from_raw_parts(plan.params, 4) };
            // SAFETY: each points at its value in the same frame: an `i32`, an `f32`,
            // then the two addresses, `u64`s.
            let n = unsafe { *params[0].cast::<i32>() };
            // SAFETY: as above.
            let a = unsafe { *params[1].cast::<f32>() };
            let [x, y] = [2, 3].map(|i| {
                // SAFETY: as above.
                unsafe { *params[i].cast::<u64>() }
            });
            assert_eq!((n, a, x, y), (4, 3.0, 0x1000, 0x2000));
        })
        .unwrap();
        // y's last element is x's first: refused, the kinds named
        let e = run((0x1000, 0x0ff4), &|_| panic!("an overlap was issued")).unwrap_err();
        assert_eq!(
            e.invalid(),
            Some(&crate::error::Invalid::Overlap {
                first: "`InPtr` argument 2".into(),
                first_range: (0x1000, 16),
                second: "`OutPtr` argument 3".into(),
                second_range: (0x0ff4, 16),
            })
        );
    }
}
