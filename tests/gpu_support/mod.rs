//! What the GPU tests share: opening the device (or skipping, or failing when
//! `SGEMM_BI_REQUIRE_GPU=1`), raw device buffers and streams, seeded random host data, and
//! running one descriptor on both the GPU and the CPU engine.
#![allow(dead_code)]

pub mod grouped_variants;

use std::ffi::c_void;

use cudarc::driver::{result, sys};
use sgemm_bi::{
    bf16, f16, DType, Device, Engine, Error, Gemm, GemmPointers, GroupOffsets, GroupedGemm,
    HostSlice, HostSliceMut, Layout, Operand, Output, OutputMode, Stream, Tier,
};

/// The CUDA engine on device 0, or `None` (test skipped) when there is none. With
/// `SGEMM_BI_REQUIRE_GPU=1` a missing device is a failure.
pub fn gpu_engine() -> Option<Engine> {
    match Engine::new(Device::Cuda(0)) {
        Ok(e) => Some(e),
        Err(err) => {
            if std::env::var("SGEMM_BI_REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("SGEMM_BI_REQUIRE_GPU=1 but no GPU engine: {err}");
            }
            eprintln!("skipped: no CUDA device ({err})");
            None
        }
    }
}

/// SplitMix64: a seeded generator, so every failure can be replayed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
}

/// A host buffer of one dtype.
#[derive(Clone, Debug, PartialEq)]
pub enum HostBuf {
    F32(Vec<f32>),
    BF16(Vec<bf16>),
    F16(Vec<f16>),
}

impl HostBuf {
    /// `len` random values in [-1, 1), rounded to `dtype`.
    pub fn random(dtype: DType, len: usize, rng: &mut Rng) -> Self {
        let v = (0..len).map(|_| rng.unit());
        match dtype {
            DType::F32 => HostBuf::F32(v.collect()),
            DType::BF16 => HostBuf::BF16(v.map(bf16::from_f32).collect()),
            DType::F16 => HostBuf::F16(v.map(f16::from_f32).collect()),
        }
    }
    /// `len` copies of a NaN pattern that no computation stores (the canonical NaN is
    /// 0x7FFF…), so an element still holding it was never written.
    pub fn poison(dtype: DType, len: usize) -> Self {
        match dtype {
            DType::F32 => HostBuf::F32(vec![f32::from_bits(0xFFFF_FFFF); len]),
            DType::BF16 => HostBuf::BF16(vec![bf16::from_bits(0xFFFF); len]),
            DType::F16 => HostBuf::F16(vec![f16::from_bits(0xFFFF); len]),
        }
    }
    pub fn dtype(&self) -> DType {
        match self {
            HostBuf::F32(_) => DType::F32,
            HostBuf::BF16(_) => DType::BF16,
            HostBuf::F16(_) => DType::F16,
        }
    }
    pub fn slice(&self) -> HostSlice<'_> {
        match self {
            HostBuf::F32(v) => v.into(),
            HostBuf::BF16(v) => v.into(),
            HostBuf::F16(v) => v.into(),
        }
    }
    pub fn slice_mut(&mut self) -> HostSliceMut<'_> {
        match self {
            HostBuf::F32(v) => v.into(),
            HostBuf::BF16(v) => v.into(),
            HostBuf::F16(v) => v.into(),
        }
    }
    /// The raw bits of every element, for exact comparisons.
    pub fn bits(&self) -> Vec<u32> {
        match self {
            HostBuf::F32(v) => v.iter().map(|x| x.to_bits()).collect(),
            HostBuf::BF16(v) => v.iter().map(|x| x.to_bits() as u32).collect(),
            HostBuf::F16(v) => v.iter().map(|x| x.to_bits() as u32).collect(),
        }
    }
    pub fn len(&self) -> usize {
        self.slice().len()
    }
    fn bytes(&self) -> &[u8] {
        let s = self.slice();
        // SAFETY: plain-old-data elements; the byte view covers exactly the slice.
        unsafe { std::slice::from_raw_parts(s.as_ptr().cast(), s.len() * s.dtype().size()) }
    }
    fn bytes_mut(&mut self) -> &mut [u8] {
        let mut s = self.slice_mut();
        let len = s.len() * s.dtype().size();
        // SAFETY: as above, through a unique borrow.
        unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast(), len) }
    }
}

