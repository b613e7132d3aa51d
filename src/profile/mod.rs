//! Where the time of a forward pass goes: per-operation timings (on GPUs from kernel timestamps
//! where the device can trace, else from device events),
//! reported as a table by operation kind, a table per encoder layer and a Chrome/Perfetto trace
//! (the SVG charts are drawn by the command line, `lc0rs-cli`).

use std::fmt::Write;

use serde_json::json;

/// One timed operation of a pass.
#[derive(Debug, Clone, PartialEq)]
pub struct OpTiming {
    pub op: &'static str,
    /// The encoder layer, for per-layer operations.
    pub layer: Option<usize>,
    /// Floating-point operations counted for it (2 per multiply-accumulate).
    pub flops: u64,
    /// Bytes it reads and writes at least once (compulsory traffic).
    pub bytes: u64,
    /// Start, from the start of the pass, and duration.
    pub start_ms: f64,
    pub ms: f64,
}

/// One profiled forward pass.
#[derive(Debug, Clone, PartialEq)]
pub struct PassProfile {
    pub batch: usize,
    /// The GPU time of the same pass without the profiler's events (a replay of its graph,
    /// bracketed by two events).
    pub pass_ms: f64,
    /// The GPU time of the instrumented pass itself: first event to last, or with kernel
    /// timestamps, first kernel start to last kernel end.
    pub instrumented_ms: f64,
    pub timing: PassTiming,
    pub ops: Vec<OpTiming>,
    /// With kernel timestamps: every kernel, fill and copy, with the operation it belongs to.
    pub kernels: Vec<KernelTiming>,
}

/// One kernel (or fill, copy) of a traced pass.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelTiming {
    pub op: &'static str,
    pub name: String,
    pub ms: f64,
}

/// How the operations of a pass were timed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PassTiming {
    /// Device events around each operation (they add gaps of their own).
    DeviceEvents,
    /// The GPU's kernel timestamps (CUPTI) of a graph replay; `busy_ms` is the time kernels,
    /// fills and copies ran, the rest of the pass being launch gaps between them.
    KernelTrace { busy_ms: f64 },
    /// The host's clock around each operation (the cpu backend).
    HostClock,
}

/// A device's peak rates, for the "% of peak" columns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Peak {
    pub tflops: f64,
    pub gbytes_per_s: f64,
    pub source: &'static str,
}

impl Peak {
    /// The time `flops` and `bytes` take at this device's roof: the longer of the two at
    /// their peaks (the roofline model's prediction).
    pub fn roof_seconds(&self, flops: u64, bytes: u64) -> f64 {
        (flops as f64 / (self.tflops * 1e12)).max(bytes as f64 / (self.gbytes_per_s * 1e9))
    }
}

/// Dense fp16 tensor-core and memory peaks by GPU name (vendor data sheets; the H200's fp16
/// rate as measured on it with cuBLASLt, docs/performance.md).
pub fn peak_for(device: &str) -> Option<Peak> {
    let table: [(&str, f64, f64, &str); 4] = [
        (
            "H200",
            785.0,
            4800.0,
            "H200: 785 TFLOP/s fp16 measured, 4.8 TB/s data sheet",
        ),
        (
            "H100",
            989.0,
            3350.0,
            "H100 SXM data sheet: 989 TFLOP/s fp16 dense, 3.35 TB/s",
        ),
        (
            "A100",
            312.0,
            2039.0,
            "A100 SXM 80 GB data sheet: 312 TFLOP/s fp16, 2.04 TB/s",
        ),
        (
            "MI300X",
            1307.0,
            5300.0,
            "MI300X data sheet: 1307 TFLOP/s fp16 dense, 5.3 TB/s",
        ),
    ];
    table.iter().find(|(name, ..)| device.contains(name)).map(
        |&(_, tflops, gbytes_per_s, source)| Peak {
            tflops,
            gbytes_per_s,
            source,
        },
    )
}

