//! The results as one markdown table (stdout) and as CSV with a `# key: value` header block
//! and the table's footnotes as `# note: …` lines (scripts/plot_bench.py turns the CSV into
//! the same table: keep the two in step). The grouped rows are a second markdown table
//! (their columns differ), not in the CSV.

use std::fmt::Write as _;

use sgemm_bi::{DType, Tier};

use crate::cases::{Case, Group, Target};
use crate::device::Timing;
use crate::grouped::{GroupedRow, TOP_K};

/// One measured case.
pub struct Row {
    pub case: Case,
    pub ours: Timing,
    /// cuBLAS default: cublasGemmEx, or cublasSgemm (TF32 off) for the scalar tier.
    pub cublas: Timing,
    /// cuBLASLt without workspace; `None` when its heuristic offered no such algorithm.
    pub lt: Option<Timing>,
    /// Buffer sets the case rotated through.
    pub slots: usize,
}

impl Row {
    fn tflops(&self, ms: f64) -> f64 {
        self.case.flops() / (ms * 1e9)
    }
    fn gbs(&self, ms: f64) -> f64 {
        self.case.bytes() / (ms * 1e6)
    }
    pub fn ours_tflops(&self) -> f64 {
        self.tflops(self.ours.ms)
    }
    fn ratio(&self) -> f64 {
        self.cublas.ms / self.ours.ms
    }
    fn lt_ratio(&self) -> Option<f64> {
        self.lt.map(|t| t.ms / self.ours.ms)
    }
}

/// Whether each row meets its target: "yes", "near" (between the floor and the goal), "no",
/// or "–" (no target, or nothing to compare with in this run).
pub fn verdicts(rows: &[Row]) -> Vec<&'static str> {
    rows.iter()
        .map(|r| match r.case.target {
            Target::Ratio { goal, floor } => {
                let ratio = r.ratio();
                if ratio >= goal {
                    "yes"
                } else if ratio >= floor {
                    "near"
                } else {
                    "no"
                }
            }
            Target::F32Scalar => {
                let l = &r.case.linear;
                let f32_row = rows.iter().find(|o| {
                    let ol = &o.case.linear;
                    o.case.group == Group::Scalar
                        && ol.dtype == DType::F32
                        && (ol.m, ol.k, ol.n) == (l.m, l.k, l.n)
                });
                match f32_row {
                    Some(f) if r.ours_tflops() >= f.ours_tflops() => "yes",
                    Some(_) => "no",
                    None => "–",
                }
            }
            Target::MemoryFloor { within } => {
                if r.ours.ms * 1e-3 <= within * r.case.memory_floor_s() {
                    "yes"
                } else {
                    "no"
                }
            }
            Target::None => "–",
        })
        .collect()
}

fn fmt_tflops(v: f64) -> String {
    if v < 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.1}")
    }
}

