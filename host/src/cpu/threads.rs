//! Threading: runs independent pieces of work on rayon's pool, or inline when the call is
//! too small for threads to pay off.
//!
//! Every piece writes its own outputs and reads shared inputs only, so which thread runs a
//! piece, and in which order, cannot change any bit of the result: threading is a pure
//! scheduling choice.

use rayon::prelude::*;

/// Calls `f(i, chunk)` for each `chunk`-sized piece of `buf` (the last may be shorter).
pub(super) fn each_chunk<T, F>(parallel: bool, buf: &mut [T], chunk: usize, f: F)
where
    T: Send,
    F: Fn(usize, &mut [T]) + Send + Sync,
{
    if parallel {
        // with_max_len(1): pieces are few and big (a packed panel or a block of C), so let
        // rayon hand them out one at a time for the best balance.
        buf.par_chunks_mut(chunk)
            .with_max_len(1)
            .enumerate()
            .for_each(|(i, c)| f(i, c));
    } else {
        buf.chunks_mut(chunk).enumerate().for_each(|(i, c)| f(i, c));
    }
}

/// Calls `f(i)` for each `i` in `0..n`: few, big pieces, handed out one at a time.
pub(super) fn each_index<F>(parallel: bool, n: usize, f: F)
where
    F: Fn(usize) + Send + Sync,
{
    if parallel {
        (0..n).into_par_iter().with_max_len(1).for_each(f);
    } else {
        (0..n).for_each(f);
    }
}

/// Calls `f(i)` for each `i` in `0..n` on the pool: possibly many small pieces (the entries
/// of a batched call), which rayon groups adaptively. Inline when the pool has one thread.
pub(super) fn each_small<F>(n: usize, f: F)
where
    F: Fn(usize) + Send + Sync,
{
    if helpers() {
        (0..n).into_par_iter().for_each(f);
    } else {
        (0..n).for_each(f);
    }
}

/// Whether the pool has more than one thread. With one, a parallel loop would only hand
/// each piece from the calling thread to the pool's thread and wait for it (microseconds of
/// wake-up a piece), so the callers run inline instead.
pub(super) fn helpers() -> bool {
    rayon::current_num_threads() > 1
}

/// How many of `n` consecutive items each piece gets when they are split into one piece per
/// thread (all `n` in one piece when not `parallel`).
pub(super) fn pieces(parallel: bool, n: usize) -> usize {
    if parallel {
        n.div_ceil(rayon::current_num_threads()).max(1)
    } else {
        n.max(1)
    }
}
