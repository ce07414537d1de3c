//! Faults on a CUDA GPU (docs/reliability.md, item 4) that the other tests cannot provoke
//! without spoiling their process:
//!
//! 1. **Out of memory when the kernels load.** Before any engine exists, nearly all device
//!    memory is taken (`cuMemAlloc` in chunks of 1 GiB, halving down to 1 MiB), then an
//!    engine is created. Either outcome is accepted, but each must have its shape: a
//!    creation error is `Error::Driver` naming `CUDA_ERROR_OUT_OF_MEMORY`; a created engine
//!    computes the same bits as one created with memory to spare (or its call fails with an
//!    `Error::Launch` naming the same error). With the memory freed, a new engine must load
//!    and give the CPU backend's bits: a failed load is not cached.
//! 2. **A failing launch.** A kernel of this test executes `trap;`. A fault inside a kernel
//!    is sticky in CUDA: the context cannot be used again, every later driver call of the
//!    process fails with the same error. That is why this is a test binary of its own, with a
//!    single test whose steps run in order. With the pointer checks off, a GEMM on buffers
//!    allocated before the fault must return `Error::Launch` naming an sgemm_bi entry point
//!    and the CUDA error; with them on, some error; neither may panic, nor may dropping the
//!    engine afterwards.
//!
//! The errors are printed with `{err}`, so the run log shows the text a user would see.
//! Needs a GPU, so the test is `#[ignore]`d: on the GPU host,
//! `SGEMM_BI_REQUIRE_GPU=1 .gpu/bin/gpu_faults-* --include-ignored --nocapture`. Keep it out
//! of compute-sanitizer runs: the trap is a fault on purpose.

mod gpu_support;

use std::ffi::{c_void, CString};
use std::sync::Arc;

use cudarc::driver::{result, sys, CudaContext};
use gpu_support::{first_difference, OnDevice, Problem, RawStream, Rng};
use sgemm_bi::{DType, Device, Engine, Error, Gemm, Operand, Tier};

/// A kernel whose only work is to fault (PTX written by hand; sm_80 like the library's
/// portable module, so that it loads wherever the library's kernels do).
const TRAP_PTX: &str = "
.version 7.0
.target sm_80
.address_size 64

.visible .entry sgemm_bi_test_trap()
{
    trap;
    ret;
}
";

/// Device 0's primary context, current on this thread, or `None` (test skipped) when there
/// is no CUDA device; with `SGEMM_BI_REQUIRE_GPU=1` a missing device is a failure. (The
/// shared `gpu_engine()` creates an engine, and the first fault here must come before any.)
fn primary_context() -> Option<Arc<CudaContext>> {
    // SAFETY: only probes whether libcuda can be loaded; cudarc panics on first use without
    // it, so this must come first.
    let found = if unsafe { sys::is_culib_present() } {
        CudaContext::new(0).map_err(|e| e.to_string())
    } else {
        Err("libcuda.so could not be loaded".to_owned())
    };
    match found {
        Ok(ctx) => Some(ctx),
        Err(err) => {
            if std::env::var("SGEMM_BI_REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("SGEMM_BI_REQUIRE_GPU=1 but no CUDA device 0: {err}");
            }
            eprintln!("skipped: no CUDA device ({err})");
            None
        }
    }
}

/// Free device memory in MiB (`cuMemGetInfo`).
fn free_mib() -> usize {
    result::mem_get_info().expect("cuMemGetInfo").0 >> 20
}

/// Device memory taken until an allocation fails, freed on drop.
struct Hog {
    ptrs: Vec<sys::CUdeviceptr>,
    bytes: usize,
}

