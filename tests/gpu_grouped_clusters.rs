//! The grouped kernels in clusters of two (`SGEMM_BI_GROUPED_CLUSTER=2`: in the rows split,
//! neighbouring tiles of a group's rows share each stage's weight tile by multicast; in the
//! reduction split, neighbouring tiles of M share each stage's dY tile). The planner picks
//! them for the reduction split's 256-column tiles and for the rows split's when the groups
//! hold 2048 rows or more on average; forced here at every shape: the same checks as the tile
//! orders' (`tests/gpu_support/grouped_variants.rs`).
//! The rows split's clusters run in the dynamic order (the only one built for them: the
//! block of rank 0 takes each tile from the counter and names it to its peer); the
//! reduction split's here in the static one (the planner's below 2048 rows a group), in the
//! dynamic one in `tests/gpu_grouped_dynamic.rs`. A test binary
//! of its own, because the engine reads the variable once per device and process.
//!
//! Needs a GPU: `bash .gpu/run gpu_grouped_clusters` on the GPU host.

mod gpu_support;

/// One test for both splits: the variable is set before the engine exists, with no other
/// test thread reading the environment.
#[test]
#[ignore = "needs a CUDA GPU"]
fn both_splits_in_clusters_of_two_give_the_cpu_bits() {
    use gpu_support::grouped_variants as variants;
    variants::the_rows_split_gives_the_cpu_bits("SGEMM_BI_GROUPED_CLUSTER", "2");
    variants::the_reduction_split_gives_the_cpu_bits("SGEMM_BI_GROUPED_CLUSTER", "2");
}
