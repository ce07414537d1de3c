//! What the GPU benchmarks share: random device buffers and the median time of a call on a
//! stream, by CUDA events.

use cudarc::driver::{result, sys};
use sgemm_bi::DType;

/// Median milliseconds of `reps` timed runs of `f` on `stream` (events around each run),
/// after three untimed ones.
pub fn median_ms(stream: sys::CUstream, reps: usize, mut f: impl FnMut()) -> f64 {
    let flags = sys::CUevent_flags::CU_EVENT_DEFAULT;
    let (start, stop) = (
        result::event::create(flags).unwrap(),
        result::event::create(flags).unwrap(),
    );
    for _ in 0..3 {
        f();
    }
    let mut times: Vec<f64> = (0..reps)
        .map(|_| {
            // SAFETY: live events and stream of the current context.
            unsafe {
                result::event::record(start, stream).unwrap();
                f();
                result::event::record(stop, stream).unwrap();
                result::event::synchronize(stop).unwrap();
                result::event::elapsed(start, stop).unwrap() as f64
            }
        })
        .collect();
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    times[times.len() / 2]
}

/// `len` uniform random values in [−0.5, 0.5) of type `dtype` as little-endian bytes (an
/// xorshift stream from `seed`: never zeros, the same values on every run).
pub fn random_bytes(len: usize, dtype: DType, seed: u64) -> Vec<u8> {
    let mut s = seed;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    match dtype {
        DType::F32 => (0..len).flat_map(|_| next().to_le_bytes()).collect(),
        DType::BF16 => (0..len)
            .flat_map(|_| sgemm_bi::bf16::from_f32(next()).to_le_bytes())
            .collect(),
        DType::F16 => (0..len)
            .flat_map(|_| sgemm_bi::f16::from_f32(next()).to_le_bytes())
            .collect(),
    }
}

/// A device buffer of `len` values of [`random_bytes`], uploaded before returning.
pub fn random_device(len: usize, dtype: DType, seed: u64) -> u64 {
    let bytes = random_bytes(len, dtype, seed);
    // SAFETY: a fresh allocation of at least `bytes.len()` bytes in the current context.
    unsafe {
        let p = result::malloc_sync(bytes.len().max(1)).unwrap();
        result::memcpy_htod_sync(p, &bytes).unwrap();
        // The benchmarks' streams are non-blocking: make sure the upload has landed.
        result::ctx::synchronize().unwrap();
        p
    }
}
