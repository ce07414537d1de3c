//! Typed views of host memory for the safe API of the CPU engine.

use crate::types::DType;
use half::{bf16, f16};
use std::ffi::c_void;

/// A read-only host buffer of one of the supported element types.
#[derive(Clone, Copy, Debug)]
pub enum HostSlice<'a> {
    F32(&'a [f32]),
    BF16(&'a [bf16]),
    F16(&'a [f16]),
}

/// A writable host buffer of one of the supported element types.
#[derive(Debug)]
pub enum HostSliceMut<'a> {
    F32(&'a mut [f32]),
    BF16(&'a mut [bf16]),
    F16(&'a mut [f16]),
}

impl HostSlice<'_> {
    pub fn dtype(&self) -> DType {
        match self {
            HostSlice::F32(_) => DType::F32,
            HostSlice::BF16(_) => DType::BF16,
            HostSlice::F16(_) => DType::F16,
        }
    }
    pub fn len(&self) -> usize {
        match self {
            HostSlice::F32(s) => s.len(),
            HostSlice::BF16(s) => s.len(),
            HostSlice::F16(s) => s.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn as_ptr(&self) -> *const c_void {
        match self {
            HostSlice::F32(s) => s.as_ptr().cast(),
            HostSlice::BF16(s) => s.as_ptr().cast(),
            HostSlice::F16(s) => s.as_ptr().cast(),
        }
    }
}

impl HostSliceMut<'_> {
    pub fn dtype(&self) -> DType {
        match self {
            HostSliceMut::F32(_) => DType::F32,
            HostSliceMut::BF16(_) => DType::BF16,
            HostSliceMut::F16(_) => DType::F16,
        }
    }
    pub fn len(&self) -> usize {
        match self {
            HostSliceMut::F32(s) => s.len(),
            HostSliceMut::BF16(s) => s.len(),
            HostSliceMut::F16(s) => s.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn as_mut_ptr(&mut self) -> *mut c_void {
        match self {
            HostSliceMut::F32(s) => s.as_mut_ptr().cast(),
            HostSliceMut::BF16(s) => s.as_mut_ptr().cast(),
            HostSliceMut::F16(s) => s.as_mut_ptr().cast(),
        }
    }
}

macro_rules! slice_from {
    ($t:ty, $v:ident) => {
        impl<'a> From<&'a [$t]> for HostSlice<'a> {
            fn from(s: &'a [$t]) -> Self {
                HostSlice::$v(s)
            }
        }
        impl<'a> From<&'a Vec<$t>> for HostSlice<'a> {
            fn from(s: &'a Vec<$t>) -> Self {
                HostSlice::$v(s)
            }
        }
        impl<'a> From<&'a mut [$t]> for HostSliceMut<'a> {
            fn from(s: &'a mut [$t]) -> Self {
                HostSliceMut::$v(s)
            }
        }
        impl<'a> From<&'a mut Vec<$t>> for HostSliceMut<'a> {
            fn from(s: &'a mut Vec<$t>) -> Self {
                HostSliceMut::$v(s)
            }
        }
    };
}
slice_from!(f32, F32);
slice_from!(bf16, BF16);
slice_from!(f16, F16);
