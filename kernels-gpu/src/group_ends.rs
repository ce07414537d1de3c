//! The group ends of the grouped kernels, read on the device (the host never waits for
//! them): the report of the first bad one, which every grouped kernel writes the same way.
//!
//! The kernels clamp a bad end themselves (each in the form its walk over the groups needs),
//! so a bad end never makes them read or write outside the buffers; the report only tells the
//! caller, through the record the host reads without waiting (`GroupErrorRecord`, in mapped
//! host memory).

use crate::arch::global::{st_global_b32, st_global_release_sys_b32};
use crate::arch::sync::ballot_sync;
use crate::params::GroupErrorRecord;

/// Checks the group ends in order and reports the first bad one — below the previous end
/// (group 0: below 0) or past `limit` — in the record at `errors`. Each check reads 32 ends
/// at once, one per lane, so a thousand groups cost a few dozen round trips to memory, which
/// the caller overlaps with its other warps' work. Every launch that finds a bad end writes
/// the same record, so the report does not depend on which blocks run first.
///
/// # Safety
/// The 32 lanes of one warp call it together; `ends` is the device address of `groups` `i32`s;
/// `errors` the address of a `GroupErrorRecord` valid for writes.
#[inline(always)]
pub unsafe fn report_bad_ends(ends: u64, groups: u64, limit: u64, errors: u64, lane: u32) {
    let mut base = 0u64;
    while base < groups {
        let g = base + u64::from(lane);
        let read = |i: u64| {
            // SAFETY: i < groups (forwarded contract).
            i64::from(unsafe { *(ends as *const i32).add(i as usize) })
        };
        let (end, prev) = if g < groups {
            (read(g), if g == 0 { 0 } else { read(g - 1) })
        } else {
            (0, 0)
        };
        let bad = g < groups && (end < prev || end > limit as i64);
        let lanes = ballot_sync(bad);
        if lanes != 0 {
            if lane == lanes.trailing_zeros() {
                // SAFETY: the record's four words (forwarded contract); the flag last, after
                // the fields, so that a reader who sees it sees them.
                unsafe {
                    st_global_b32(errors + 4, g as u32);
                    st_global_b32(errors + 8, end as i32 as u32);
                    st_global_b32(errors + 12, limit as u32);
                    st_global_release_sys_b32(errors, GroupErrorRecord::BAD_END);
                }
            }
            return;
        }
        base += 32;
    }
}
