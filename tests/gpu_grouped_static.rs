//! The grouped kernel's static tile order (`SGEMM_BI_GROUPED_ORDER=static`: block b takes
//! tiles b, b + grid, …), which the planner no longer takes by default for 256-column tiles:
//! the same checks as the dynamic order's (`tests/gpu_support/grouped_variants.rs`), so that the
//! knob stays right. A test binary of its own, because the engine reads the variable once
//! per device and process.
//!
//! Needs a GPU: `bash .gpu/run gpu_grouped_static` on the GPU host.

mod gpu_support;

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_static_tile_order_gives_the_cpu_bits() {
    gpu_support::grouped_variants::the_rows_split_gives_the_cpu_bits(
        "SGEMM_BI_GROUPED_ORDER",
        "static",
    );
}
