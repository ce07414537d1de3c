//! Tells the build scripts of the crates that depend on this one where the images are
//! (`DEP_SGEMM_BI_IMAGES_DIR`): sgemm-bi's build script reads them from there, and in a
//! clone of the repository also rewrites them there (`SGEMM_BI_UPDATE_PTX=1`).

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    println!("cargo:dir={dir}");
    // The directory's path is all this script reports; nothing it reads can change.
    println!("cargo:rerun-if-changed=build.rs");
}