/// A device allocation of the engine's context, freed on drop.
pub struct DeviceBuf {
    pub ptr: sys::CUdeviceptr,
    pub bytes: usize,
}

impl DeviceBuf {
    pub fn alloc(bytes: usize) -> Self {
        // SAFETY: the engine made its primary context current on this thread.
        let ptr = unsafe { result::malloc_sync(bytes.max(1)) }.expect("cuMemAlloc");
        DeviceBuf { ptr, bytes }
    }
    pub fn upload(h: &HostBuf) -> Self {
        DeviceBuf::upload_bytes(h.bytes())
    }
    /// A buffer holding `bytes` (at a 256-byte aligned address).
    pub fn upload_bytes(bytes: &[u8]) -> Self {
        let d = DeviceBuf::alloc(bytes.len());
        // SAFETY: `d` holds exactly that many bytes.
        unsafe { result::memcpy_htod_sync(d.ptr, bytes) }.expect("cuMemcpyHtoD");
        // From pageable memory cuMemcpyHtoD may return before its DMA lands, and the tests
        // launch on non-blocking streams, which do not wait for the legacy stream: without
        // this the upload's tail can overwrite the kernel's output (seen on the H200).
        result::ctx::synchronize().expect("cuCtxSynchronize");
        d
    }
    /// A buffer holding `h` from byte `byte_offset` on (the bytes before it are zero), so
    /// `at(byte_offset)` is `h` at an address with that offset from the allocation's
    /// 256-byte alignment.
    pub fn upload_at(h: &HostBuf, byte_offset: usize) -> Self {
        let d = DeviceBuf::alloc(byte_offset + h.bytes().len());
        let mut bytes = vec![0u8; byte_offset];
        bytes.extend_from_slice(h.bytes());
        // SAFETY: `d` holds exactly that many bytes.
        unsafe { result::memcpy_htod_sync(d.ptr, &bytes) }.expect("cuMemcpyHtoD");
        // As in `upload`: let the DMA land before any non-blocking stream reads the buffer.
        result::ctx::synchronize().expect("cuCtxSynchronize");
        d
    }
    /// Overwrites the buffer with `h` (which must have the same size).
    pub fn upload_from(&self, h: &HostBuf) {
        assert_eq!(h.bytes().len(), self.bytes);
        // SAFETY: sizes match.
        unsafe { result::memcpy_htod_sync(self.ptr, h.bytes()) }.expect("cuMemcpyHtoD");
        // As in `upload`: let the DMA land before any non-blocking stream reads the buffer.
        result::ctx::synchronize().expect("cuCtxSynchronize");
    }
    /// Copies the buffer into `h` (which must have the same size).
    pub fn download_into(&self, h: &mut HostBuf) {
        self.download_bytes(h.bytes_mut());
    }
    /// Copies the buffer into `dst` (which must have the same size).
    pub fn download_bytes(&self, dst: &mut [u8]) {
        assert_eq!(dst.len(), self.bytes);
        // SAFETY: sizes match; the copy is synchronous.
        unsafe { result::memcpy_dtoh_sync(dst, self.ptr) }.expect("cuMemcpyDtoH");
    }
    /// Copies `h.len()` elements starting at `byte_offset` into `h`.
    pub fn download_range(&self, byte_offset: usize, h: &mut HostBuf) {
        let dst = h.bytes_mut();
        assert!(byte_offset + dst.len() <= self.bytes);
        // SAFETY: the range lies inside the allocation; the copy is synchronous.
        unsafe { result::memcpy_dtoh_sync(dst, self.ptr + byte_offset as u64) }
            .expect("cuMemcpyDtoH");
    }

