//! First use on a GPU: creating an engine loads no kernel, a call loads only the module it
//! needs, from the machine code embedded for the device, and the PTX fallback (what a GPU
//! without machine code runs) gives the very same bits, one kernel compiled at a time.
//!
//! One test, so that it runs first in its process: the kernels of a device load once per
//! process, and the counts below start from nothing.

mod gpu_support;

use std::time::Instant;

use gpu_support::{first_difference, gpu_engine, Problem, RawStream, Rng};
use sgemm_bi::{DType, Device, Engine, Gemm, ImageKind, Tier};

fn entry_points(engine: &Engine) -> Vec<(&'static str, usize)> {
    engine
        .loaded_images()
        .iter()
        .map(|l| (l.module, l.entry_points))
        .collect()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn kernels_load_on_first_use_from_machine_code_and_the_ptx_gives_the_same_bits() {
    let started = Instant::now();
    let Some(gpu) = gpu_engine() else { return };
    let created = started.elapsed();
    let cc = gpu.compute_capability().unwrap();
    let images = gpu.loaded_images();
    println!("engine in {created:?} on compute capability {cc:?}: {images:?}");
    assert!(
        entry_points(&gpu).iter().all(|&(_, n)| n == 0),
        "a new engine loads nothing: {images:?}"
    );
    if cc == (9, 0) {
        assert_eq!(
            images
                .iter()
                .map(|l| (l.module, l.image))
                .collect::<Vec<_>>(),
            [
                ("sm80", ImageKind::MachineCode { arch: "sm_90" }),
                ("sm90a", ImageKind::MachineCode { arch: "sm_90a" }),
            ],
            "an H100/H200 runs the machine code built for it"
        );
    }

    let stream = RawStream::new();
    let cpu = Engine::new(Device::Cpu).unwrap();
    let mut rng = Rng::new(0xf157);
    let calls = [
        Gemm {
            tier: Tier::Scalar,
            ..Gemm::dense(70, 300, 45, DType::F32)
        },
        Gemm {
            tier: Tier::TensorCores,
            ..Gemm::dense(130, 260, 70, DType::BF16)
        },
    ];
    let problems: Vec<Problem> = calls
        .iter()
        .map(|g| Problem::random(*g, &mut rng))
        .collect();
    let mut machine_code = Vec::new();
    for p in &problems {
        let before = Instant::now();
        machine_code.push(p.on_gpu(&gpu, &stream));
        println!(
            "first {:?} call from machine code: {:?}; loaded {:?}",
            p.g.tier,
            before.elapsed(),
            entry_points(&gpu)
        );
    }
    let loaded: usize = entry_points(&gpu).iter().map(|&(_, n)| n).sum();
    // A scalar call looks up its two tile widths; a tensor-core call one entry point.
    assert!(
        (2..=4).contains(&loaded),
        "two calls loaded {loaded} entry points, not all 128: {:?}",
        gpu.loaded_images()
    );
    // The scalar tier's contract: the GPU's bits are the CPU's.
    let scalar_cpu = problems[0].on_cpu(&cpu);
    assert_eq!(first_difference(&machine_code[0], &scalar_cpu), None);

    let ptx = Engine::from_ptx(Device::Cuda(0)).unwrap();
    assert!(ptx
        .loaded_images()
        .iter()
        .all(|l| matches!(l.image, ImageKind::Ptx { .. }) && l.entry_points == 0));
    for (p, expected) in problems.iter().zip(&machine_code) {
        let before = Instant::now();
        let got = p.on_gpu(&ptx, &stream);
        println!(
            "first {:?} call from PTX (the driver compiles its kernels): {:?}",
            p.g.tier,
            before.elapsed()
        );
        assert_eq!(
            first_difference(&got, expected),
            None,
            "{:?}: the PTX and the machine code must give the same bits",
            p.g.tier
        );
    }
    for image in ptx.loaded_images() {
        println!("from PTX: {image}");
    }
}