/// What limits an operation, by the roofline model: the roof that applies to its arithmetic
/// intensity (FLOPs per byte against the device's ridge point, peak FLOP/s over peak bytes/s),
/// and whether it gets near that roof.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// Intensity above the ridge, at least [`NEAR_ROOF`] of the FLOP/s peak.
    Compute,
    /// Intensity below the ridge, at least [`NEAR_ROOF`] of the bandwidth.
    Memory,
    /// Far below the roof that applies: launches, too few blocks or dependent steps bound it.
    Latency,
}

/// The share of its roof from which an operation counts as bound by that roof.
pub const NEAR_ROOF: f64 = 0.3;

impl Bound {
    /// The bound of `flops` and `bytes` done in `seconds` on a device with `peak`.
    pub fn of(flops: u64, bytes: u64, seconds: f64, peak: Peak) -> Self {
        let peak_flops = peak.tflops * 1e12;
        let peak_bytes = peak.gbytes_per_s * 1e9;
        let above_ridge = flops as f64 * peak_bytes >= bytes as f64 * peak_flops;
        let (roof, bound) = if above_ridge {
            (flops as f64 / seconds / peak_flops, Self::Compute)
        } else {
            (bytes as f64 / seconds / peak_bytes, Self::Memory)
        };
        if roof >= NEAR_ROOF {
            bound
        } else {
            Self::Latency
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Compute => "compute",
            Self::Memory => "memory",
            Self::Latency => "latency",
        }
    }
}

/// Totals of one operation kind.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OpSummary {
    pub op: &'static str,
    pub ms: f64,
    pub calls: usize,
    pub flops: u64,
    pub bytes: u64,
}

/// Totals by operation kind, largest first, and the summed pass time.
pub fn by_operation(passes: &[PassProfile]) -> (Vec<OpSummary>, f64) {
    let mut rows: Vec<OpSummary> = Vec::new();
    for t in passes.iter().flat_map(|p| &p.ops) {
        let row = match rows.iter_mut().find(|r| r.op == t.op) {
            Some(row) => row,
            None => {
                rows.push(OpSummary {
                    op: t.op,
                    ..OpSummary::default()
                });
                rows.last_mut().expect("just pushed")
            }
        };
        row.ms += t.ms;
        row.calls += 1;
        row.flops += t.flops;
        row.bytes += t.bytes;
    }
    rows.sort_by(|a, b| b.ms.total_cmp(&a.ms));
    (rows, passes.iter().map(|p| p.pass_ms).sum())
}

/// The table by operation kind, with achieved rates, the share of the device's peak, the time a
/// call would take at the roof (`roof us`, the roofline model's prediction beside the measured
/// `us/call`) and what bounds each kind ([`Bound`]; `-` without the device's peaks).
pub fn operation_table(passes: &[PassProfile], peak: Option<Peak>) -> String {
    let (rows, pass_ms) = by_operation(passes);
    let op_ms: f64 = rows.iter().map(|r| r.ms).sum();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<22} {:>10} {:>6} {:>7} {:>9} {:>9} {:>9} {:>7} {:>7} {:>8}  bound",
        "operation",
        "total ms",
        "%",
        "calls",
        "us/call",
        "TFLOP/s",
        "GB/s",
        "%peakF",
        "%peakB",
        "roof us",
    );
    for r in &rows {
        let seconds = r.ms / 1e3;
        let tflops = r.flops as f64 / seconds / 1e12;
        let gbs = r.bytes as f64 / seconds / 1e9;
        let share = |value: f64, peak: f64| format!("{:.1}", 100.0 * value / peak);
        let none = || "-".to_owned();
        let (pf, pb, roof, bound) = peak.map_or((none(), none(), none(), "-"), |p| {
            (
                share(tflops, p.tflops),
                share(gbs, p.gbytes_per_s),
                format!(
                    "{:.2}",
                    1e6 * p.roof_seconds(r.flops, r.bytes) / r.calls as f64
                ),
                Bound::of(r.flops, r.bytes, seconds, p).name(),
            )
        });
        let _ = writeln!(
            out,
            "{:<22} {:>10.3} {:>6.1} {:>7} {:>9.2} {:>9.1} {:>9.0} {:>7} {:>7} {:>8}  {}",
            r.op,
            r.ms,
            100.0 * r.ms / op_ms,
            r.calls,
            1e3 * r.ms / r.calls as f64,
            tflops,
            gbs,
            pf,
            pb,
            roof,
            bound
        );
    }
    let instrumented_ms: f64 = passes.iter().map(|p| p.instrumented_ms).sum();
    let _ = writeln!(
        out,
        "sum of operations {op_ms:.3} ms over {} passes: {:.1} % of the instrumented passes ({instrumented_ms:.3} ms), {:.1} % of uninstrumented ones ({pass_ms:.3} ms)",
        passes.len(),
        100.0 * op_ms / instrumented_ms,
        100.0 * op_ms / pass_ms
    );
    let _ = writeln!(out, "{}", timing_source(passes));
    if let Some(p) = peak {
        let _ = writeln!(out, "peak: {}", p.source);
    }
    out
}

