//! `pir-kernels`: the loops every PIR server runs over its whole database, and the one crate of
//! the workspace that may use `unsafe` (each block carries a `// SAFETY:` comment).
//!
//! Main items:
//! - [`Backend`]: portable, AVX2 or AVX-512, chosen at run time (see [`backend`]).
//! - [`xor`]: `acc ^= row` scans for Chor and RAID-PIR answers.
//! - [`russians`]: four-Russians tables (build by Gray code, one lookup per group of rows).
//! - [`batch`]: one pass over the database for many queries.
//! - [`memory`]: the plain read every speed is compared with.
//! - [`matvec`]: matrix-vector products mod 2^32 for the lattice schemes.
//! - [`map`]: read-only memory maps of database files.
//! - [`ntt`]: the negacyclic NTT for the RLWE layer of YPIR.
//! - [`range`]: uniform words scaled into a range (Checklist's set elements).
//! - [`stream`]: a buffer written a line at a time with streaming stores (radix scatters).
//!
//! What it does not do: no scheme logic, no parameter validation beyond slice lengths.

#![deny(unsafe_op_in_unsafe_fn)]

/// Asks for the cache line holding `ptr` to be brought into L2, ahead of a load the hardware
/// prefetcher would not foresee (rows far apart, streams it tracks too shallowly). A hint:
/// it never faults, so `ptr` may point anywhere, even past a slice; it is never dereferenced.
#[inline(always)]
pub(crate) fn prefetch_l2<T>(ptr: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
        // SAFETY: `_mm_prefetch` has no memory-safety requirement (SSE, baseline on x86-64).
        unsafe { _mm_prefetch::<_MM_HINT_T1>(ptr.cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

/// [`prefetch_l2`] into L1 instead: for a line read next (scattered rows read one by one).
#[inline(always)]
pub(crate) fn prefetch_l1<T>(ptr: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: `_mm_prefetch` has no memory-safety requirement (SSE, baseline on x86-64).
        unsafe { _mm_prefetch::<_MM_HINT_T0>(ptr.cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = ptr;
}

/// [`prefetch_l2`] of every 64-byte line of `bytes` (into L1 instead, the sparse scan of
/// 4 KiB rows took 27 ms instead of 18: 16 KiB batches crowd L1 out).
#[inline(always)]
pub(crate) fn prefetch_l2_all(bytes: &[u8]) {
    for line in bytes.chunks(64) {
        prefetch_l2(line.as_ptr());
    }
}

/// Defines `pub fn name(backend: Backend, args...)` that runs one generic body compiled three
/// times: for the portable target, with AVX2, and with AVX-512 (the compiler vectorises the
/// same Rust for each). The AVX versions run only after the CPU was checked for the feature.
macro_rules! multiversioned {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$meta])*
        $vis fn $name(backend: $crate::Backend, $($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            fn generic($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2")]
            fn avx2($($arg: $ty),*) $(-> $ret)? {
                generic($($arg),*)
            }
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f,avx512bw")]
            fn avx512($($arg: $ty),*) $(-> $ret)? {
                generic($($arg),*)
            }
            match backend {
                #[cfg(target_arch = "x86_64")]
                $crate::Backend::Avx512 if $crate::Backend::Avx512.is_available() => {
                    // SAFETY: the CPU supports AVX-512 F and BW, checked in the guard above.
                    unsafe { avx512($($arg),*) }
                }
                #[cfg(target_arch = "x86_64")]
                $crate::Backend::Avx2 if $crate::Backend::Avx2.is_available() => {
                    // SAFETY: the CPU supports AVX2, checked in the guard above.
                    unsafe { avx2($($arg),*) }
                }
                _ => generic($($arg),*),
            }
        }
    };
}

pub mod aligned;
pub mod backend;
pub mod batch;
#[cfg(any(test, feature = "bench-support"))]
pub mod bench_support;
pub mod keep;
pub mod map;
pub mod matvec;
pub mod memory;
pub mod ntt;
pub mod range;
pub mod russians;
pub mod stream;
pub mod xor;

pub use backend::Backend;
pub use map::{map_locked, map_readonly};
pub use xor::{
    scan, scan_parallel, scan_with, xor_gather, xor_into, xor_into_with, xor_rows, Selection,
};
