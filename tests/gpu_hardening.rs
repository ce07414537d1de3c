//! Hardening on a CUDA GPU (docs/reliability.md, items 1, 3 and 4): pointers the device cannot
//! use (host memory, a freed allocation, a buffer running off its mapping, memory of another
//! GPU) are rejected by the pointer checks before anything is launched, while pinned, managed
//! and virtual-memory-API allocations are accepted and computed right; misaligned and
//! overlapping pointers, bad ordinals; threads × engines × streams against the serial bits;
//! dropping an engine with work queued and with a captured graph; 10⁴ engine lifetimes
//! without a leak of device or host memory. After every rejected call C is untouched and the
//! engine still computes the CPU backend's bits. Every test needs a GPU, so all are
//! `#[ignore]`d; `bash .gpu/run gpu_hardening` runs them on the GPU host.

mod gpu_support;

use std::ffi::c_void;

use cudarc::driver::{result, sys, CudaContext};
use gpu_support::{
    first_difference, gpu_engine, DeviceBuf, HostBuf, OnDevice, Problem, RawStream, Rng,
};
use sgemm_bi::{
    DType, Device, Engine, Error, ErrorOperand, Gemm, GemmPointers, Layout, Operand, Output,
    OutputMode, Tier,
};

/// Resident memory of this process in KiB (`VmRSS`, Linux).
fn resident_kib() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Whether the device reads ordinary host memory (HMM or ATS): then host pointers are valid
/// and the checks accept addresses the driver does not know.
fn pageable_memory_access(gpu: &Engine) -> bool {
    gpu.cuda_context()
        .unwrap()
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS)
        .unwrap()
        != 0
}

/// Runs `p` with the pointers `edit` makes and expects an error; checks that C on the
/// device was not written and that the engine then still gives the CPU's bits.
fn rejected(
    gpu: &Engine,
    cpu: &Engine,
    p: &Problem,
    stream: &RawStream,
    edit: impl FnOnce(&mut GemmPointers),
) -> Error {
    rejected_on(gpu, cpu, p, &OnDevice::new(p), stream, edit)
}

/// As `rejected`, with the problem's device buffers made by the caller (before the bad
/// pointer, so that a freed address cannot come back as one of them).
fn rejected_on(
    gpu: &Engine,
    cpu: &Engine,
    p: &Problem,
    dev: &OnDevice,
    stream: &RawStream,
    edit: impl FnOnce(&mut GemmPointers),
) -> Error {
    let mut ptrs = dev.pointers();
    edit(&mut ptrs);
    // SAFETY: the pointers edited in are ones the library must reject before using them;
    // the others are live device buffers of the problem's extents.
    let err = match unsafe { gpu.gemm(&p.g, ptrs, stream.handle()) } {
        Err(e) => e,
        Ok(()) => panic!("the call must be rejected: {ptrs:?}"),
    };
    stream.sync();
    assert_eq!(
        first_difference(&dev.c(&p.c0), &p.c0),
        None,
        "C written by a rejected call ({err})"
    );
    still_works(gpu, cpu, p, stream);
    err
}

/// A good call on `gpu` gives the CPU backend's bits (scalar tier).
fn still_works(gpu: &Engine, cpu: &Engine, p: &Problem, stream: &RawStream) {
    let want = p.on_cpu(cpu);
    assert_eq!(
        first_difference(&p.on_gpu(gpu, stream), &want),
        None,
        "after a rejected call"
    );
}

/// The problem every test here uses: bf16 inputs, B column-major, an f32 bias and an f32 C
/// (the tests read C back as f32 and shift its pointer by 2 bytes to misalign it).
fn problem(rng: &mut Rng) -> Problem {
    let dense = Gemm::dense(37, 29, 45, DType::BF16);
    let g = Gemm {
        bias: Some(DType::F32),
        b: Operand::col_major(DType::BF16, 45),
        c: Output {
            mode: OutputMode::Overwrite(DType::F32),
            ..dense.c
        },
        ..dense
    };
    Problem::random(g, rng)
}

