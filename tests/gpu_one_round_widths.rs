//! The one-round widths (on unless `SGEMM_BI_ONE_ROUND=off`): 224 columns for the 128-row
//! tiles, alone and in clusters of two along M, and 112 columns for every tile height, B
//! K-contiguous. Neither is a whole number of the copy engine's 16-bit pieces (64 columns),
//! so each part's last columns go from registers (`epilogue::store_rest`). Every output
//! must still be the CPU model's bits in every output mode, with and without a bias, with a
//! partial last tile of columns (whose register-stored columns run past N), a partial last
//! tile row and an odd number of tile rows in clusters of two. A test binary of its own,
//! because the engine reads the variable once per device and process.
//!
//! On a GPU of 132 SMs (H100 SXM, H200) the planner sends these shapes to those widths
//! (`host/src/cuda/hopper.rs`, `one_round_widths_fill_the_sms_only_where_they_fit`, pins the
//! choice for the shapes of this kind).
//!
//! Needs a GPU: `bash .gpu/run gpu_one_round_widths` on the GPU host.

mod gpu_support;

use gpu_support::{gpu_engine, tensor_core_call, Problem, RawStream, Rng};
use sgemm_bi::{DType, Device, Engine, Layout, OutputMode};

fn one_round_gpu_engine() -> Option<Engine> {
    // On by default; set in case the environment turns them off. This binary's only test
    // sets it before any engine exists, so no other thread reads the environment meanwhile.
    std::env::set_var("SGEMM_BI_ONE_ROUND", "on");
    gpu_engine()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn one_round_widths_give_the_model_bits() {
    let Some(gpu) = one_round_gpu_engine() else {
        return;
    };
    let cpu = Engine::new(Device::Cpu).expect("the CPU engine always exists");
    let stream = RawStream::new();
    let mut rng = Rng::new(0x0e_2024);
    let mut checked = 0usize;
    // (M, N, K): 224 columns in clusters of two (two tile rows, the second of one row; three
    // tile rows, the last cluster half empty; a partial last tile of 216 columns), then 112
    // columns at 128 rows (one tile row; a partial last tile of 40 columns) and at the
    // narrow heights (8, 16, 32 and 64 rows; a partial last tile of 104 columns).
    let shapes = [
        (256, 14336, 64),
        (129, 14328, 72),
        (300, 13440, 136),
        (128, 14336, 64),
        (100, 9000, 136),
        (1, 14336, 200),
        (12, 14328, 64),
        (20, 14336, 72),
        (64, 14336, 136),
    ];
    for dtype in [DType::BF16, DType::F16] {
        for layouts in [
            (Layout::RowMajor, Layout::ColMajor),
            (Layout::ColMajor, Layout::ColMajor),
        ] {
            for (m, n, k) in shapes {
                // Each store route once without a bias; the 16-bit one (pieces and the
                // registers' rest) and accumulate mode with one.
                for (mode, bias) in [
                    (OutputMode::Overwrite(DType::F32), None),
                    (OutputMode::Overwrite(dtype), None),
                    (OutputMode::Overwrite(dtype), Some(DType::F32)),
                    (OutputMode::AccumulateF32, Some(dtype)),
                ] {
                    let mut g = tensor_core_call(m, n, k, dtype, layouts, mode);
                    g.bias = bias;
                    let p = Problem::random(g, &mut rng);
                    let on_gpu = p.on_gpu(&gpu, &stream).bits();
                    let on_cpu = p.on_cpu(&cpu).bits();
                    let differ = on_gpu.iter().zip(&on_cpu).filter(|(g, c)| g != c).count();
                    assert_eq!(
                        differ, 0,
                        "{dtype} {layouts:?} {m}×{n}×{k} {mode:?} bias {bias:?}: {differ} \
                         outputs differ from the model"
                    );
                    checked += on_gpu.len();
                }
            }
        }
    }
    eprintln!("{checked} outputs equal to the model's bits");
}
