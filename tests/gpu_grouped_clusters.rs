//! The rows split in clusters of two (`SGEMM_BI_GROUPED_CLUSTER=2`: neighbouring tiles of a
//! group's rows share each stage's weight tile by multicast), which the planner does not
//! pick but a benchmark may force: the same checks as the tile orders'
//! (`tests/gpu_support/grouped_variants.rs`). Clusters take the static order. A test binary
//! of its own, because the engine reads the variable once per device and process.
//!
//! Needs a GPU: `bash .gpu/run gpu_grouped_clusters` on the GPU host.

mod gpu_support;

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_rows_split_in_clusters_of_two_gives_the_cpu_bits() {
    gpu_support::grouped_variants::the_rows_split_gives_the_cpu_bits(
        "SGEMM_BI_GROUPED_CLUSTER",
        "2",
    );
}
