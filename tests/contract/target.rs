//! What a contract test runs on: a [`Target`] (backend × tier × tensor-core path) and a
//! [`Runner`] that runs calls on it from host buffers, whatever the backend.

use super::common::{Buf, Case, GUARD};
use super::gpu_support::{gpu_engine, DeviceBuf, RawStream};
use sgemm_bi::{DType, Device, Engine, Gemm, GemmPointers, OutputMode, TcPath, Tier};

/// One (backend, tier, path) a contract holds for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The CPU engine's scalar tier (the fast backend).
    CpuScalar,
    /// The CPU engine's tensor-core tier: the model of the sm_90 tensor cores.
    CpuTensorModel,
    /// The scalar tier on a CUDA GPU (the planner's kernels).
    CudaScalar,
    /// The tensor-core tier on a CUDA GPU, the planner's choice of path (on sm_90 the Hopper
    /// path wherever it can describe the operands, the mma.sync path elsewhere).
    CudaTensorCores,
    /// The tensor-core tier on a CUDA GPU restricted to the mma.sync kernels
    /// (`TcPath::Portable`).
    CudaMmaSync,
    /// The tensor-core tier on a CUDA GPU restricted to the Hopper (wgmma + TMA) kernels
    /// (`TcPath::Hopper`; compute capability 9.0 only). It declines calls its copy engine
    /// cannot describe ([`Target::takes`]).
    CudaHopper,
}

impl Target {
    pub fn tier(self) -> Tier {
        match self {
            Target::CpuScalar | Target::CudaScalar => Tier::Scalar,
            _ => Tier::TensorCores,
        }
    }

    pub fn is_cuda(self) -> bool {
        !matches!(self, Target::CpuScalar | Target::CpuTensorModel)
    }

    /// The input dtypes of the target's tier.
    pub fn dtypes(self) -> &'static [DType] {
        match self.tier() {
            Tier::Scalar => &[DType::F32, DType::BF16, DType::F16],
            _ => &[DType::BF16, DType::F16],
        }
    }

    /// The engine, or `None` (the test is skipped, with a line saying why) where the target
    /// cannot run: no CUDA device (a failure instead with `SGEMM_BI_REQUIRE_GPU=1`), or not
    /// compute capability 9.0 for the Hopper path.
    pub fn engine(self) -> Option<Engine> {
        let path = match self {
            Target::CpuScalar | Target::CpuTensorModel => {
                return Some(Engine::new(Device::Cpu).expect("the CPU engine always exists"))
            }
            Target::CudaScalar | Target::CudaTensorCores => return gpu_engine(),
            Target::CudaMmaSync => TcPath::Portable,
            Target::CudaHopper => TcPath::Hopper,
        };
        let gpu = gpu_engine()?;
        if self == Target::CudaHopper && gpu.compute_capability() != Some((9, 0)) {
            eprintln!("skipped: the Hopper path needs compute capability 9.0");
            return None;
        }
        Some(Engine::with_tc_path(Device::Cuda(0), path).expect("engine restricted to a path"))
    }

    /// Whether the target runs `g` with A, B and C `offsets` bytes past 256-byte aligned
    /// addresses. Every target but the Hopper path runs every valid call; that path needs
    /// what its copy engine can describe (`host/src/cuda/hopper.rs`, `can_implement`): A and
    /// B (and an overwritten C) 16-byte aligned with leading dimensions and batch strides in
    /// 16-byte units, K ≥ 1, N in 16-byte units of C (even in accumulate mode, with C's
    /// address, leading dimension and batch stride in pairs of elements).
    pub fn takes(self, g: &Gemm, [a, b, c]: [usize; 3]) -> bool {
        if self != Target::CudaHopper {
            return true;
        }
        let copyable = |size: usize, ld: usize, bs: usize, addr: usize| {
            let unit = 16 / size;
            addr % 16 == 0 && ld % unit == 0 && (g.batch == 1 || bs % unit == 0)
        };
        let size = g.c.mode.dtype().size();
        let c_ok = match g.c.mode {
            OutputMode::Overwrite(_) => {
                copyable(size, g.c.ldc, g.c.batch_stride, c) && g.n % (16 / size) == 0
            }
            OutputMode::AccumulateF32 => {
                g.n % 2 == 0
                    && c % (2 * size) == 0
                    && g.c.ldc % 2 == 0
                    && (g.batch == 1 || g.c.batch_stride % 2 == 0)
            }
        };
        g.k > 0
            && copyable(g.a.dtype.size(), g.a.ld, g.a.batch_stride, a)
            && copyable(g.b.dtype.size(), g.b.ld, g.b.batch_stride, b)
            && c_ok
    }

    /// The target whose bits this one's must equal, if there is one to compare with: the CPU
    /// engine for the scalar tier on a GPU; the mma.sync path for the other tensor-core
    /// paths of the same GPU. The CPU scalar tier is compared with the independent
    /// reference of `common` instead ([`Runner::expected`]); the mma.sync path and the CPU's
    /// model have their own tests against the H200's recorded bits (`cpu_tc_model`,
    /// `gpu_tc_model`).
    pub fn reference(self) -> Option<Target> {
        match self {
            Target::CudaScalar => Some(Target::CpuScalar),
            Target::CudaTensorCores | Target::CudaHopper => Some(Target::CudaMmaSync),
            _ => None,
        }
    }
}

/// Where a call's operands start in their host buffers (in elements).
#[derive(Clone, Copy, Debug, Default)]
pub struct Offsets {
    pub a: usize,
    pub b: usize,
    pub bias: usize,
    pub c: usize,
}