/// How the passes were timed (as the first was: a run times all its passes alike), and with
/// kernel timestamps how busy the GPU was.
fn timing_source(passes: &[PassProfile]) -> String {
    match passes.first().map(|p| p.timing) {
        Some(PassTiming::KernelTrace { .. }) => {
            let busy_ms: f64 = passes
                .iter()
                .map(|p| match p.timing {
                    PassTiming::KernelTrace { busy_ms } => busy_ms,
                    _ => p.instrumented_ms,
                })
                .sum();
            let traced_ms: f64 = passes.iter().map(|p| p.instrumented_ms).sum();
            format!(
                "timed from kernel timestamps (CUPTI) of graph replays: each operation from its first kernel's start to the next operation's; kernels ran {:.1} % of the time, the rest is launch gaps between them",
                100.0 * busy_ms / traced_ms
            )
        }
        Some(PassTiming::HostClock) => {
            "timed with the host's clock around each operation".to_owned()
        }
        Some(PassTiming::DeviceEvents) | None => {
            "timed with device events around each operation (they add gaps of their own)".to_owned()
        }
    }
}

/// The kernels that take the most time (with kernel timestamps): operation, kernel, calls,
/// µs per call and share of the passes' time; empty without kernel timestamps.
pub fn kernel_table(passes: &[PassProfile], top: usize) -> String {
    /// A kernel's totals within one operation.
    struct Total<'a> {
        op: &'a str,
        name: &'a str,
        calls: usize,
        ms: f64,
    }
    let mut totals: Vec<Total> = Vec::new();
    for k in passes.iter().flat_map(|p| &p.kernels) {
        match totals.iter_mut().find(|t| t.op == k.op && t.name == k.name) {
            Some(t) => {
                t.calls += 1;
                t.ms += k.ms;
            }
            None => totals.push(Total {
                op: k.op,
                name: &k.name,
                calls: 1,
                ms: k.ms,
            }),
        }
    }
    if totals.is_empty() {
        return String::new();
    }
    totals.sort_by(|a, b| b.ms.total_cmp(&a.ms));
    let traced_ms: f64 = passes.iter().map(|p| p.instrumented_ms).sum();
    let mut out = format!(
        "{:<20} {:<56} {:>6} {:>9} {:>6}\n",
        "operation", "kernel (busy time)", "calls", "us/call", "%"
    );
    for t in totals.into_iter().take(top) {
        let short: String = t.name.chars().take(56).collect();
        let _ = writeln!(
            out,
            "{:<20} {short:<56} {:>6} {:>9.2} {:>6.1}",
            t.op,
            t.calls,
            1e3 * t.ms / t.calls as f64,
            100.0 * t.ms / traced_ms
        );
    }
    out
}

