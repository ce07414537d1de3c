//! What a program pays the first time it uses the library on a machine: the time from the
//! start of the process to a new engine, to the end of the first call of each tier, and to a
//! second engine, with the build information and the image each kernel module loaded from.
//! Run it with an empty driver compute cache to see a fresh machine:
//!
//! ```sh
//! CUDA_CACHE_PATH=$(mktemp -d) cargo run --release --example first_use
//! ```
//!
//! `SGEMM_BI_FORCE_PTX=1` loads the PTX instead of the machine code: what a GPU without
//! embedded machine code pays (the driver compiles each kernel on its first call).

use std::ffi::c_void;
use std::time::Instant;

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut};
use sgemm_bi::{DType, Device, Engine, Gemm, GemmPointers, Stream, Tier};

type AnyResult<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> AnyResult<()> {
    let start = Instant::now();
    let ms = |t: Instant| t.duration_since(start).as_secs_f64() * 1e3;
    print!("{}", sgemm_bi::build_info());
    let engine = match Engine::new(Device::Cuda(0)) {
        Ok(e) => e,
        Err(e) => {
            println!("no CUDA engine ({e}); nothing to measure");
            return Ok(());
        }
    };
    println!("engine created: {:8.1} ms after start", ms(Instant::now()));
    let stream = engine
        .cuda_context()
        .ok_or("a CUDA engine without a context")?
        .new_stream()?;
    let (m, n, k) = (64, 4096, 4096);
    for (tier, dtype) in [(Tier::Scalar, DType::F32), (Tier::TensorCores, DType::BF16)] {
        let g = Gemm {
            tier,
            ..Gemm::dense(m, n, k, dtype)
        };
        let call = |engine: &Engine| -> AnyResult<()> {
            // Random-looking data: the point is the load, not the values.
            let fill = |len: usize, salt: u32| -> Vec<u8> {
                (0..len * dtype.size())
                    .map(|i| ((i as u32).wrapping_mul(2_654_435_761) ^ salt) as u8 & 0x3f)
                    .collect()
            };
            let a: CudaSlice<u8> = stream.clone_htod(&fill(m * k, 1))?;
            let b: CudaSlice<u8> = stream.clone_htod(&fill(k * n, 2))?;
            let mut c: CudaSlice<u8> = stream.alloc_zeros(m * n * dtype.size())?;
            {
                let (a_ptr, _ga) = a.device_ptr(&stream);
                let (b_ptr, _gb) = b.device_ptr(&stream);
                let (c_ptr, _gc) = c.device_ptr_mut(&stream);
                let p = GemmPointers {
                    a: a_ptr as *const c_void,
                    b: b_ptr as *const c_void,
                    bias: std::ptr::null(),
                    c: c_ptr as *mut c_void,
                };
                // SAFETY: a, b and c are allocations of the engine's context holding the
                // dense M×K, K×N and M×N operands of `g` in its dtype; they are freed only
                // after the stream is synchronized below.
                unsafe { engine.gemm(&g, p, Stream(stream.cu_stream() as *mut c_void)) }?;
            }
            stream.synchronize()?;
            Ok(())
        };
        let before = Instant::now();
        call(&engine)?;
        let first = Instant::now();
        call(&engine)?;
        let second = Instant::now();
        println!(
            "first {tier:?} call ({m}x{k}x{n} {dtype:?}): {:8.1} ms after start ({:.1} ms for \
             the call; the next one took {:.2} ms)",
            ms(first),
            (first - before).as_secs_f64() * 1e3,
            (second - first).as_secs_f64() * 1e3,
        );
    }
    let before = Instant::now();
    let again = Engine::new(Device::Cuda(0))?;
    println!(
        "second engine: {:.3} ms",
        before.elapsed().as_secs_f64() * 1e3
    );
    for image in again.loaded_images() {
        println!("loaded: {image}");
    }
    Ok(())
}
