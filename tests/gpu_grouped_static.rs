//! The grouped kernels' static tile order (`SGEMM_BI_GROUPED_ORDER=static`: block b takes
//! tiles b, b + grid, …), which the planner no longer takes by default for 256-column tiles
//! (the rows split) nor for the reduction split's clusters: the same checks as the dynamic
//! order's (`tests/gpu_support/grouped_variants.rs`), so that the knob stays right. A test
//! binary of its own, because the engine reads the variable once per device and process.
//!
//! Needs a GPU: `bash .gpu/run gpu_grouped_static` on the GPU host.

mod gpu_support;

/// One test for both splits: the variable is set before the engine exists, with no other
/// test thread reading the environment.
#[test]
#[ignore = "needs a CUDA GPU"]
fn the_static_tile_order_gives_the_cpu_bits() {
    use gpu_support::grouped_variants as variants;
    variants::the_rows_split_gives_the_cpu_bits("SGEMM_BI_GROUPED_ORDER", "static");
    variants::the_reduction_split_gives_the_cpu_bits("SGEMM_BI_GROUPED_ORDER", "static");
}