    pub fn at(&self, byte_offset: usize) -> *mut c_void {
        (self.ptr as usize + byte_offset) as *mut c_void
    }
}

impl Drop for DeviceBuf {
    fn drop(&mut self) {
        // SAFETY: allocated by `alloc`, freed once.
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}

/// A non-blocking stream of the current context, destroyed on drop.
pub struct RawStream(pub sys::CUstream);

impl RawStream {
    pub fn new() -> Self {
        RawStream(
            result::stream::create(result::stream::StreamKind::NonBlocking)
                .expect("cuStreamCreate"),
        )
    }
    pub fn handle(&self) -> Stream {
        Stream(self.0 as *mut c_void)
    }
    pub fn sync(&self) {
        // SAFETY: a live stream.
        unsafe { result::stream::synchronize(self.0) }.expect("cuStreamSynchronize");
    }
}

impl Drop for RawStream {
    fn drop(&mut self) {
        // SAFETY: created by `new`, destroyed once.
        let _ = unsafe { result::stream::destroy(self.0) };
    }
}

/// The inputs of one call on the host, sized by the descriptor's validated extents.
pub struct Problem {
    pub g: Gemm,
    pub a: HostBuf,
    pub b: HostBuf,
    pub bias: Option<HostBuf>,
    /// C before the call (poison, or random values for accumulate mode).
    pub c0: HostBuf,
}

impl Problem {
    pub fn random(g: Gemm, rng: &mut Rng) -> Self {
        let ext = sgemm_bi::validate::check(&g).expect("test descriptors are valid");
        let a = HostBuf::random(g.a.dtype, ext.a.max(1), rng);
        let b = HostBuf::random(g.b.dtype, ext.b.max(1), rng);
        let bias = g.bias.map(|d| HostBuf::random(d, g.n.max(1), rng));
        let c0 = match g.c.mode {
            sgemm_bi::OutputMode::AccumulateF32 => HostBuf::random(DType::F32, ext.c.max(1), rng),
            sgemm_bi::OutputMode::Overwrite(d) => HostBuf::poison(d, ext.c.max(1)),
        };
        Problem { g, a, b, bias, c0 }
    }

    /// The CPU engine's result.
    pub fn on_cpu(&self, cpu: &Engine) -> HostBuf {
        let mut c = self.c0.clone();
        cpu.gemm_host(
            &self.g,
            self.a.slice(),
            self.b.slice(),
            self.bias.as_ref().map(|b| b.slice()),
            c.slice_mut(),
        )
        .expect("CPU gemm");
        c
    }

    /// The GPU engine's result on `stream` (synchronized before returning).
    pub fn on_gpu(&self, gpu: &Engine, stream: &RawStream) -> HostBuf {
        let dev = OnDevice::new(self);
        // SAFETY: every buffer spans the validated extents and lives until the sync below.
        unsafe { gpu.gemm(&self.g, dev.pointers(), stream.handle()) }.expect("GPU gemm");
        stream.sync();
        dev.c(&self.c0)
    }

    /// The GPU engine's result when the call is captured in a CUDA graph on `stream` and the
    /// graph replayed `replays` times (each replay overwrites or accumulates into C like a
    /// call; the tests use overwrite modes). Synchronized before returning.
    pub fn in_cuda_graph(&self, gpu: &Engine, stream: &RawStream, replays: usize) -> HostBuf {
        self.in_cuda_graph_with(
            gpu,
            stream,
            replays,
            sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        )
    }