/// A range of device virtual addresses of which only the first `mapped` bytes are backed
/// (cuMemAddressReserve + cuMemCreate + cuMemMap), unmapped and freed on drop.
struct Vmm {
    base: sys::CUdeviceptr,
    reserved: usize,
    mapped: usize,
    handle: sys::CUmemGenericAllocationHandle,
}

impl Vmm {
    /// `pages` granules mapped out of `pages + spare` reserved ones; also returns the
    /// granule size.
    fn new(ordinal: usize, pages: usize, spare: usize) -> (Self, usize) {
        let prop = sys::CUmemAllocationProp {
            type_: sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
            requestedHandleTypes: sys::CUmemAllocationHandleType(0),
            location: sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: ordinal as i32,
            },
            win32HandleMetaData: std::ptr::null_mut(),
            allocFlags: sys::CUmemAllocationProp_st__bindgen_ty_1 {
                compressionType: 0,
                gpuDirectRDMACapable: 0,
                usage: 0,
                reserved: [0; 4],
            },
        };
        let mut gran = 0usize;
        let access = sys::CUmemAccessDesc {
            location: prop.location,
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: driver calls with valid out-pointers; the reservation is unmapped and freed
        // in `drop`.
        unsafe {
            sys::cuMemGetAllocationGranularity(
                &mut gran,
                &prop,
                sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
            )
            .result()
            .unwrap();
            let (reserved, mapped) = ((pages + spare) * gran, pages * gran);
            let mut base = 0;
            sys::cuMemAddressReserve(&mut base, reserved, 0, 0, 0)
                .result()
                .unwrap();
            let mut handle = 0;
            sys::cuMemCreate(&mut handle, mapped, &prop, 0)
                .result()
                .unwrap();
            sys::cuMemMap(base, mapped, 0, handle, 0).result().unwrap();
            sys::cuMemSetAccess(base, mapped, &access, 1)
                .result()
                .unwrap();
            (
                Vmm {
                    base,
                    reserved,
                    mapped,
                    handle,
                },
                gran,
            )
        }
    }

    fn at(&self, offset: usize) -> *mut c_void {
        (self.base as usize + offset) as *mut c_void
    }

    fn upload_at(&self, offset: usize, h: &HostBuf) {
        let bits = h.bits();
        let bytes: Vec<u8> = match h.dtype() {
            DType::F32 => bits.iter().flat_map(|b| b.to_le_bytes()).collect(),
            _ => bits
                .iter()
                .flat_map(|&b| (b as u16).to_le_bytes())
                .collect(),
        };
        // SAFETY: the range lies in the mapped part (checked by the callers' offsets).
        unsafe { result::memcpy_htod_sync(self.base + offset as u64, &bytes) }.unwrap();
        result::ctx::synchronize().unwrap();
    }
}

