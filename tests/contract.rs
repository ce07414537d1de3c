//! The contract tests, each written once and run for every (backend, tier, path) it holds
//! for (ARCHITECTURE.md C1, C2): a body in `tests/contract/` takes a [`Target`], and
//! `contract_tests!` makes one test per body and target, named `body::target` — so
//! `cargo test rows_do_not_depend_on_m` runs one contract on every target, `cargo test
//! cuda_hopper` every contract on one.
//!
//! Bodies: batch invariance by slicing (`invariance`), run-to-run and graph replay
//! (`repeat`), special values (`special_values`), the training triad (`triad`) and
//! `Tier::Auto` (`auto_tier`).
//!
//! Targets: `cpu_scalar`, `cpu_tensor_model` (the CPU's model of the sm_90 tensor cores),
//! `cuda_scalar`, `cuda_tensor_cores` (the planner's choice of path), `cuda_mma_sync` and
//! `cuda_hopper` (the tensor-core tier restricted to one path, `Engine::with_tc_path`). The
//! GPU instances are `#[ignore]`d (CI has no GPU; `bash .gpu/run` runs them on the GPU
//! host, `bash .gpu/run cuda_hopper` those of one target); without a CUDA device they skip,
//! and fail with `SGEMM_BI_REQUIRE_GPU=1`.

#[path = "common/mod.rs"]
mod common;
#[path = "gpu_support/mod.rs"]
mod gpu_support;

#[path = "contract/auto_tier.rs"]
mod auto_tier;
#[path = "contract/invariance.rs"]
mod invariance;
#[path = "contract/repeat.rs"]
mod repeat;
#[path = "contract/special_values.rs"]
mod special_values;
#[path = "common/specials.rs"]
mod specials;
#[path = "contract/target.rs"]
mod target;
#[path = "contract/triad.rs"]
mod triad;

use target::Target;

/// `contract_tests! { module::body: [target, …]; … }`: a module `body` with one test per
/// target, each calling `module::body(Target::…)`.
macro_rules! contract_tests {
    ($($module:ident :: $body:ident : [$($target:ident),+ $(,)?];)+) => {
        $(
            mod $body {
                #[allow(unused_imports)]
                use super::Target;
                $(contract_tests!(@one $module, $body, $target);)+
            }
        )+
    };
    (@one $module:ident, $body:ident, cpu_scalar) => {
        #[test]
        fn cpu_scalar() {
            crate::$module::$body(Target::CpuScalar)
        }
    };
    (@one $module:ident, $body:ident, cpu_tensor_model) => {
        #[test]
        fn cpu_tensor_model() {
            crate::$module::$body(Target::CpuTensorModel)
        }
    };
    (@one $module:ident, $body:ident, cuda_scalar) => {
        #[test]
        #[ignore = "needs a CUDA GPU"]
        fn cuda_scalar() {
            crate::$module::$body(Target::CudaScalar)
        }
    };
    (@one $module:ident, $body:ident, cuda_tensor_cores) => {
        #[test]
        #[ignore = "needs a CUDA GPU"]
        fn cuda_tensor_cores() {
            crate::$module::$body(Target::CudaTensorCores)
        }
    };
    (@one $module:ident, $body:ident, cuda_mma_sync) => {
        #[test]
        #[ignore = "needs a CUDA GPU"]
        fn cuda_mma_sync() {
            crate::$module::$body(Target::CudaMmaSync)
        }
    };
    (@one $module:ident, $body:ident, cuda_hopper) => {
        #[test]
        #[ignore = "needs a CUDA GPU"]
        fn cuda_hopper() {
            crate::$module::$body(Target::CudaHopper)
        }
    };
}

contract_tests! {
    invariance::rows_do_not_depend_on_m: [
        cpu_scalar, cpu_tensor_model, cuda_scalar, cuda_tensor_cores, cuda_mma_sync, cuda_hopper,
    ];
    invariance::columns_do_not_depend_on_n: [
        cpu_scalar, cpu_tensor_model, cuda_scalar, cuda_tensor_cores, cuda_mma_sync, cuda_hopper,
    ];
    invariance::batch_entries_do_not_depend_on_the_batch_count: [
        cpu_scalar, cpu_tensor_model, cuda_scalar, cuda_tensor_cores, cuda_mma_sync, cuda_hopper,
    ];
    repeat::results_repeat_across_runs_streams_and_engines: [
        cpu_scalar, cpu_tensor_model, cuda_scalar, cuda_tensor_cores, cuda_mma_sync, cuda_hopper,
    ];
    repeat::a_captured_cuda_graph_replays_the_same_bits: [
        cuda_scalar, cuda_tensor_cores, cuda_mma_sync, cuda_hopper,
    ];
    special_values::planted_special_values_match: [
        cpu_scalar, cpu_tensor_model, cuda_scalar, cuda_tensor_cores, cuda_mma_sync, cuda_hopper,
    ];
    special_values::few_row_calls_with_special_values_match: [
        cpu_scalar, cpu_tensor_model, cuda_scalar, cuda_tensor_cores, cuda_mma_sync, cuda_hopper,
    ];
    special_values::dense_specials_in_every_output_mode_and_bias: [
        cpu_scalar, cpu_tensor_model, cuda_scalar, cuda_tensor_cores, cuda_mma_sync, cuda_hopper,
    ];
    special_values::ieee_special_cases_by_hand: [cpu_scalar, cuda_scalar];
    auto_tier::auto_tier_is_the_tier_resolve_tier_names: [
        cpu_scalar, cpu_tensor_model, cuda_scalar, cuda_tensor_cores, cuda_mma_sync, cuda_hopper,
    ];
    triad::forward_matches_the_math: [
        cpu_scalar, cpu_tensor_model, cuda_scalar, cuda_tensor_cores, cuda_mma_sync, cuda_hopper,
    ];
    triad::backward_dw_matches_the_math: [
        cpu_scalar, cpu_tensor_model, cuda_scalar, cuda_tensor_cores, cuda_mma_sync, cuda_hopper,
    ];
    triad::backward_dx_matches_the_math: [
        cpu_scalar, cpu_tensor_model, cuda_scalar, cuda_tensor_cores, cuda_mma_sync, cuda_hopper,
    ];
    triad::dw_accumulates_micro_batches_in_f32: [
        cpu_scalar, cpu_tensor_model, cuda_scalar, cuda_tensor_cores, cuda_mma_sync, cuda_hopper,
    ];
    triad::kn_and_nk_weights_give_identical_bits: [
        cpu_scalar, cpu_tensor_model, cuda_scalar, cuda_tensor_cores, cuda_mma_sync, cuda_hopper,
    ];
    triad::raw_pointer_entry_points_match_the_descriptors: [
        cpu_scalar, cpu_tensor_model, cuda_scalar, cuda_tensor_cores, cuda_mma_sync, cuda_hopper,
    ];
    // K = 0 and empty outputs: calls the Hopper path declines (K ≥ 1, rows in 16-byte units).
    triad::empty_batch_gives_zero_weight_gradient: [
        cpu_scalar, cpu_tensor_model, cuda_scalar, cuda_tensor_cores, cuda_mma_sync,
    ];
    triad::zero_feature_layers: [
        cpu_scalar, cpu_tensor_model, cuda_scalar, cuda_tensor_cores, cuda_mma_sync,
    ];
}