    /// [`Problem::in_cuda_graph`] with the capture begun in `mode` (torch captures in
    /// `GLOBAL` mode, where the driver refuses more calls during the capture).
    pub fn in_cuda_graph_with(
        &self,
        gpu: &Engine,
        stream: &RawStream,
        replays: usize,
        mode: sys::CUstreamCaptureMode,
    ) -> HostBuf {
        let dev = OnDevice::new(self);
        // SAFETY: driver calls on a live stream; the buffers span the validated extents and
        // outlive the graph's replays, which are synchronized before C is read.
        unsafe {
            sys::cuStreamBeginCapture_v2(stream.0, mode)
                .result()
                .expect("cuStreamBeginCapture");
            gpu.gemm(&self.g, dev.pointers(), stream.handle())
                .expect("GPU gemm under capture");
            let mut graph = std::ptr::null_mut();
            sys::cuStreamEndCapture(stream.0, &mut graph)
                .result()
                .expect("cuStreamEndCapture");
            let mut exec = std::ptr::null_mut();
            sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0)
                .result()
                .expect("cuGraphInstantiate");
            for _ in 0..replays {
                sys::cuGraphLaunch(exec, stream.0)
                    .result()
                    .expect("cuGraphLaunch");
            }
            stream.sync();
            sys::cuGraphExecDestroy(exec)
                .result()
                .expect("cuGraphExecDestroy");
            sys::cuGraphDestroy(graph).result().expect("cuGraphDestroy");
        }
        dev.c(&self.c0)
    }
}

/// A problem's buffers on the device (uploaded when made): for calls whose pointers a test
/// edits, or buffers that must exist before memory runs short or a fault.
pub struct OnDevice {
    pub a: DeviceBuf,
    pub b: DeviceBuf,
    pub bias: Option<DeviceBuf>,
    pub c: DeviceBuf,
}

impl OnDevice {
    pub fn new(p: &Problem) -> Self {
        OnDevice {
            a: DeviceBuf::upload(&p.a),
            b: DeviceBuf::upload(&p.b),
            bias: p.bias.as_ref().map(DeviceBuf::upload),
            c: DeviceBuf::upload(&p.c0),
        }
    }

    /// The pointers of a call on these buffers.
    pub fn pointers(&self) -> GemmPointers {
        GemmPointers {
            a: self.a.at(0),
            b: self.b.at(0),
            bias: self.bias.as_ref().map_or(std::ptr::null(), |x| x.at(0)),
            c: self.c.at(0),
        }
    }

    /// C as it is on the device now, read into a copy of `like`.
    pub fn c(&self, like: &HostBuf) -> HostBuf {
        let mut out = like.clone();
        self.c.download_into(&mut out);
        out
    }
}

/// The bits of C's logical elements (batch entry, row < M, column < N) in `c`, a buffer of
/// C's whole span: the padding past N in each row (ldc > N) is left out.
pub fn c_elements(g: &Gemm, c: &HostBuf) -> Vec<u32> {
    let bits = c.bits();
    let mut out = Vec::with_capacity(g.batch * g.m * g.n);
    for b in 0..g.batch {
        for i in 0..g.m {
            let row = b * g.c.batch_stride + i * g.c.ldc;
            out.extend_from_slice(&bits[row..row + g.n]);
        }
    }
    out
}

/// Index and bits of the first element where two results differ, if any.
pub fn first_difference(x: &HostBuf, y: &HostBuf) -> Option<(usize, u32, u32)> {
    let (bx, by) = (x.bits(), y.bits());
    assert_eq!(bx.len(), by.len());
    bx.iter()
        .zip(&by)
        .enumerate()
        .find(|(_, (p, q))| p != q)
        .map(|(i, (p, q))| (i, *p, *q))
}

/// A dense operand of `rows × cols` in `layout`, packed (leading dimension its contiguous
/// extent, at least 1).
pub fn operand(dtype: DType, layout: Layout, rows: usize, cols: usize) -> Operand {
    Operand {
        dtype,
        layout,
        ld: match layout {
            Layout::RowMajor => cols,
            Layout::ColMajor => rows,
        }
        .max(1),
        batch_stride: 0,
    }
}

