//! Device memory filled with random data, the buffer sets a case rotates through, timing with
//! CUDA events, and what the report's header says about the GPU.

use cudarc::driver::{result, sys};
use sgemm_bi::DType;

/// Every buffer starts on this many bytes (cuBLASLt's heuristic assumes 256-byte alignment).
const ALIGN: usize = 256;
/// A case rotates through buffer sets until they span this many bytes, so that each call
/// reads its operands from HBM, as a real model's layers do, not from the 50 MB L2 the
/// previous call left warm (a 4096 × 4096 bf16 weight is 32 MiB).
const ROTATE_BYTES: usize = 256 << 20;
/// Random values are generated once per dtype for this many elements (odd, so that rows do
/// not repeat with a power-of-two period) and uploaded again and again to fill an arena.
const POOL_ELEMENTS: usize = (1 << 22) + 3;

pub const fn align(bytes: usize) -> usize {
    bytes.div_ceil(ALIGN) * ALIGN
}

/// How large the arenas must be for a set of cases: each case's input bytes (A and B) per
/// input dtype, and its output bytes.
#[derive(Default)]
pub struct Needs {
    input: [usize; 3],
    output: usize,
}

fn dtype_index(d: DType) -> usize {
    match d {
        DType::F32 => 0,
        DType::BF16 => 1,
        DType::F16 => 2,
    }
}

impl Needs {
    pub fn add(&mut self, input: DType, sizes: Sizes) {
        let i = dtype_index(input);
        self.input[i] = self.input[i].max(sizes.input_stride());
        self.output = self.output.max(sizes.output_stride());
    }
}

/// Bytes of A, B and C of one case.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    pub a: usize,
    pub b: usize,
    pub c: usize,
}

impl Sizes {
    fn input_stride(&self) -> usize {
        align(self.a) + align(self.b)
    }
    fn output_stride(&self) -> usize {
        align(self.c)
    }
}

/// One device allocation.
pub struct Arena {
    pub base: u64,
    pub bytes: usize,
}

impl Arena {
    fn alloc(bytes: usize) -> Arena {
        // SAFETY: a fresh allocation in the current context (the engine's primary context).
        let base = unsafe { result::malloc_sync(bytes) }
            .unwrap_or_else(|e| panic!("cuMemAlloc of {bytes} bytes: {e}"));
        Arena { base, bytes }
    }

    /// `bytes` of zeros (outputs; dW accumulates into them).
    fn zeroed(bytes: usize) -> Arena {
        let arena = Arena::alloc(bytes);
        // SAFETY: the whole allocation just made.
        unsafe { result::memset_d8_sync(arena.base, 0, bytes) }.unwrap();
        arena
    }

    /// `bytes` of uniform random values in [−0.5, 0.5) of type `dtype` (never zeros).
    fn random(bytes: usize, dtype: DType, seed: u64) -> Arena {
        let arena = Arena::alloc(bytes);
        let pool = crate::device_data::random_bytes(POOL_ELEMENTS, dtype, seed);
        let mut offset = 0;
        while offset < bytes {
            let len = pool.len().min(bytes - offset);
            // SAFETY: `offset + len <= bytes`, inside the allocation.
            unsafe { result::memcpy_htod_sync(arena.base + offset as u64, &pool[..len]) }.unwrap();
            offset += len;
        }
        // The benchmark's stream is non-blocking: make sure the upload has landed.
        result::ctx::synchronize().unwrap();
        arena
    }
}

impl Arena {
    /// `values` in device memory (a grouped call's offsets).
    pub fn from_i32(values: &[i32]) -> Arena {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let arena = Arena::alloc(bytes.len().max(4));
        // SAFETY: the allocation just made holds at least `bytes.len()` bytes.
        unsafe { result::memcpy_htod_sync(arena.base, &bytes) }.unwrap();
        // As for the random arenas: let the upload land before the non-blocking stream runs.
        result::ctx::synchronize().unwrap();
        arena
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: allocated in `alloc`, freed once; nothing runs on it any more (main
        // synchronizes before dropping).
        let _ = unsafe { result::free_sync(self.base) };
    }
}

/// The device memory of a run: one random input arena per input dtype used, one output
/// arena shared by every case.
pub struct Arenas {
    input: [Option<Arena>; 3],
    output: Arena,
}

impl Arenas {
    /// Allocates and fills what `needs` asks for, with room for [`ROTATE_BYTES`] of rotation.
    pub fn new(needs: &Needs) -> Arenas {
        let mut input = [None, None, None];
        for (i, d) in [DType::F32, DType::BF16, DType::F16]
            .into_iter()
            .enumerate()
        {
            if needs.input[i] > 0 {
                let bytes = needs.input[i].max(2 * ROTATE_BYTES);
                input[i] = Some(Arena::random(bytes, d, 0x9E37_79B9_7F4A_7C15 ^ i as u64));
            }
        }
        Arenas {
            input,
            output: Arena::zeroed(needs.output.max(ROTATE_BYTES)),
        }
    }

    /// Total bytes allocated.
    pub fn bytes(&self) -> usize {
        self.input.iter().flatten().map(|a| a.bytes).sum::<usize>() + self.output.bytes
    }