/// The header block: (key, value) pairs in order.
pub type Meta = Vec<(&'static str, String)>;

pub const NOTES: &[&str] = &[
    "TFLOP/s = 2·M·N·K / median time per call. ratio = cuBLAS time / ours (> 1: ours is faster).",
    "cuBLAS = cublasGemmEx, default algorithm, f32 compute, same operands, transposes, output \
     dtype and beta as ours; for the scalar tier, cublasSgemm with default math (TF32 off) on \
     f32 copies of the shape.",
    "cuBLASLt no-ws = cublasLtMatmul with the heuristic's best algorithm under a 0-byte \
     workspace limit (no split-K); – where it offered none.",
    "GB/s (memory-bound rows) = (bytes of A + B + C) / time, for ours / cuBLAS / cuBLASLt; \
     the scalar decode rows' memory floor is those bytes at 4.3 TB/s (an H200's device copy).",
    "W: weight layout (KN = W[K,N] row-major, NK = torch's [out, in]); dW accumulates into \
     f32 (beta = 1), dX is written in bf16.",
];

pub fn markdown(meta: &Meta, rows: &[Row], grouped: &[GroupedRow]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# sgemm-bi against cuBLAS\n");
    for (k, v) in meta {
        let _ = writeln!(s, "- {k}: {v}");
    }
    if !rows.is_empty() {
        dense_table(&mut s, rows);
    }
    if !grouped.is_empty() {
        grouped_table(&mut s, grouped);
    }
    s
}

fn dense_table(s: &mut String, rows: &[Row]) {
    let _ = writeln!(
        s,
        "\n| case | M × K × N | dtype | W | ours TFLOP/s | cuBLAS TFLOP/s | ratio | \
         cuBLASLt no-ws TFLOP/s | ratio | GB/s ours / cuBLAS / Lt | target | met |"
    );
    let _ = writeln!(s, "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|---|");
    for (r, met) in rows.iter().zip(verdicts(rows)) {
        let l = &r.case.linear;
        let tier = if l.tier == Tier::Scalar {
            " (scalar)"
        } else {
            ""
        };
        let (lt, lt_ratio) = match (r.lt, r.lt_ratio()) {
            (Some(t), Some(q)) => (fmt_tflops(r.tflops(t.ms)), format!("{q:.2}")),
            _ => ("–".into(), "–".into()),
        };
        let gbs = if r.case.memory_bound() {
            let lt = r.lt.map_or("–".into(), |t| format!("{:.0}", r.gbs(t.ms)));
            format!("{:.0} / {:.0} / {lt}", r.gbs(r.ours.ms), r.gbs(r.cublas.ms))
        } else {
            "–".into()
        };
        let _ = writeln!(
            s,
            "| {} | {} × {} × {} | {}{tier} | {} | {} | {} | {:.2} | {lt} | {lt_ratio} | {gbs} | {} | {met} |",
            r.case.group.label(),
            l.m,
            l.k,
            l.n,
            l.dtype,
            r.case.weight_name(),
            fmt_tflops(r.ours_tflops()),
            fmt_tflops(r.tflops(r.cublas.ms)),
            r.ratio(),
            r.case.target.text(),
        );
    }
    let _ = writeln!(s, "\n{}\n", summary(&verdicts(rows)));
    for n in NOTES {
        let _ = writeln!(s, "{n}");
    }
}

pub const GROUPED_NOTES: &[&str] = &[
    "Grouped: 128 experts, each token routed to 8 distinct experts (rows = tokens × 8), \
     balanced (every expert equally likely) or Zipf-like (expert i weighs 1/(i+1)), from a \
     fixed seed; bf16, tensor cores. fwd: [rows, H] · [E, H, W] with the weights in torch's \
     [E, W, H] layout, bf16 out; dW: each expert's Xᵀ·dY over its rows, accumulated into f32 \
     [E, H, W].",
    "ours = one grouped call with the offsets in device memory; ran as: the grouped kernel, or \
     group by group (the dense kernels, after reading the offsets back). cuBLAS loop = one \
     cublasGemmEx per non-empty expert (default algorithm, f32 compute), offsets known on the \
     host, same buffers. ratio = cuBLAS loop time / ours (> 1: ours is faster).",
    "floor = the longer of 2·rows·H·W at 989 TFLOP/s (an H200's dense bf16 rate) and the bytes \
     (activations once, the used experts' weights, or their f32 gradients read and written) at \
     4.3 TB/s; × floor = ours / floor.",
];

fn grouped_table(s: &mut String, rows: &[GroupedRow]) {
    let _ = writeln!(
        s,
        "\n## Grouped GEMM (Mixture-of-Experts)\n\n\
         | pass | tokens (rows) | H → W | routing | experts used, largest | ours ms | \
         ours TFLOP/s | cuBLAS loop ms | cuBLAS loop TFLOP/s | ratio | floor ms | × floor | \
         ours ran as |"
    );
    let _ = writeln!(
        s,
        "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for r in rows {
        let c = &r.case;
        let tflops = |ms: f64| fmt_tflops(c.flops() / (ms * 1e9));
        let _ = writeln!(
            s,
            "| {} | {} ({}) | {} → {} | {} | {}, {} rows | {:.3} | {} | {:.3} | {} | {:.2} | \
             {:.3} | {:.2} | {} |",
            c.pass.label(),
            c.tokens,
            c.tokens * TOP_K,
            c.hidden,
            c.width,
            c.routing.name(),
            c.groups().len(),
            c.largest(),
            r.ours.ms,
            tflops(r.ours.ms),
            r.cublas.ms,
            tflops(r.cublas.ms),
            r.ratio(),
            c.floor_ms(),
            r.ours.ms / c.floor_ms(),
            r.path,
        );
    }
    let _ = writeln!(s);
    for n in GROUPED_NOTES {
        let _ = writeln!(s, "{n}");
    }
}

/// One line: how many rows with a target met it.
fn summary(verdicts: &[&str]) -> String {
    let count = |v: &str| verdicts.iter().filter(|&&x| x == v).count();
    let (yes, near, no) = (count("yes"), count("near"), count("no"));
    if yes + near + no == 0 {
        return "No row of this run has a target.".into();
    }
    format!(
        "Targets met: {yes} of {} rows ({near} between the floor and the goal, {no} below).",
        yes + near + no
    )
}

pub const CSV_COLUMNS: &str = "case,group,label,dtype,tier,weight,m,k,n,flops,bytes,\
ours_ms,cublas_ms,cublaslt_ms,ours_tflops,cublas_tflops,cublaslt_tflops,ratio,cublaslt_ratio,\
ours_gbs,cublas_gbs,cublaslt_gbs,memory_bound,inner,slots,target,met";

/// A CSV field, quoted when it has to be.
fn field(v: &str) -> String {
    if v.contains([',', '"', '\n']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v.to_string()
    }
}

pub fn csv(meta: &Meta, rows: &[Row]) -> String {
    let mut s = String::new();
    for (k, v) in meta {
        let _ = writeln!(s, "# {k}: {}", v.replace('\n', " "));
    }
    for n in NOTES {
        let _ = writeln!(s, "# note: {n}");
    }
    let _ = writeln!(s, "{CSV_COLUMNS}");
    let opt = |v: Option<f64>, digits: usize| v.map_or(String::new(), |v| format!("{v:.digits$}"));
    for (r, met) in rows.iter().zip(verdicts(rows)) {
        let l = &r.case.linear;
        let lt_ms = r.lt.map(|t| t.ms);
        let fields = [
            r.case.id(),
            r.case.group.name().into(),
            r.case.group.label().into(),
            l.dtype.to_string(),
            l.tier.to_string(),
            r.case.weight_name().into(),
            l.m.to_string(),
            l.k.to_string(),
            l.n.to_string(),
            format!("{:.0}", r.case.flops()),
            format!("{:.0}", r.case.bytes()),
            format!("{:.6}", r.ours.ms),
            format!("{:.6}", r.cublas.ms),
            opt(lt_ms, 6),
            format!("{:.3}", r.ours_tflops()),
            format!("{:.3}", r.tflops(r.cublas.ms)),
            opt(lt_ms.map(|ms| r.tflops(ms)), 3),
            format!("{:.4}", r.ratio()),
            opt(r.lt_ratio(), 4),
            format!("{:.1}", r.gbs(r.ours.ms)),
            format!("{:.1}", r.gbs(r.cublas.ms)),
            opt(lt_ms.map(|ms| r.gbs(ms)), 1),
            u8::from(r.case.memory_bound()).to_string(),
            r.ours.inner.to_string(),
            r.slots.to_string(),
            r.case.target.text(),
            met.into(),
        ];
        let line: Vec<String> = fields.iter().map(|f| field(f)).collect();
        let _ = writeln!(s, "{}", line.join(","));
    }
    s
}

/// `YYYY-MM-DD HH:MM UTC` of now (no date crate: days since 1970 to a civil date).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Shift the epoch to 0000-03-01 so leap days fall at the end of a 400-year era.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60
    )
}