/// A packed tensor-core call `C[M, N] = A[M, K] · B[K, N]` with A and B of `dtype` in the
/// layouts `(la, lb)`, C written in `mode`.
pub fn tensor_core_call(
    m: usize,
    n: usize,
    k: usize,
    dtype: DType,
    (la, lb): (Layout, Layout),
    mode: OutputMode,
) -> Gemm {
    Gemm {
        a: operand(dtype, la, m, k),
        b: operand(dtype, lb, k, n),
        c: Output {
            mode,
            ldc: n,
            batch_stride: 0,
        },
        tier: Tier::TensorCores,
        ..Gemm::dense(m, n, k, dtype)
    }
}

/// Group offsets (`i32`) in device memory.
pub fn offsets_on_device(offsets: &[i32]) -> DeviceBuf {
    let host = HostBuf::F32(offsets.iter().map(|&o| f32::from_bits(o as u32)).collect());
    DeviceBuf::upload(&host)
}

/// A grouped call captured in a CUDA graph, instantiated; destroyed on drop.
pub struct CapturedGrouped {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
}

impl CapturedGrouped {
    /// Captures the grouped call `gg` on `p` on `stream` (a thread-local capture: a global
    /// one would also refuse the driver calls of the tests that run beside this one), or
    /// returns the error of the call under capture (nothing ran). With device offsets only
    /// the grouped kernel, which reads them on the device, can be captured: the
    /// group-by-group path reads them back first, which a capture refuses
    /// ([`Error::Unsupported`]). So `Ok` with device offsets says the call runs as one grouped
    /// kernel.
    ///
    /// # Safety
    /// `p`'s buffers hold the whole call's spans (device memory of `gpu`'s context) and
    /// outlive every replay.
    pub unsafe fn new(
        gpu: &Engine,
        stream: &RawStream,
        gg: &GroupedGemm,
        offsets: GroupOffsets<'_>,
        p: GemmPointers,
    ) -> Result<Self, Error> {
        // SAFETY: driver calls on a live stream; the call's contract is the caller's.
        unsafe {
            let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
            sys::cuStreamBeginCapture_v2(stream.0, mode)
                .result()
                .unwrap();
            let call = gpu.grouped_gemm(gg, offsets, p, stream.handle());
            let mut graph = std::ptr::null_mut();
            sys::cuStreamEndCapture(stream.0, &mut graph)
                .result()
                .unwrap();
            if let Err(e) = call {
                if !graph.is_null() {
                    sys::cuGraphDestroy(graph).result().unwrap();
                }
                return Err(e);
            }
            let mut exec = std::ptr::null_mut();
            sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0)
                .result()
                .unwrap();
            Ok(CapturedGrouped { graph, exec })
        }
    }

    /// Replays the graph on `stream` and waits for it.
    pub fn replay(&self, stream: &RawStream) {
        // SAFETY: a live graph and stream; the buffers outlive the replay (`new`'s contract),
        // which is synchronized before returning.
        unsafe { sys::cuGraphLaunch(self.exec, stream.0) }
            .result()
            .unwrap();
        stream.sync();
    }
}

impl Drop for CapturedGrouped {
    fn drop(&mut self) {
        // SAFETY: created by `new`, destroyed once; every replay was synchronized.
        unsafe {
            sys::cuGraphExecDestroy(self.exec).result().unwrap();
            sys::cuGraphDestroy(self.graph).result().unwrap();
        }
    }
}

/// Runs the grouped call `gg` on `p` captured in a CUDA graph on `stream`, replayed once and
/// synchronized, or returns the error of the call under capture ([`CapturedGrouped::new`]).
///
/// # Safety
/// As for [`CapturedGrouped::new`].
pub unsafe fn run_captured(
    gpu: &Engine,
    stream: &RawStream,
    gg: &GroupedGemm,
    offsets: GroupOffsets<'_>,
    p: GemmPointers,
) -> Result<(), Error> {
    // SAFETY: forwarded contract.
    unsafe { CapturedGrouped::new(gpu, stream, gg, offsets, p) }?.replay(stream);
    Ok(())
}