/// A target with its engine, running calls on host buffers.
pub struct Runner {
    pub target: Target,
    pub engine: Engine,
    /// The engine of [`Target::reference`] (built once).
    reference: Option<Engine>,
}

impl Runner {
    /// `None` where the target cannot run here (see [`Target::engine`]).
    pub fn new(target: Target) -> Option<Runner> {
        let engine = target.engine()?;
        let reference = target
            .reference()
            .map(|r| r.engine().expect("the reference runs"));
        Some(Runner {
            target,
            engine,
            reference,
        })
    }

    /// The CPU engine where its bits are the ones this target must give beyond
    /// [`Runner::expected`]: a GPU's tensor-core tier on compute capability 9.0, where the
    /// CPU's model is the H200's bits. Another GPU family is not compared with it (a line
    /// says so; `gpu_tc_model` is how to find out whether it matches).
    pub fn cpu_model(&self) -> Option<Engine> {
        if !self.target.is_cuda() || self.target.tier() != Tier::TensorCores {
            return None;
        }
        if self.engine.compute_capability() != Some((9, 0)) {
            eprintln!("not sm_90: the tensor-core bits are not compared with the CPU's model");
            return None;
        }
        Some(Engine::new(Device::Cpu).expect("the CPU engine always exists"))
    }

    /// A second engine of the same target (engine independence).
    pub fn second_engine(&self) -> Engine {
        self.target.engine().expect("a second engine")
    }

    /// `g` with this target's tier.
    pub fn tiered(&self, g: Gemm) -> Gemm {
        Gemm {
            tier: self.target.tier(),
            ..g
        }
    }

    /// Whether the target takes `g` with its operands at `at` in buffers of `dtype`s.
    pub fn takes(&self, g: &Gemm, at: Offsets) -> bool {
        let c_size = g.c.mode.dtype().size();
        self.target.takes(
            g,
            [
                at.a * g.a.dtype.size(),
                at.b * g.b.dtype.size(),
                at.c * c_size,
            ],
        )
    }

    /// Runs `g` on `engine` with A, B, the bias and C starting `at` their buffers; C is
    /// updated in place (on a GPU: copied there, run on a fresh stream, copied back whole).
    pub fn run_on(
        &self,
        engine: &Engine,
        g: &Gemm,
        (a, b, bias): (&Buf, &Buf, Option<&Buf>),
        c: &mut Buf,
        at: Offsets,
    ) {
        if engine.device() == Device::Cpu {
            engine
                .gemm_host(
                    g,
                    a.slice_from(at.a),
                    b.slice_from(at.b),
                    bias.map(|x| x.slice_from(at.bias)),
                    c.slice_mut_from(at.c),
                )
                .unwrap_or_else(|e| panic!("{:?} {g:?}: {e}", self.target));
            return;
        }
        let stream = RawStream::new();
        self.run_on_stream(engine, &stream, g, (a, b, bias), c, at);
    }

    /// [`Runner::run_on`] on a GPU engine and a given stream.
    pub fn run_on_stream(
        &self,
        engine: &Engine,
        stream: &RawStream,
        g: &Gemm,
        (a, b, bias): (&Buf, &Buf, Option<&Buf>),
        c: &mut Buf,
        at: Offsets,
    ) {
        let (da, db, dc) = (
            DeviceBuf::upload_bytes(a.bytes()),
            DeviceBuf::upload_bytes(b.bytes()),
            DeviceBuf::upload_bytes(c.bytes()),
        );
        let dbias = bias.map(|x| DeviceBuf::upload_bytes(x.bytes()));
        let ptrs = GemmPointers {
            a: da.at(at.a * g.a.dtype.size()),
            b: db.at(at.b * g.b.dtype.size()),
            bias: match (&dbias, g.bias) {
                (Some(x), Some(d)) => x.at(at.bias * d.size()),
                _ => std::ptr::null(),
            },
            c: dc.at(at.c * g.c.mode.dtype().size()),
        };
        // SAFETY: each buffer holds its host buffer whole, which spans the call's validated
        // extents from its offset (as on the CPU, where the slices are checked); all live
        // until the stream is synchronized below.
        unsafe { engine.gemm(g, ptrs, stream.handle()) }
            .unwrap_or_else(|e| panic!("{:?} {g:?}: {e}", self.target));
        stream.sync();
        dc.download_bytes(c.bytes_mut());
    }

    /// [`Runner::run_on`] on this target's engine.
    pub fn run(&self, g: &Gemm, inputs: (&Buf, &Buf, Option<&Buf>), c: &mut Buf, at: Offsets) {
        self.run_on(&self.engine, g, inputs, c, at)
    }

    /// C after running `case` whole on this target's engine.
    pub fn run_case(&self, case: &Case) -> Buf {
        self.run_case_on(&self.engine, case)
    }

    /// C after running `case` whole on `engine`.
    pub fn run_case_on(&self, engine: &Engine, case: &Case) -> Buf {
        let mut c = case.c.clone();
        let inputs = (&case.a, &case.b, case.bias.as_ref());
        self.run_on(engine, &case.g, inputs, &mut c, Offsets::default());
        c
    }

    /// What C must hold after `case` by the target's reference: the independent reference
    /// of `common` for the CPU scalar tier, the reference target's result where there is
    /// one ([`Target::reference`]), else `None`.
    pub fn expected(&self, case: &Case) -> Option<Buf> {
        if self.target == Target::CpuScalar {
            return Some(case.expected());
        }
        let engine = self.reference.as_ref()?;
        Some(self.run_case_on(engine, case))
    }
}

/// A sentinel-filled C of `len` elements of `dtype` with the guard after it.
pub fn fresh_c(dtype: DType, len: usize) -> Buf {
    Buf::sentinel(dtype, len + GUARD)
}