impl Hog {
    /// Allocates 1 GiB at a time, then halves the chunk down to 1 MiB whenever an allocation
    /// fails, and stops when 1 MiB fails too.
    fn take_nearly_all() -> Self {
        let mut hog = Hog {
            ptrs: Vec::new(),
            bytes: 0,
        };
        let mut chunk = 1usize << 30;
        loop {
            // SAFETY: a plain allocation of the current context, never accessed, freed once
            // in `drop`.
            match unsafe { result::malloc_sync(chunk) } {
                Ok(ptr) => {
                    hog.ptrs.push(ptr);
                    hog.bytes += chunk;
                }
                Err(_) if chunk > 1 << 20 => chunk /= 2,
                Err(_) => return hog,
            }
        }
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        for &ptr in &self.ptrs {
            // SAFETY: allocated by `take_nearly_all`, freed once, never used by any work.
            let _ = unsafe { result::free_sync(ptr) };
        }
    }
}

/// A bf16 call with tails in every dimension, B column-major and an f32 bias, on `tier`
/// (K a multiple of 8, so that on sm_90 the tensor-core tier takes the Hopper path).
fn problem(tier: Tier, rng: &mut Rng) -> Problem {
    let g = Gemm {
        b: Operand::col_major(DType::BF16, 104),
        bias: Some(DType::F32),
        tier,
        ..Gemm::dense(200, 136, 104, DType::BF16)
    };
    Problem::random(g, rng)
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn faults_give_clear_errors_and_nothing_leaks() {
    // No engine may exist before this: the first one loads the kernels.
    let Some(ctx) = primary_context() else { return };
    let capability = ctx.compute_capability().expect("cuDeviceGetAttribute");
    let tc = capability >= (8, 0);
    let cpu = Engine::new(Device::Cpu).unwrap();
    let stream = RawStream::new();
    let mut rng = Rng::new(0xfa17);

    // 1. Out of memory while the kernels load. The call's buffers exist before.
    let tier = if tc { Tier::TensorCores } else { Tier::Scalar };
    let short = problem(tier, &mut rng);
    let short_dev = OnDevice::new(&short);
    let free_before = free_mib();
    let hog = Hog::take_nearly_all();
    let free_hogged = free_mib();
    println!(
        "out of memory: {} MiB free, {} MiB taken in {} allocations, {free_hogged} MiB left",
        free_before,
        hog.bytes >> 20,
        hog.ptrs.len()
    );
    let mut early = None;
    match Engine::new(Device::Cuda(0)) {
        Err(err) => {
            println!("Engine::new with {free_hogged} MiB free: {err}");
            match &err {
                Error::Driver { message, .. } => assert!(
                    message.contains("CUDA_ERROR_OUT_OF_MEMORY"),
                    "a failed load must name the CUDA error: {err}"
                ),
                other => panic!("Engine::new out of memory: {other:?}"),
            }
        }
        Ok(engine) => {
            println!("Engine::new with {free_hogged} MiB free succeeded; a {tier} call:");
            // SAFETY: live device buffers of the problem's extents, synchronized below.
            match unsafe { engine.gemm(&short.g, short_dev.pointers(), stream.handle()) } {
                Ok(()) => {
                    stream.sync();
                    println!("  it ran");
                    early = Some(short_dev.c(&short.c0));
                }
                Err(err) => {
                    println!("  {err}");
                    match &err {
                        Error::Launch { message, .. } => assert!(
                            message.contains("CUDA_ERROR_OUT_OF_MEMORY"),
                            "a failed launch must name the CUDA error: {err}"
                        ),
                        other => panic!("a call out of memory: {other:?}"),
                    }
                }
            }
        }
    }
    drop(hog);
    println!("memory freed: {} MiB free", free_mib());
    let gpu = Engine::new(Device::Cuda(0)).expect("an engine once memory is free again");
    let scalar = problem(Tier::Scalar, &mut rng);
    assert_eq!(
        first_difference(&scalar.on_gpu(&gpu, &stream), &scalar.on_cpu(&cpu)),
        None,
        "scalar tier after the out-of-memory episode"
    );
    let again = short.on_gpu(&gpu, &stream);
    if let Some(early) = &early {
        assert_eq!(
            first_difference(early, &again),
            None,
            "a {tier} call made while memory was short"
        );
    }
    if tier == Tier::TensorCores && capability == (9, 0) {
        // On sm_90 the CPU backend's model is the tier's definition (tests/gpu_tc_model.rs).
        assert_eq!(
            first_difference(&again, &short.on_cpu(&cpu)),
            None,
            "tensor-core tier after the out-of-memory episode"
        );
    }

    // 2. A failing launch. Every buffer the calls use exists before the fault: afterwards
    // nothing can be allocated.
    let mut cases = vec![("scalar", problem(Tier::Scalar, &mut rng))];
    if tc {
        cases.push(("tensor-core", problem(Tier::TensorCores, &mut rng)));
    }
    let on_device: Vec<OnDevice> = cases.iter().map(|(_, p)| OnDevice::new(p)).collect();
    let image = CString::new(TRAP_PTX).unwrap();
    // SAFETY: `image` is a NUL-terminated PTX text that outlives the call; the engine made
    // the primary context current on this thread.
    let module = unsafe { result::module::load_data(image.as_ptr().cast()) }
        .expect("cuModuleLoadData (the trap kernel)");
    // SAFETY: `module` is loaded (unloaded only at the end).
    let trap = unsafe {
        result::module::get_function(module, CString::new("sgemm_bi_test_trap").unwrap())
    }
    .expect("cuModuleGetFunction (the trap kernel)");
    let no_params: &mut [*mut c_void] = &mut [];
    // SAFETY: the kernel takes no parameters and no shared memory; the stream is live.
    unsafe { result::launch_kernel(trap, (1, 1, 1), (1, 1, 1), 0, stream.0, no_params) }
        .expect("cuLaunchKernel (the trap kernel)");
    // SAFETY: a live stream.
    let fault = unsafe { result::stream::synchronize(stream.0) }
        .expect_err("a kernel that traps must fail its stream");
    let code = format!("{:?}", fault.0);
    println!("the trap kernel: {fault}");

    gpu.set_pointer_checks(false);
    for ((what, p), dev) in cases.iter().zip(&on_device) {
        // SAFETY: live device buffers of the problem's extents, allocated before the fault;
        // nothing can run in the dead context.
        let err = unsafe { gpu.gemm(&p.g, dev.pointers(), stream.handle()) }
            .expect_err("a launch after a fault must fail");
        println!("{what} call after the fault, pointer checks off: {err}");
        match &err {
            Error::Launch { kernel, message } => {
                assert!(kernel.starts_with("sgemm_bi_"), "{err}");
                assert!(message.contains(&code), "the error must name {code}: {err}");
            }
            other => panic!("{what} call after a fault: {other:?}"),
        }
    }
    gpu.set_pointer_checks(true);
    for ((what, p), dev) in cases.iter().zip(&on_device) {
        // SAFETY: as above.
        let err = unsafe { gpu.gemm(&p.g, dev.pointers(), stream.handle()) }
            .expect_err("a call after a fault must fail");
        println!("{what} call after the fault, pointer checks on: {err}");
    }
    drop(gpu);
    // A new engine shares the loaded kernels (or cannot be made); either way no call works.
    match Engine::new(Device::Cuda(0)) {
        Ok(late) => {
            let (_, p) = &cases[0];
            // SAFETY: as above.
            let err = unsafe { late.gemm(&p.g, on_device[0].pointers(), stream.handle()) }
                .expect_err("a call after a fault must fail");
            println!("a new engine after the fault: created; its call: {err}");
        }
        Err(err) => println!("a new engine after the fault: {err}"),
    }
    // SAFETY: loaded above, unloaded once; in a dead context this fails, which is fine.
    let _ = unsafe { result::module::unload(module) };
    // The device buffers, the stream and the context are released on drop; their errors are
    // ignored there (gpu_support) or recorded (cudarc), never a panic.
}