/// Time per encoder layer (all its operations), averaged over the passes.
pub fn layer_table(passes: &[PassProfile]) -> String {
    let layers = passes
        .iter()
        .flat_map(|p| &p.ops)
        .filter_map(|t| t.layer)
        .max()
        .map_or(0, |l| l + 1);
    let mut out = format!("{:<8} {:>12} {:>10}\n", "layer", "ms per pass", "TFLOP/s");
    for layer in 0..layers {
        let ops = passes
            .iter()
            .flat_map(|p| &p.ops)
            .filter(|t| t.layer == Some(layer));
        let (ms, flops) = ops.fold((0.0, 0u64), |(ms, f), t| (ms + t.ms, f + t.flops));
        let _ = writeln!(
            out,
            "{layer:<8} {:>12.4} {:>10.1}",
            ms / passes.len() as f64,
            flops as f64 / (ms / 1e3) / 1e12
        );
    }
    out
}

/// A Chrome/Perfetto trace: one complete event per operation, passes one after another.
pub fn chrome_trace(passes: &[PassProfile]) -> serde_json::Value {
    let mut events = Vec::new();
    let mut offset_us = 0.0;
    for (i, pass) in passes.iter().enumerate() {
        events.push(json!({
            "name": format!("forward pass {i} (batch {})", pass.batch), "ph": "X", "pid": 1, "tid": 1,
            "ts": offset_us, "dur": pass.pass_ms * 1e3, "args": {"batch": pass.batch},
        }));
        for t in &pass.ops {
            let name = t
                .layer
                .map_or(t.op.to_owned(), |l| format!("{} [layer {l}]", t.op));
            events.push(json!({
                "name": name, "cat": t.op, "ph": "X", "pid": 1, "tid": 2,
                "ts": offset_us + t.start_ms * 1e3, "dur": t.ms * 1e3,
                "args": {"layer": t.layer, "batch": pass.batch, "flops": t.flops, "bytes": t.bytes},
            }));
        }
        offset_us += pass.pass_ms * 1e3 + 10.0;
    }
    json!({ "traceEvents": events, "displayTimeUnit": "ms" })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pass() -> PassProfile {
        let op = |op, layer, start_ms, ms, flops| OpTiming {
            op,
            layer,
            flops,
            bytes: 1_000_000,
            start_ms,
            ms,
        };
        PassProfile {
            batch: 64,
            pass_ms: 4.0,
            instrumented_ms: 4.2,
            timing: PassTiming::DeviceEvents,
            kernels: Vec::new(),
            ops: vec![
                op("qkv", Some(0), 0.0, 1.0, 2_000_000_000),
                op("attention", Some(0), 1.0, 2.0, 0),
                op("qkv", Some(1), 3.0, 0.5, 1_000_000_000),
            ],
        }
    }

    #[test]
    fn each_operation_is_bound_by_the_roof_of_its_intensity_or_by_latency() {
        // A device of 100 TFLOP/s and 1000 GB/s: its ridge is at 100 FLOP per byte.
        let peak = Peak {
            tflops: 100.0,
            gbytes_per_s: 1000.0,
            source: "test",
        };
        // (FLOPs, bytes) in 1 ms, and what bounds them.
        let cases = [
            // 1000 FLOP/B at 50 TFLOP/s: half the compute roof.
            (50_000_000_000, 50_000_000, Bound::Compute),
            // The same intensity at 10 TFLOP/s: a tenth of its roof.
            (10_000_000_000, 10_000_000, Bound::Latency),
            // 1 FLOP/B at 400 GB/s: 40 % of the bandwidth.
            (400_000_000, 400_000_000, Bound::Memory),
            // At the ridge (100 FLOP/B) the compute roof applies: 30 TFLOP/s is NEAR_ROOF.
            (30_000_000_000, 300_000_000, Bound::Compute),
            (29_000_000_000, 290_000_000, Bound::Latency),
            // Elementwise work with no FLOPs counted is measured against the bandwidth.
            (0, 100_000_000, Bound::Latency),
        ];
        for (flops, bytes, bound) in cases {
            assert_eq!(
                Bound::of(flops, bytes, 1e-3, peak),
                bound,
                "{flops} / {bytes}"
            );
        }
    }

    #[test]
    fn totals_by_operation_and_layer() {
        let (rows, pass_ms) = by_operation(&[pass(), pass()]);
        assert_eq!(rows[0].op, "attention");
        assert_eq!((rows[0].ms, rows[0].calls), (4.0, 2));
        assert_eq!(
            (rows[1].ms, rows[1].calls, rows[1].flops),
            (3.0, 4, 6_000_000_000)
        );
        assert_eq!(pass_ms, 8.0);
        let table = operation_table(&[pass()], peak_for("NVIDIA H200"));
        // qkv: 3 GFLOP in 1.5 ms = 2 TFLOP/s, 0.25 % of 785: far below its roof.
        let qkv = table
            .lines()
            .find(|l| l.starts_with("qkv"))
            .expect("a qkv row");
        assert!(
            qkv.contains("2.0") && qkv.contains("0.3") && qkv.ends_with("latency"),
            "{table}"
        );
        // At the roof: 3 GFLOP at 785 TFLOP/s (3.82 µs, longer than 2 MB at 4.8 TB/s) over 2
        // calls; attention's 1 MB at 4.8 TB/s.
        let column = |row: &str| {
            let line = table.lines().find(|l| l.starts_with(row)).expect("a row");
            line.split_whitespace().rev().nth(1).map(str::to_owned)
        };
        assert_eq!(column("qkv").as_deref(), Some("1.91"), "{table}");
        assert_eq!(column("attention").as_deref(), Some("0.21"), "{table}");
        assert!(
            table.contains("83.3 % of the instrumented")
                && table.contains("87.5 % of uninstrumented"),
            "{table}"
        );
        assert!(table.contains("timed with device events"), "{table}");
        let traced = PassProfile {
            timing: PassTiming::KernelTrace { busy_ms: 3.15 },
            ..pass()
        };
        let table = operation_table(&[traced], None);
        // 3.15 ms of kernels in a 4.2 ms traced pass.
        assert!(
            table.contains("kernel timestamps (CUPTI)") && table.contains("kernels ran 75.0 %"),
            "{table}"
        );
        assert_eq!(kernel_table(&[pass()], 10), "");
        let kernel = |op, name: &str, ms| KernelTiming {
            op,
            name: name.to_owned(),
            ms,
        };
        let with_kernels = PassProfile {
            kernels: vec![
                kernel("qkv", "gemm_kernel", 0.5),
                kernel("attention", "attention_mma_d32", 2.0),
                kernel("qkv", "gemm_kernel", 0.25),
            ],
            ..pass()
        };
        let kernels = kernel_table(&[with_kernels], 10);
        let rows: Vec<Vec<&str>> = kernels
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().collect())
            .collect();
        // Sorted by total time; 2.0 ms of a 4.2 ms pass is 47.6 %.
        assert_eq!(
            rows,
            [
                ["attention", "attention_mma_d32", "1", "2000.00", "47.6"],
                ["qkv", "gemm_kernel", "2", "375.00", "17.9"]
            ]
        );
        let layers = layer_table(&[pass()]);
        let rows: Vec<Vec<&str>> = layers
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().collect())
            .collect();
        // Layer 0: 1 + 2 ms, 2 GFLOP → 0.7 TFLOP/s; layer 1: 0.5 ms, 1 GFLOP → 2.0 TFLOP/s.
        assert_eq!(rows, [["0", "3.0000", "0.7"], ["1", "0.5000", "2.0"]]);
    }

    #[test]
    fn trace_is_chrome_json_with_one_event_per_op() {
        let trace = chrome_trace(&[pass()]);
        let events = trace["traceEvents"].as_array().unwrap();
        assert_eq!(events.len(), 4);
        assert!(
            events
                .iter()
                .all(|e| e["ph"] == "X" && e["dur"].as_f64().unwrap() > 0.0)
        );
        assert_eq!(events[2]["name"], "attention [layer 0]");
    }
}
