//! Compile-time unrolling. Register arrays (the accumulators) must be indexed only by
//! constants, or LLVM moves them to local memory; LLVM declines to unroll loops with large
//! bodies (the epilogue's), so those loops are unrolled here by the macro instead.

/// `unroll8!(i => body)`: `body` eight times with `i` bound to 0..8 as a constant.
#[macro_export]
macro_rules! unroll8 {
    ($i:ident => $body:block) => {{
        {
            let $i: usize = 0;
            $body
        }
        {
            let $i: usize = 1;
            $body
        }
        {
            let $i: usize = 2;
            $body
        }
        {
            let $i: usize = 3;
            $body
        }
        {
            let $i: usize = 4;
            $body
        }
        {
            let $i: usize = 5;
            $body
        }
        {
            let $i: usize = 6;
            $body
        }
        {
            let $i: usize = 7;
            $body
        }
    }};
}

/// `unroll4!(i => body)`: `body` four times with `i` bound to 0..4 as a constant.
#[macro_export]
macro_rules! unroll4 {
    ($i:ident => $body:block) => {{
        {
            let $i: usize = 0;
            $body
        }
        {
            let $i: usize = 1;
            $body
        }
        {
            let $i: usize = 2;
            $body
        }
        {
            let $i: usize = 3;
            $body
        }
    }};
}

/// `unroll2!(i => body)`: `body` twice with `i` bound to 0..2 as a constant.
#[macro_export]
macro_rules! unroll2 {
    ($i:ident => $body:block) => {{
        {
            let $i: usize = 0;
            $body
        }
        {
            let $i: usize = 1;
            $body
        }
    }};
}
