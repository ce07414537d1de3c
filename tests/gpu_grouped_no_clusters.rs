//! The reduction split without clusters (`SGEMM_BI_GROUPED_CLUSTER=1`), which the planner
//! no longer picks for tiles 256 columns wide (it runs them in clusters of two) but a
//! benchmark may force: the same checks as the clusters'
//! (`tests/gpu_support/grouped_variants.rs`). A test binary of its own, because the engine
//! reads the variable once per device and process.
//!
//! Needs a GPU: `bash .gpu/run gpu_grouped_no_clusters` on the GPU host.

mod gpu_support;

#[test]
#[ignore = "needs a CUDA GPU"]
fn the_reduction_split_without_clusters_gives_the_cpu_bits() {
    gpu_support::grouped_variants::the_reduction_split_gives_the_cpu_bits(
        "SGEMM_BI_GROUPED_CLUSTER",
        "1",
    );
}