    /// The buffer sets of a case with inputs of type `input` and these sizes.
    pub fn buffers(&self, input: DType, sizes: Sizes) -> Buffers {
        let arena = self.input[dtype_index(input)]
            .as_ref()
            .expect("an arena for every input dtype the cases use");
        let (stride_in, stride_out) = (sizes.input_stride(), sizes.output_stride());
        assert!(stride_in <= arena.bytes && stride_out <= self.output.bytes);
        let wanted = ROTATE_BYTES.div_ceil(stride_in + stride_out);
        let slots = wanted
            .min(arena.bytes / stride_in)
            .min(self.output.bytes / stride_out)
            .max(1);
        Buffers {
            a: arena.base,
            b: arena.base + align(sizes.a) as u64,
            c: self.output.base,
            stride_in: stride_in as u64,
            stride_out: stride_out as u64,
            slots,
        }
    }
}

/// `slots` disjoint sets of (A, B, C); call `i` uses set `i % slots`.
#[derive(Clone, Copy, Debug)]
pub struct Buffers {
    a: u64,
    b: u64,
    c: u64,
    stride_in: u64,
    stride_out: u64,
    pub slots: usize,
}

impl Buffers {
    /// Device addresses of A, B and C for call `i`.
    pub fn at(&self, i: usize) -> (u64, u64, u64) {
        let s = (i % self.slots) as u64;
        (
            self.a + s * self.stride_in,
            self.b + s * self.stride_in,
            self.c + s * self.stride_out,
        )
    }
}

/// Warm-up before timing: at least this long (and at least 3 calls), so clocks settle.
const WARM_MS: f64 = 25.0;
/// Each timed sample runs back-to-back calls for at least this long, so that launch latency
/// and event resolution do not dominate microsecond calls.
const SAMPLE_MS: f64 = 1.0;

/// A median time per call, and how many calls each timed sample ran.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub ms: f64,
    pub inner: usize,
}

pub struct Timer {
    stream: sys::CUstream,
    start: sys::CUevent,
    stop: sys::CUevent,
}

impl Timer {
    pub fn new(stream: sys::CUstream) -> Self {
        let flags = sys::CUevent_flags::CU_EVENT_DEFAULT;
        Timer {
            stream,
            start: result::event::create(flags).unwrap(),
            stop: result::event::create(flags).unwrap(),
        }
    }

    /// Milliseconds between two events around what `f` enqueues on the stream.
    fn elapsed(&self, f: impl FnOnce()) -> f64 {
        // SAFETY: live events and stream of the current context.
        unsafe {
            result::event::record(self.start, self.stream).unwrap();
            f();
            result::event::record(self.stop, self.stream).unwrap();
            result::event::synchronize(self.stop).unwrap();
            result::event::elapsed(self.start, self.stop).unwrap() as f64
        }
    }

    /// Median milliseconds per call of each of `calls` (each enqueues its call number `i` on
    /// the stream) over `samples` timed samples, after warm-up. A sample is `inner`
    /// back-to-back calls of one contender, `inner` chosen so that it lasts at least
    /// [`SAMPLE_MS`]. The contenders' samples are interleaved (sample s runs every
    /// contender once, starting from contender s mod n), so that clock and temperature
    /// drift during a case, or left by the case before, weighs on all of them alike
    /// instead of on whichever ran first.
    pub fn time_together(
        &self,
        samples: usize,
        calls: &mut [&mut dyn FnMut(usize)],
    ) -> Vec<Timing> {
        let n = calls.len();
        let mut next = vec![0usize; n];
        let mut run = |who: usize, count: usize, calls: &mut [&mut dyn FnMut(usize)]| {
            for _ in 0..count {
                (calls[who])(next[who]);
                next[who] += 1;
            }
        };
        let inner: Vec<usize> = (0..n)
            .map(|who| {
                run(who, 3, calls);
                let once = self.elapsed(|| run(who, 1, calls)).max(1e-4);
                run(who, ((WARM_MS / once) as usize).min(20_000), calls);
                ((SAMPLE_MS / once).ceil() as usize).clamp(1, 2_000)
            })
            .collect();
        let mut times = vec![Vec::with_capacity(samples.max(1)); n];
        for s in 0..samples.max(1) {
            for j in 0..n {
                let who = (s + j) % n;
                let t = self.elapsed(|| run(who, inner[who], calls));
                times[who].push(t / inner[who] as f64);
            }
        }
        times
            .into_iter()
            .zip(inner)
            .map(|(mut t, inner)| {
                t.sort_by(|a, b| a.total_cmp(b));
                Timing {
                    ms: t[t.len() / 2],
                    inner,
                }
            })
            .collect()
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        // SAFETY: created in `new`, destroyed once, after their last synchronize.
        unsafe {
            let _ = result::event::destroy(self.start);
            let _ = result::event::destroy(self.stop);
        }
    }
}

/// The device's name (cuDeviceGetName) and the driver: the kernel module's version when
/// /proc says it, and the CUDA version the driver API reports (cuDriverGetVersion).
pub fn gpu_and_driver() -> (String, String) {
    let name = result::device::get(0)
        .and_then(result::device::get_name)
        .unwrap_or_else(|e| format!("unknown ({e})"));
    let mut v = 0;
    // SAFETY: an out-pointer to a local int.
    let api = match unsafe { sys::cuDriverGetVersion(&mut v) }.result() {
        Ok(()) => format!("CUDA {}.{}", v / 1000, (v % 1000) / 10),
        Err(e) => format!("CUDA unknown ({e})"),
    };
    // "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu …" or "… Open Kernel
    // Module for x86_64  580.159.04 …": the first word after "Kernel Module" made of digits
    // and dots.
    let module = std::fs::read_to_string("/proc/driver/nvidia/version")
        .ok()
        .and_then(|s| {
            let line = s.lines().next()?.to_string();
            let rest = line.split("Kernel Module").nth(1)?;
            rest.split_whitespace()
                .find(|w| w.contains('.') && w.chars().all(|c| c.is_ascii_digit() || c == '.'))
                .map(str::to_string)
        });
    let driver = match module {
        Some(m) => format!("{m} ({api})"),
        None => api,
    };
    (name, driver)
}