impl Drop for Vmm {
    fn drop(&mut self) {
        // SAFETY: mapped and reserved by `new`, released once.
        unsafe {
            let _ = sys::cuMemUnmap(self.base, self.mapped);
            let _ = sys::cuMemRelease(self.handle);
            let _ = sys::cuMemAddressFree(self.base, self.reserved);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn pointers_the_device_cannot_use_are_rejected() {
    let Some(gpu) = gpu_engine() else { return };
    let cpu = Engine::new(Device::Cpu).unwrap();
    let stream = RawStream::new();
    let mut rng = Rng::new(0x0c0de);
    let p = problem(&mut rng);
    assert!(gpu.pointer_checks(), "pointer checks are on by default");
    let pageable = pageable_memory_access(&gpu);
    let mut rejected_count = 0;
    if pageable {
        eprintln!(
            "this GPU reads pageable host memory (HMM/ATS): host pointers are valid here, so \
             only the cases that stay rejected are checked"
        );
    } else {
        // Ordinary host memory for each operand.
        let host_a = p.a.clone();
        let host_b = p.b.clone();
        let host_bias = p.bias.clone().unwrap();
        let mut host_c = p.c0.clone();
        let cases: [(ErrorOperand, *mut c_void); 4] = [
            (ErrorOperand::A, host_a.slice().as_ptr().cast_mut()),
            (ErrorOperand::B, host_b.slice().as_ptr().cast_mut()),
            (ErrorOperand::Bias, host_bias.slice().as_ptr().cast_mut()),
            (ErrorOperand::C, host_c.slice_mut().as_mut_ptr()),
        ];
        for (which, host) in cases {
            let err = rejected(&gpu, &cpu, &p, &stream, |q| match which {
                ErrorOperand::A => q.a = host,
                ErrorOperand::B => q.b = host,
                ErrorOperand::Bias => q.bias = host,
                ErrorOperand::C => q.c = host,
                other => unreachable!("{other} is not an operand of Engine::gemm"),
            });
            match &err {
                Error::InaccessibleMemory {
                    operand,
                    addr,
                    found,
                    device: Device::Cuda(0),
                } if *operand == which && *addr == host as usize => {
                    assert!(found.contains("not memory the CUDA driver knows"), "{err}")
                }
                other => panic!("host memory for {which}: {other:?}"),
            }
            rejected_count += 1;
        }
        // A freed allocation. The problem's buffers exist first: the driver hands a freed
        // address out again to the next allocation of a fitting size (seen on the H200,
        // where B then pointed at A's live buffer and the call was rightly accepted).
        let live = OnDevice::new(&p);
        let freed = DeviceBuf::alloc(1 << 20);
        let addr = freed.at(0);
        drop(freed);
        let err = rejected_on(&gpu, &cpu, &p, &live, &stream, |q| q.b = addr);
        assert!(
            matches!(
                err,
                Error::InaccessibleMemory {
                    operand: ErrorOperand::B,
                    ..
                }
            ),
            "{err:?}"
        );
        rejected_count += 1;
        // C starting in mapped memory and running past the mapping's end.
        let (vmm, gran) = Vmm::new(0, 1, 1);
        let c_bytes = p.c0.len() * p.c0.dtype().size();
        // 16-byte aligned (an unaligned C is another error), half of C past the end.
        let start = (gran - c_bytes / 2) & !15;
        let err = rejected(&gpu, &cpu, &p, &stream, |q| q.c = vmm.at(start));
        match &err {
            Error::InaccessibleMemory {
                operand: ErrorOperand::C,
                found,
                ..
            } => assert!(found.contains("this is its last element"), "{err}"),
            other => panic!("C past its mapping: {other:?}"),
        }
        rejected_count += 1;
    }
    // Memory of another GPU.
    let count = CudaContext::device_count().unwrap() as usize;
    if count >= 2 {
        let other = CudaContext::new(1).unwrap();
        other.bind_to_thread().unwrap();
        let on_1 = DeviceBuf::alloc(1 << 20);
        gpu.cuda_context().unwrap().bind_to_thread().unwrap();
        let err = rejected(&gpu, &cpu, &p, &stream, |q| q.a = on_1.at(0));
        match &err {
            Error::InaccessibleMemory {
                operand: ErrorOperand::A,
                found,
                ..
            } => assert!(found.contains("memory of cuda:1"), "{err}"),
            other => panic!("memory of cuda:1: {other:?}"),
        }
        rejected_count += 1;
        other.bind_to_thread().unwrap();
        drop(on_1);
        gpu.cuda_context().unwrap().bind_to_thread().unwrap();
    } else {
        eprintln!("one GPU: memory of another device not tried");
    }
    println!("{rejected_count} kinds of inaccessible pointers rejected, nothing launched");
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn pinned_managed_and_mapped_memory_are_accepted() {
    let Some(gpu) = gpu_engine() else { return };
    let cpu = Engine::new(Device::Cpu).unwrap();
    let stream = RawStream::new();
    let mut rng = Rng::new(0x0c0df);
    let p = problem(&mut rng);
    let want = p.on_cpu(&cpu);
    let dev = OnDevice::new(&p);
    let a_bytes = p.a.len() * 2;

    // A in pinned host memory (cuMemHostAlloc).
    // SAFETY: a fresh pinned buffer of `a_bytes`, filled before use and freed at the end.
    let pinned = unsafe { result::malloc_host(a_bytes, 0) }.unwrap();
    let HostBuf::BF16(a_vals) = &p.a else {
        unreachable!()
    };
    // SAFETY: `pinned` holds `a_bytes` bytes, as many as A's values.
    unsafe { std::ptr::copy_nonoverlapping(a_vals.as_ptr().cast::<u8>(), pinned.cast(), a_bytes) };
    // B and C in managed memory (cuMemAllocManaged).
    let b_bytes = p.b.len() * 2;
    let c_bytes = p.c0.len() * 4;
    // SAFETY: fresh managed allocations, filled from the host and freed at the end.
    let (mb, mc) = unsafe {
        (
            result::malloc_managed(b_bytes, sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL).unwrap(),
            result::malloc_managed(c_bytes, sys::CUmemAttach_flags::CU_MEM_ATTACH_GLOBAL).unwrap(),
        )
    };
    let HostBuf::BF16(b_vals) = &p.b else {
        unreachable!()
    };
    // SAFETY: managed memory is host-accessible; sizes as allocated.
    unsafe {
        std::ptr::copy_nonoverlapping(b_vals.as_ptr().cast::<u8>(), mb as *mut u8, b_bytes);
        std::ptr::write_bytes(mc as *mut u8, 0xFF, c_bytes);
    }
    let ptrs = GemmPointers {
        a: pinned.cast_const(),
        b: mb as *const c_void,
        c: mc as *mut c_void,
        ..dev.pointers()
    };
    // SAFETY: every buffer holds the problem's extents and lives until the sync.
    unsafe { gpu.gemm(&p.g, ptrs, stream.handle()) }.expect("pinned A, managed B and C");
    stream.sync();
    let mut got = p.c0.clone();
    let HostBuf::F32(out) = &mut got else {
        unreachable!()
    };
    // SAFETY: the work is complete; managed memory is host-readable.
    unsafe { std::ptr::copy_nonoverlapping(mc as *const f32, out.as_mut_ptr(), out.len()) };
    assert_eq!(first_difference(&got, &want), None, "pinned and managed");
    // SAFETY: allocated above, no work pending.
    unsafe {
        result::free_host(pinned).unwrap();
        result::free_sync(mb).unwrap();
        result::free_sync(mc).unwrap();
    }

    // A, B and C in memory mapped through the virtual memory API (what torch's expandable
    // segments use), C ending exactly at the end of the mapping.
    let (vmm, gran) = Vmm::new(0, 2, 0);
    let (a_at, b_at) = (0, a_bytes.next_multiple_of(256));
    let c_at = 2 * gran - c_bytes;
    vmm.upload_at(a_at, &p.a);
    vmm.upload_at(b_at, &p.b);
    vmm.upload_at(c_at, &p.c0);
    let ptrs = GemmPointers {
        a: vmm.at(a_at),
        b: vmm.at(b_at),
        c: vmm.at(c_at),
        ..dev.pointers()
    };
    // SAFETY: as above.
    unsafe { gpu.gemm(&p.g, ptrs, stream.handle()) }.expect("memory mapped with cuMemMap");
    stream.sync();
    let mut got = p.c0.clone();
    let HostBuf::F32(out) = &mut got else {
        unreachable!()
    };
    // SAFETY: C's range lies in the mapping; the copy is synchronous.
    unsafe { result::memcpy_dtoh_sync(out, vmm.base + c_at as u64) }.unwrap();
    assert_eq!(first_difference(&got, &want), None, "cuMemMap memory");

    // The checks switched off: a good call still works; and on again.
    gpu.set_pointer_checks(false);
    assert!(!gpu.pointer_checks());
    still_works(&gpu, &cpu, &p, &stream);
    gpu.set_pointer_checks(true);
    std::env::set_var("SGEMM_BI_CHECK_POINTERS", "0");
    let unchecked = Engine::new(Device::Cuda(0)).unwrap();
    std::env::remove_var("SGEMM_BI_CHECK_POINTERS");
    assert!(!unchecked.pointer_checks(), "SGEMM_BI_CHECK_POINTERS=0");
    still_works(&unchecked, &cpu, &p, &stream);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn misaligned_overlapping_and_other_bad_calls() {
    let Some(gpu) = gpu_engine() else { return };
    let cpu = Engine::new(Device::Cpu).unwrap();
    let stream = RawStream::new();
    let mut rng = Rng::new(0x0c0e0);
    let p = problem(&mut rng);
    let cases: [(ErrorOperand, usize); 4] = [
        (ErrorOperand::A, 1),
        (ErrorOperand::B, 1),
        (ErrorOperand::Bias, 2),
        (ErrorOperand::C, 2),
    ];
    for (which, by) in cases {
        let err = rejected(&gpu, &cpu, &p, &stream, |q| {
            let shift = |x: *const c_void| (x as usize + by) as *mut c_void;
            match which {
                ErrorOperand::A => q.a = shift(q.a),
                ErrorOperand::B => q.b = shift(q.b),
                ErrorOperand::Bias => q.bias = shift(q.bias),
                ErrorOperand::C => q.c = shift(q.c.cast_const()),
                other => unreachable!("{other} is not an operand of Engine::gemm"),
            }
        });
        assert!(
            matches!(err, Error::Misaligned { operand, .. } if operand == which),
            "{err:?}"
        );
    }
    // C on top of A, and C inside the bias, in device memory.
    let err = rejected(&gpu, &cpu, &p, &stream, |q| q.c = q.a.cast_mut());
    assert!(
        matches!(
            err,
            Error::OverlappingOperands {
                input: ErrorOperand::A,
                ..
            }
        ),
        "{err:?}"
    );
    let big_bias = DeviceBuf::alloc(p.c0.len() * 4 + 4096);
    let err = rejected(&gpu, &cpu, &p, &stream, |q| {
        q.bias = big_bias.at(64);
        q.c = big_bias.at(0);
    });
    assert!(
        matches!(
            err,
            Error::OverlappingOperands {
                input: ErrorOperand::Bias,
                ..
            }
        ),
        "{err:?}"
    );
    // f32 on the tensor-core tier; a size that is a negative number; host slices.
    let mut f32_tc = Problem::random(Gemm::dense(8, 8, 8, DType::F32), &mut rng);
    f32_tc.g.tier = Tier::TensorCores;
    let dev = OnDevice::new(&f32_tc);
    // SAFETY: rejected before any pointer is used.
    let err = unsafe { gpu.gemm(&f32_tc.g, dev.pointers(), stream.handle()) }.unwrap_err();
    assert!(matches!(err, Error::UnsupportedDtype(_)), "{err:?}");
    let neg = Gemm {
        m: -1i64 as usize,
        ..p.g
    };
    let dev = OnDevice::new(&p);
    // SAFETY: as above.
    let err = unsafe { gpu.gemm(&neg, dev.pointers(), stream.handle()) }.unwrap_err();
    assert!(matches!(err, Error::Overflow { .. }), "{err:?}");
    let mut c = p.c0.clone();
    let err = gpu
        .gemm_host(&p.g, p.a.slice(), p.b.slice(), None, c.slice_mut())
        .unwrap_err();
    assert!(matches!(err, Error::WrongDevice(_)), "{err:?}");
    // Ordinals that do not exist.
    let count = CudaContext::device_count().unwrap() as usize;
    for ordinal in [count, count + 1, 1000] {
        match Engine::new(Device::Cuda(ordinal)) {
            Err(Error::NoDevice {
                ordinal: o,
                count: c,
            }) => assert_eq!((o, c), (ordinal, count)),
            other => panic!("Cuda({ordinal}) with {count} devices: {other:?}"),
        }
    }
    still_works(&gpu, &cpu, &p, &stream);
}

/// A random call for the concurrency test: both tiers where the tensor-core tier runs.
fn random_problem(rng: &mut Rng, tensor_cores: bool) -> Problem {
    let tier = if tensor_cores && rng.below(2) == 0 {
        Tier::TensorCores
    } else {
        Tier::Scalar
    };
    let dtype = match tier {
        Tier::TensorCores => rng.pick(&[DType::BF16, DType::F16]),
        Tier::Scalar | Tier::Auto => rng.pick(&[DType::F32, DType::BF16, DType::F16]),
    };
    let (m, n, k) = (1 + rng.below(300), 1 + rng.below(300), 1 + rng.below(600));
    let layout = |rng: &mut Rng| rng.pick(&[Layout::RowMajor, Layout::ColMajor]);
    let op = |layout: Layout, rows: usize, cols: usize| {
        if layout == Layout::RowMajor {
            Operand::row_major(dtype, cols)
        } else {
            Operand::col_major(dtype, rows)
        }
    };
    let g = Gemm {
        a: op(layout(rng), m, k),
        b: op(layout(rng), k, n),
        bias: [None, Some(DType::F32), Some(dtype)][rng.below(3)],
        c: sgemm_bi::Output {
            mode: [OutputMode::Overwrite(dtype), OutputMode::AccumulateF32][rng.below(2)],
            ..Gemm::dense(m, n, k, dtype).c
        },
        tier,
        ..Gemm::dense(m, n, k, dtype)
    };
    Problem::random(g, rng)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn threads_engines_and_streams_give_the_serial_bits() {
    let Some(first) = gpu_engine() else { return };
    let cpu = Engine::new(Device::Cpu).unwrap();
    let tc = first.supports(Tier::TensorCores);
    let mut rng = Rng::new(0xc0c2);
    let problems: Vec<Problem> = (0..32).map(|_| random_problem(&mut rng, tc)).collect();
    let stream = RawStream::new();
    let serial: Vec<HostBuf> = problems.iter().map(|p| p.on_gpu(&first, &stream)).collect();
    for (p, s) in problems.iter().zip(&serial) {
        if p.g.tier == Tier::Scalar {
            assert_eq!(first_difference(s, &p.on_cpu(&cpu)), None, "{:?}", p.g);
        }
    }
    let engines: Vec<Engine> = (0..3).map(|_| gpu_engine().unwrap()).collect();
    const THREADS: usize = 8;
    const ROUNDS: usize = 3;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (engines, problems, serial) = (&engines, &problems, &serial);
            s.spawn(move || {
                engines[0].cuda_context().unwrap().bind_to_thread().unwrap();
                let streams = [RawStream::new(), RawStream::new()];
                let mut rng = Rng::new(t as u64);
                for round in 0..ROUNDS {
                    for i in 0..problems.len() {
                        let i = (i * 7 + t + round) % problems.len();
                        let engine = &engines[rng.below(engines.len())];
                        let got = problems[i].on_gpu(engine, &streams[rng.below(2)]);
                        assert_eq!(
                            first_difference(&got, &serial[i]),
                            None,
                            "thread {t} round {round} problem {i} {:?}",
                            problems[i].g
                        );
                    }
                }
            });
        }
    });
    println!(
        "{THREADS} threads × 3 engines × 2 streams each: {} calls, every one identical to the \
         serial run",
        THREADS * ROUNDS * problems.len()
    );
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn dropping_an_engine_with_work_queued_is_safe() {
    let Some(keep) = gpu_engine() else { return };
    let cpu = Engine::new(Device::Cpu).unwrap();
    let stream = RawStream::new();
    let mut rng = Rng::new(0xd0d0);
    let g = Gemm {
        bias: Some(DType::F32),
        ..Gemm::dense(1536, 1024, 2048, DType::F32)
    };
    let p = Problem::random(g, &mut rng);
    let want = p.on_cpu(&cpu);
    let dev = OnDevice::new(&p);
    // Many calls queued, then the engine dropped before any has run to completion.
    let doomed = gpu_engine().unwrap();
    for _ in 0..20 {
        // SAFETY: the buffers outlive the synchronization below.
        unsafe { doomed.gemm(&g, dev.pointers(), stream.handle()) }.unwrap();
    }
    drop(doomed);
    let other = gpu_engine().unwrap();
    drop(other);
    stream.sync();
    assert_eq!(first_difference(&dev.c(&p.c0), &want), None, "queued work");

    // A graph captured through an engine that is then dropped still replays.
    let captured = gpu_engine().unwrap();
    let dev2 = OnDevice::new(&p);
    // SAFETY: driver calls on a live stream; the buffers outlive the replays, which are
    // synchronized before they are read.
    unsafe {
        sys::cuStreamBeginCapture_v2(
            stream.0,
            sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
        )
        .result()
        .unwrap();
        captured.gemm(&g, dev2.pointers(), stream.handle()).unwrap();
        let mut graph = std::ptr::null_mut();
        sys::cuStreamEndCapture(stream.0, &mut graph)
            .result()
            .unwrap();
        let mut exec = std::ptr::null_mut();
        sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0)
            .result()
            .unwrap();
        drop(captured);
        for _ in 0..3 {
            sys::cuGraphLaunch(exec, stream.0).result().unwrap();
        }
        stream.sync();
        sys::cuGraphExecDestroy(exec).result().unwrap();
        sys::cuGraphDestroy(graph).result().unwrap();
    }
    assert_eq!(
        first_difference(&dev2.c(&p.c0), &want),
        None,
        "graph replay"
    );
    // The engine that was kept is unaffected.
    assert_eq!(first_difference(&p.on_gpu(&keep, &stream), &want), None);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn ten_thousand_engine_lifetimes_leak_nothing_on_the_gpu() {
    // Held for the whole test: the device's context stays current and its kernels loaded.
    let Some(_gpu) = gpu_engine() else { return };
    let cpu = Engine::new(Device::Cpu).unwrap();
    let stream = RawStream::new();
    let mut rng = Rng::new(0x1ea5);
    let p = problem(&mut rng);
    let want = p.on_cpu(&cpu);
    let dev = OnDevice::new(&p);
    let cycle = || {
        let e = Engine::new(Device::Cuda(0)).unwrap();
        // SAFETY: the buffers outlive the synchronization.
        unsafe { e.gemm(&p.g, dev.pointers(), stream.handle()) }.unwrap();
        let mut bad = p.g;
        bad.a.ld = 0;
        // SAFETY: rejected before any pointer is used.
        assert!(unsafe { e.gemm(&bad, dev.pointers(), stream.handle()) }.is_err());
        drop(e);
    };
    for _ in 0..200 {
        cycle();
    }
    stream.sync();
    let (free_before, total) = result::mem_get_info().unwrap();
    let rss_before = resident_kib();
    let start = std::time::Instant::now();
    const CYCLES: usize = 10_000;
    for i in 0..CYCLES {
        cycle();
        if i % 100 == 0 {
            stream.sync();
        }
    }
    stream.sync();
    let seconds = start.elapsed().as_secs_f64();
    let (free_after, _) = result::mem_get_info().unwrap();
    let rss_after = resident_kib();
    assert_eq!(first_difference(&dev.c(&p.c0), &want), None);
    let device_growth = free_before.saturating_sub(free_after);
    println!(
        "{CYCLES} CUDA engine create/call/reject/drop cycles in {seconds:.2} s: device memory \
         free {} MiB before, {} MiB after (of {} MiB; used {} KiB more); resident {} KiB \
         before, {} KiB after",
        free_before >> 20,
        free_after >> 20,
        total >> 20,
        device_growth >> 10,
        rss_before,
        rss_after
    );
    assert!(
        device_growth <= 2 << 20,
        "device memory grew by {device_growth} bytes"
    );
    assert!(
        rss_after.saturating_sub(rss_before) <= 1024,
        "resident memory grew by {} KiB",
        rss_after - rss_before
    );
}
