//! The kernel images that the `sgemm-bi` crate embeds: each kernel module's PTX and its machine
//! code for every GPU generation, zstd-compressed, with `manifest.txt` tying each cubin to the
//! PTX it was assembled from. `README.md` in this package lists the files.
//!
//! This crate has no API: the files are data, which `sgemm-bi`'s build script finds through
//! this package's `links` metadata and embeds in the library. They live in a package of their
//! own only so that each published crate stays under the registry's size limit.

#![no_std]
