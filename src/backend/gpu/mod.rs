//! GPU backends (`cuda-fp16`; `rocm-fp16` with the ROCm layer; `hip-emu`, the ROCm executor on
//! an emulated GPU): the vendor-neutral executor over a [`GpuDevice`], with one captured graph
//! per batch size.

mod forward;
mod lanes;
mod weights;

use std::collections::HashMap;
use std::sync::Arc;

use super::finite::{check_outputs, extend_finite, first_non_finite};
use super::{Backend, BackendAttributes, BackendError, BackendOptions, BatchOutput, ProfileReport};
use crate::chess::InputPlanes;
use crate::chess::policy_index::POLICY_SIZE;
use crate::gpu::kernels::attention_kernel;
use crate::gpu::{Activity, GemmPath, GpuDevice, GpuError, GpuGraph, GpuResult};
use crate::profile::{KernelTiming, OpTiming, PassProfile, PassTiming};
use crate::weights::Network;
use crate::weights::format::{InputFormat, NetFormat};
use forward::{Buffers, Forward, Marker, OpEvent, OpEvents, Shapes, upload_inputs};
use lanes::LanePool;
use weights::NetworkGpu;

/// lc0's maximum batch size, the default `max_batch`.
const DEFAULT_MAX_BATCH: usize = 1024;

/// Batches that may run at once by default: two lanes let one call's host work (input
/// encoding and upload, result copies) and small passes overlap another's pass.
const DEFAULT_LANES: usize = 2;

/// Options every GPU backend takes.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuOptions {
    pub gpu: usize,
    pub max_batch: usize,
    /// The GEMM path asked for; `None`: the Lt library where the device has it, else BLAS.
    pub gemm: Option<GemmPath>,
    pub graph: bool,
    /// Time every operation (kernel timestamps where the device can trace, else events).
    pub profile: bool,
    /// Use the vendor's tensor-core attention where it exists (`attention=mma`, the default)
    /// or the portable kernel (`attention=portable`).
    pub tensor_core_attention: bool,
    /// The most batches that run at once (`lanes`, default 2): calls from several threads
    /// get a lane each (its own stream and buffers, made when first needed), so their passes
    /// overlap on the GPU; beyond that they wait.
    pub lanes: usize,
    /// Fill the activation buffers with NaN instead of zeros when they are made
    /// (`poison=true`): a validation mode in which any value read before the pass wrote it
    /// makes the outputs NaN, so `selftest` fails.
    pub poison: bool,
}

impl GpuOptions {
    /// Reads `gpu`, `max_batch`, `gemm`, `graph`, and applies `policy_head`, `value_head` and
    /// `mlh` to the network.
    pub fn take(
        backend: &str,
        options: &BackendOptions,
        network: &mut Network,
    ) -> Result<Self, BackendError> {
        let bad = |key: &str, value: String, reason: &str| BackendError::BadOption {
            backend: backend.to_owned(),
            key: key.to_owned(),
            value,
            reason: reason.to_owned(),
        };
        let gemm = options
            .get::<String>(backend, "gemm")?
            .map(|name| {
                GemmPath::from_name(&name).ok_or_else(|| bad("gemm", name, "expected lt or blas"))
            })
            .transpose()?;
        let max_batch = options
            .get::<usize>(backend, "max_batch")?
            .unwrap_or(DEFAULT_MAX_BATCH);
        if max_batch == 0 {
            return Err(bad("max_batch", "0".to_owned(), "must be at least 1"));
        }
        let lanes = options
            .get::<usize>(backend, "lanes")?
            .unwrap_or(DEFAULT_LANES);
        if lanes == 0 {
            return Err(bad("lanes", "0".to_owned(), "must be at least 1"));
        }
        options.select_heads(backend, network)?;
        if !options.get::<bool>(backend, "mlh")?.unwrap_or(true) {
            network.moves_left = None;
        }
        Ok(Self {
            gpu: options.get::<usize>(backend, "gpu")?.unwrap_or(0),
            max_batch,
            gemm,
            graph: options.get::<bool>(backend, "graph")?.unwrap_or(true),
            profile: options.get::<bool>(backend, "profile")?.unwrap_or(false),
            poison: options.get::<bool>(backend, "poison")?.unwrap_or(false),
            lanes,
            tensor_core_attention: match options.get::<String>(backend, "attention")?.as_deref() {
                None | Some("mma") => true,
                Some("portable") => false,
                Some(other) => {
                    return Err(bad(
                        "attention",
                        other.to_owned(),
                        "expected mma or portable",
                    ));
                }
            },
        })
    }
}

/// One lane: a device handle with a stream of its own, and the buffers and graphs of the
/// batches run on it. Calls that overlap run on different lanes, so their passes can overlap on
/// the GPU (and one call's host work with another's GPU work).
struct Lane {
    device: Arc<dyn GpuDevice>,
    buffers: Buffers,
    graphs: HashMap<usize, Box<dyn GpuGraph>>,
    /// The profiled passes, when profiling.
    profile: Vec<PassProfile>,
    /// Batch sizes that have run eagerly once (GEMM algorithms chosen).
    tuned: std::collections::HashSet<usize>,
}

impl Lane {
    /// A lane on `device` with buffers for `max_batch` positions, filled with zeros (or NaN
    /// under `poison`), ready when this returns.
    fn new(device: Arc<dyn GpuDevice>, shapes: &Shapes, options: &GpuOptions) -> GpuResult<Self> {
        let buffers = Buffers::new(device.as_ref(), shapes, options.max_batch)?;
        buffers.fill(device.as_ref(), if options.poison { 0xFF } else { 0 })?;
        device.synchronize()?;
        Ok(Self {
            device,
            buffers,
            graphs: HashMap::new(),
            profile: Vec::new(),
            tuned: Default::default(),
        })
    }
}

/// A GPU backend: weights on the device, lanes with buffers for `max_batch` positions and
/// graphs per batch size.
pub struct GpuBackend {
    name: String,
    /// The first lane's device, for queries (name, memory, SMs).
    device: Arc<dyn GpuDevice>,
    net: NetworkGpu,
    format: NetFormat,
    shapes: Shapes,
    alpha: f32,
    attention: &'static str,
    gemm: GemmPath,
    options: GpuOptions,
    /// The lanes made so far (the first at creation, another whenever a call finds every
    /// lane busy, up to `options.lanes`) and the calls waiting for one.
    pool: LanePool<Lane>,
}

/// A traced pass' timings, attributed to its operations.
#[derive(Debug, PartialEq)]
struct TracedTimings {
    ops: Vec<OpTiming>,
    kernels: Vec<KernelTiming>,
    /// First start to last end.
    span_ms: f64,
    /// The time something ran.
    busy_ms: f64,
}

/// Gives each operation, marked by captured-work counts (`first` at the start of the pass), the
/// activities of its nodes: its time runs from its first activity's start to the next
/// operation's (launch gaps count to the operation that waits for them), and each activity is
/// listed under it. `activities` holds one record per work node, in start order (non-empty).
fn attribute_trace(marks: &[OpEvent], first: usize, activities: &[Activity]) -> TracedTimings {
    let origin = activities[0].start_ns;
    let span_end = activities
        .last()
        .expect("a traced pass ran something")
        .end_ns;
    let ms = |ns: u64| ns as f64 * 1e-6;
    let start_of = |node: usize| activities.get(node).map_or(span_end, |a| a.start_ns);
    let kernels = marks
        .iter()
        .flat_map(|e| {
            activities[e.start - first..e.end - first]
                .iter()
                .map(|a| KernelTiming {
                    op: e.op,
                    name: a.name.clone(),
                    ms: ms(a.end_ns - a.start_ns),
                })
        })
        .collect();
    let ops = marks
        .iter()
        .map(|e| {
            let (begin, next) = (start_of(e.start - first), start_of(e.end - first));
            OpTiming {
                op: e.op,
                layer: e.layer,
                flops: e.cost.flops,
                bytes: e.cost.bytes,
                start_ms: ms(begin - origin),
                ms: ms(next.saturating_sub(begin)),
            }
        })
        .collect();
    TracedTimings {
        ops,
        kernels,
        span_ms: ms(span_end - origin),
        busy_ms: ms(activities.iter().map(|a| a.end_ns - a.start_ns).sum()),
    }
}

/// The GEMM path for `asked` on `device`: the one asked for if its library is there (else an
/// error saying why), or by default Lt where available and BLAS otherwise.
fn choose_gemm_path(device: &dyn GpuDevice, asked: Option<GemmPath>) -> GpuResult<GemmPath> {
    match asked {
        Some(path) => match device.gemm_path_unavailable(path) {
            None => Ok(path),
            Some(why) => Err(GpuError::Unsupported(format!(
                "gemm={} cannot run on {}: {why}",
                match path {
                    GemmPath::Lt => "lt",
                    GemmPath::Blas => "blas",
                },
                device.info().name
            ))),
        },
        None if device.gemm_path_unavailable(GemmPath::Lt).is_none() => Ok(GemmPath::Lt),
        None => Ok(GemmPath::Blas),
    }
}

impl GpuBackend {
    pub fn new(
        name: &str,
        device: Arc<dyn GpuDevice>,
        network: &Network,
        options: GpuOptions,
    ) -> GpuResult<Self> {
        let shapes = Shapes::of(network);
        shapes.check_supported()?;
        let gemm = choose_gemm_path(device.as_ref(), options.gemm)?;
        let portable = attention_kernel(shapes.depth, false).expect("checked above");
        let attention = match attention_kernel(shapes.depth, true) {
            Some(fast) if options.tensor_core_attention && device.has_kernel(fast) => fast,
            _ => portable,
        };
        let net = NetworkGpu::upload(device.as_ref(), network)?;
        let first = Lane::new(device.clone(), &shapes, &options)?;
        Ok(Self {
            name: name.to_owned(),
            device,
            net,
            format: network.format.clone(),
            shapes,
            alpha: network.residual_alpha,
            attention,
            gemm,
            options,
            pool: LanePool::new(first),
        })
    }

    /// Device memory of one lane's activation buffers (weights not included), and the number
    /// of lanes made so far.
    pub fn buffer_bytes(&self) -> (usize, usize) {
        let lanes = self.pool.lanes();
        let first = lanes[0].lock().unwrap_or_else(|e| e.into_inner());
        (first.buffers.bytes(), lanes.len())
    }

    /// Runs `work` on a lane no other call holds: a free one, else a new one (up to
    /// `options.lanes`), else the first to come free, calls served in the order they came.
    fn with_lane<T>(&self, work: impl FnOnce(&mut Lane) -> GpuResult<T>) -> GpuResult<T> {
        let taken = self.pool.take(self.options.lanes, || {
            Lane::new(self.device.new_lane()?, &self.shapes, &self.options)
        })?;
        let lane = taken.lane();
        let mut lane = lane.lock().unwrap_or_else(|e| e.into_inner());
        work(&mut lane)
    }

    /// Every lane made so far, one after another (waiting for any in use).
    fn each_lane(&self, mut visit: impl FnMut(&mut Lane)) {
        for lane in self.pool.lanes() {
            visit(&mut lane.lock().unwrap_or_else(|e| e.into_inner()));
        }
    }

    fn forward<'a>(&'a self, lane: &'a Lane, profile: Option<&'a OpEvents>) -> Forward<'a> {
        Forward {
            device: lane.device.as_ref(),
            net: &self.net,
            format: &self.format,
            shapes: &self.shapes,
            buffers: &lane.buffers,
            gemm: self.gemm,
            alpha: self.alpha,
            attention: self.attention,
            profile,
        }
    }

    /// The outputs of a pass, and whether they are all finite (see [`Self::outputs`]).
    fn run(&self, batch: &[InputPlanes]) -> GpuResult<(BatchOutput, bool)> {
        self.with_lane(|lane| self.run_on(lane, batch))
    }

    fn run_on(&self, lane: &mut Lane, batch: &[InputPlanes]) -> GpuResult<(BatchOutput, bool)> {
        let n = batch.len();
        tracing::trace_span!("upload inputs", batch = n)
            .in_scope(|| upload_inputs(lane.device.as_ref(), &lane.buffers, batch))?;
        if self.options.profile {
            self.profiled_pass(lane, n)?;
            return self.outputs(lane, n);
        }
        match lane.graphs.get(&n) {
            Some(graph) => graph.launch()?,
            None => {
                // The first pass at a size runs eagerly (it also picks the GEMM algorithms);
                // then the same work is captured for the next calls.
                self.forward(lane, None).enqueue(n)?;
                lane.tuned.insert(n);
                if self.options.graph {
                    self.capture(lane, n)?;
                }
            }
        }
        self.outputs(lane, n)
    }

    /// Captures the pass of `n` positions into a graph (after an eager pass at that size).
    fn capture(&self, lane: &mut Lane, n: usize) -> GpuResult<()> {
        lane.device.begin_capture()?;
        let captured = self.forward(lane, None).enqueue(n);
        let graph = lane.device.end_capture();
        captured?;
        lane.graphs.insert(n, graph?);
        Ok(())
    }

    /// The GPU time of one uninstrumented pass (the captured graph, or eager without graphs).
    fn pass_time_ms(&self, lane: &mut Lane, n: usize) -> GpuResult<f64> {
        if self.options.graph && !lane.graphs.contains_key(&n) {
            self.capture(lane, n)?;
        }
        let start = lane.device.record_event()?;
        match lane.graphs.get(&n) {
            Some(graph) => graph.launch()?,
            None => self.forward(lane, None).enqueue(n)?,
        }
        let end = lane.device.record_event()?;
        let ms = f64::from(lane.device.elapsed_ms(start, end)?);
        lane.device.clear_events();
        Ok(ms)
    }

    /// One profiled pass: from kernel timestamps of a graph replay where the device can trace
    /// (CUPTI), else with every operation bracketed by device events.
    fn profiled_pass(&self, lane: &mut Lane, n: usize) -> GpuResult<()> {
        if lane.tuned.insert(n) {
            // An eager pass first: it picks the GEMM algorithms, which cannot be timed in a capture.
            self.forward(lane, None).enqueue(n)?;
        }
        let traced = if self.options.graph && lane.device.can_trace() {
            self.traced_pass(lane, n)?
        } else {
            None
        };
        let profile = match traced {
            Some(profile) => profile,
            None => self.event_timed_pass(lane, n)?,
        };
        for op in &profile.ops {
            tracing::debug!(
                op = op.op,
                layer = op.layer,
                batch = n,
                flops = op.flops,
                bytes = op.bytes,
                gpu_us = op.ms * 1e3,
                "gpu op"
            );
        }
        lane.profile.push(profile);
        Ok(())
    }

    /// Captures the pass with each operation's graph nodes counted, replays it with activity
    /// tracing on, and gives each operation the GPU time from its first kernel's start to the
    /// next operation's (so launch gaps count to the operation that waits for them).
    /// `None` where the trace cannot be matched to the graph's nodes (then events time the pass).
    fn traced_pass(&self, lane: &mut Lane, n: usize) -> GpuResult<Option<PassProfile>> {
        let marks = OpEvents::new(Marker::CapturedWork);
        lane.device.begin_capture()?;
        let recorded = (|| -> GpuResult<(usize, usize)> {
            let first = lane.device.captured_work()?;
            self.forward(lane, Some(&marks)).enqueue(n)?;
            Ok((first, lane.device.captured_work()?))
        })();
        let graph = lane.device.end_capture();
        let (first, last) = recorded?;
        let graph = graph?;
        graph.launch()?;
        lane.device.synchronize()?;
        let activities = match lane.device.trace(&mut || graph.launch()) {
            Ok(activities) => activities,
            Err(error) => {
                // E.g. another profiler (nsys, ncu) holds CUPTI: events still work.
                tracing::warn!(%error, "no kernel trace; timing with events instead");
                return Ok(None);
            }
        };
        if activities.len() != last - first || activities.is_empty() {
            tracing::warn!(
                traced = activities.len(),
                nodes = last - first,
                batch = n,
                "the kernel trace does not match the graph's work nodes; timing with events instead"
            );
            return Ok(None);
        }
        let marks = marks.ops.into_inner().unwrap_or_else(|e| e.into_inner());
        let traced = attribute_trace(&marks, first, &activities);
        Ok(Some(PassProfile {
            batch: n,
            pass_ms: self.pass_time_ms(lane, n)?,
            instrumented_ms: traced.span_ms,
            timing: PassTiming::KernelTrace {
                busy_ms: traced.busy_ms,
            },
            ops: traced.ops,
            kernels: traced.kernels,
        }))
    }

    /// A pass with every operation bracketed by timing events. With graphs on, the pass is
    /// captured (its events become graph nodes) and replayed, so it runs without host gaps.
    fn event_timed_pass(&self, lane: &mut Lane, n: usize) -> GpuResult<PassProfile> {
        let events = OpEvents::new(Marker::Event);
        if self.options.graph {
            lane.device.begin_capture()?;
        }
        let recorded = (|| -> GpuResult<(usize, usize)> {
            let first = lane.device.record_event()?;
            self.forward(lane, Some(&events)).enqueue(n)?;
            Ok((first, lane.device.record_event()?))
        })();
        // The graph lives until the stream has run it.
        let mut graph = None;
        if self.options.graph {
            let captured = lane.device.end_capture();
            recorded.as_ref().map_err(|e| GpuError::Call {
                call: "profiled capture",
                detail: e.to_string(),
            })?;
            graph = Some(captured?);
        }
        if let Some(graph) = &graph {
            graph.launch()?;
        }
        let (first, last) = recorded?;
        lane.device.synchronize()?;
        drop(graph);
        let mut ops = Vec::new();
        for e in events.ops.into_inner().unwrap_or_else(|e| e.into_inner()) {
            ops.push(OpTiming {
                op: e.op,
                layer: e.layer,
                flops: e.cost.flops,
                bytes: e.cost.bytes,
                start_ms: f64::from(lane.device.elapsed_ms(first, e.start)?),
                ms: f64::from(lane.device.elapsed_ms(e.start, e.end)?),
            });
        }
        let instrumented_ms = f64::from(lane.device.elapsed_ms(first, last)?);
        lane.device.clear_events();
        Ok(PassProfile {
            batch: n,
            pass_ms: self.pass_time_ms(lane, n)?,
            instrumented_ms,
            timing: PassTiming::DeviceEvents,
            ops,
            kernels: Vec::new(),
        })
    }

    /// The residual stream after the embedding and after each encoder layer (eager passes).
    fn residual_streams(&self, batch: &[InputPlanes]) -> GpuResult<Vec<Vec<f32>>> {
        self.with_lane(|lane| self.residual_streams_on(lane, batch))
    }

    fn residual_streams_on(&self, lane: &Lane, batch: &[InputPlanes]) -> GpuResult<Vec<Vec<f32>>> {
        let n = batch.len();
        upload_inputs(lane.device.as_ref(), &lane.buffers, batch)?;
        let forward = self.forward(lane, None);
        let download_x = || -> GpuResult<Vec<f32>> {
            let mut bytes = vec![0u8; n * 64 * self.shapes.embedding * 2];
            lane.device.download(lane.buffers.x.ptr(), &mut bytes)?;
            Ok(bytes
                .chunks_exact(2)
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect())
        };
        forward.embed(n)?;
        let mut out = vec![download_x()?];
        for layer in 0..self.net.encoders.len() {
            forward.encoder(layer, n)?;
            out.push(download_x()?);
        }
        Ok(out)
    }

    /// Downloads the outputs of the pass of `n` positions; the flag says whether all are
    /// finite. Each piece of the policy is checked while it is copied out of the staging
    /// memory, so the check adds no pass over memory.
    fn outputs(&self, lane: &Lane, n: usize) -> GpuResult<(BatchOutput, bool)> {
        // The wait has its own span, so that `copy outputs` times only the host-side copies.
        tracing::trace_span!("wait for the pass", batch = n)
            .in_scope(|| lane.device.synchronize())?;
        let _span = tracing::trace_span!("copy outputs", batch = n).entered();
        // The policy is copied once, from where it landed into its vector (no zero-filled
        // vector first: at batch 1024 that is 7.6 MB written twice). The device writes
        // little-endian f32, as the host.
        let mut policy = Vec::with_capacity(n * POLICY_SIZE);
        let mut finite = true;
        lane.device.download_with(
            lane.buffers.policy_out.ptr(),
            n * POLICY_SIZE * size_of::<f32>(),
            &mut |landed| {
                finite &= extend_f32(&mut policy, landed);
            },
        )?;
        let mut finished = vec![0f32; n * 3];
        lane.device.download(
            lane.buffers.finished.ptr(),
            bytemuck::cast_slice_mut(&mut finished),
        )?;
        finite &= first_non_finite(&finished).is_none();
        let out = BatchOutput {
            q: finished.iter().step_by(3).copied().collect(),
            d: finished.iter().skip(1).step_by(3).copied().collect(),
            m: finished.iter().skip(2).step_by(3).copied().collect(),
            policy,
        };
        Ok((out, finite))
    }
}

impl Backend for GpuBackend {
    fn name(&self) -> &str {
        &self.name
    }

    fn attributes(&self) -> BackendAttributes {
        BackendAttributes {
            has_wdl: self.format.wdl,
            has_mlh: self.net.moves_left.is_some(),
            runs_on_cpu: false,
            max_batch: self.options.max_batch,
            recommended_batch: 2 * self.device.info().multiprocessors as usize,
        }
    }

    fn input_format(&self) -> InputFormat {
        self.format.input
    }

    fn memory_report(&self) -> Option<String> {
        let mib = |b: usize| b as f64 / (1u64 << 20) as f64;
        let (buffers, lanes) = self.buffer_bytes();
        Some(match self.device.memory() {
            Ok((used, total)) => format!(
                "device memory: {:.0} MiB in use of {:.0} MiB (activation buffers for max_batch {}: {:.0} MiB per lane, {} of at most {} lanes made)",
                mib(used),
                mib(total),
                self.options.max_batch,
                mib(buffers),
                lanes,
                self.options.lanes
            ),
            Err(e) => format!("device memory unknown: {e}"),
        })
    }

    fn reset_profile(&self) {
        self.each_lane(|lane| lane.profile.clear());
    }

    fn layer_outputs(&self, batch: &[InputPlanes]) -> Result<Option<Vec<Vec<f32>>>, BackendError> {
        if batch.len() > self.options.max_batch {
            return Err(BackendError::BatchTooLarge {
                backend: self.name.clone(),
                size: batch.len(),
                max: self.options.max_batch,
            });
        }
        self.residual_streams(batch)
            .map(Some)
            .map_err(|error| BackendError::Gpu {
                backend: self.name.clone(),
                error,
            })
    }

    fn profile_report(&self) -> Option<ProfileReport> {
        self.options.profile.then(|| {
            let mut passes = Vec::new();
            self.each_lane(|lane| passes.extend(lane.profile.iter().cloned()));
            ProfileReport {
                device: self.device.info().name.clone(),
                passes,
            }
        })
    }

    fn evaluate(&self, batch: &[InputPlanes]) -> Result<BatchOutput, BackendError> {
        if batch.len() > self.options.max_batch {
            return Err(BackendError::BatchTooLarge {
                backend: self.name.clone(),
                size: batch.len(),
                max: self.options.max_batch,
            });
        }
        if batch.is_empty() {
            return Ok(BatchOutput::default());
        }
        let (out, finite) = self.run(batch).map_err(|error| BackendError::Gpu {
            backend: self.name.clone(),
            error,
        })?;
        if !finite {
            // Only now is it worth finding which output and position.
            check_outputs(&out).map_err(|error| BackendError::NonFinite {
                backend: self.name.clone(),
                error,
            })?;
        }
        Ok(out)
    }
}

/// Creates `cuda-fp16` on the CUDA GPU chosen by the options.
pub fn create_cuda(
    name: &str,
    network: Network,
    options: &BackendOptions,
) -> Result<GpuBackend, BackendError> {
    create_on(name, network, options, |ordinal| {
        Ok(Arc::new(crate::gpu::cuda::CudaDevice::new(ordinal)?))
    })
}

/// `rocm-fp16` / `rocm` on the AMD GPU chosen by the options, through lc0rs' own HIP, rocBLAS
/// and hipBLASLt bindings. Without the runtime or a GPU, the error names what is missing.
pub fn create_rocm(
    name: &str,
    network: Network,
    options: &BackendOptions,
) -> Result<GpuBackend, BackendError> {
    create_on(name, network, options, |ordinal| {
        Ok(Arc::new(crate::gpu::hip::device::HipDevice::new(ordinal)?))
    })
}

/// `hip-emu`: the `rocm-fp16` executor on an emulated AMD GPU (`crate::gpu::emu`), with
/// `wave=64|32` (default 64: CDNA's waves; 32: RDNA's) and `lt_release=7|6` (default 7: which
/// hipBLASLt's epilogues are emulated; 6 leaves bias+SiLU's SiLU to the kernel).
pub fn create_hip_emu(
    name: &str,
    network: Network,
    options: &BackendOptions,
) -> Result<GpuBackend, BackendError> {
    use crate::gpu::emu::{EmuDevice, LtRelease, library::BuildConfig};
    let bad = |key: &str, value: String, reason: &str| BackendError::BadOption {
        backend: name.to_owned(),
        key: key.to_owned(),
        value,
        reason: reason.to_owned(),
    };
    let wave = match options.get::<u32>(name, "wave")?.unwrap_or(64) {
        wave @ (32 | 64) => wave,
        other => return Err(bad("wave", other.to_string(), "expected 64 or 32")),
    };
    let lt = match options.get::<u32>(name, "lt_release")?.unwrap_or(7) {
        7 => LtRelease::Rocm7,
        6 => LtRelease::Rocm6,
        other => return Err(bad("lt_release", other.to_string(), "expected 7 or 6")),
    };
    create_on(name, network, options, |_| {
        Ok(Arc::new(EmuDevice::new(&BuildConfig::new(wave)?, lt)?))
    })
}

/// A GPU backend called `name` on the device `open` gives for the `gpu` option's ordinal.
fn create_on(
    name: &str,
    mut network: Network,
    options: &BackendOptions,
    open: impl FnOnce(usize) -> GpuResult<Arc<dyn GpuDevice>>,
) -> Result<GpuBackend, BackendError> {
    let gpu_options = GpuOptions::take(name, options, &mut network)?;
    let gpu_error = |error: GpuError| BackendError::Gpu {
        backend: name.to_owned(),
        error,
    };
    let device = open(gpu_options.gpu).map_err(gpu_error)?;
    GpuBackend::new(name, device, &network, gpu_options).map_err(gpu_error)
}

/// Appends the little-endian f32 values in `bytes` and says whether all are finite (one copy
/// with the check folded in where they are 4-byte aligned, as in page-aligned staging memory).
fn extend_f32(out: &mut Vec<f32>, bytes: &[u8]) -> bool {
    match bytemuck::try_cast_slice::<u8, f32>(bytes) {
        Ok(values) => extend_finite(out, values),
        Err(_) => {
            let from = out.len();
            out.extend(
                bytes
                    .chunks_exact(size_of::<f32>())
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
            );
            first_non_finite(&out[from..]).is_none()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::forward::Cost;
    use super::*;

    #[test]
    fn f32_results_are_read_from_aligned_and_unaligned_bytes() {
        let values = [1.5f32, -0.25, 3.0e-8, f32::MAX, 0.0];
        // Bytes written independently of extend_f32: each value's little-endian encoding.
        let mut bytes = vec![0u8];
        for v in values {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        let mut aligned = vec![0u32; values.len()];
        bytemuck::cast_slice_mut::<u32, u8>(&mut aligned).copy_from_slice(&bytes[1..]);
        for input in [bytemuck::cast_slice::<u32, u8>(&aligned), &bytes[1..]] {
            let mut out = vec![7.0f32];
            assert!(extend_f32(&mut out, input));
            assert_eq!(out[0], 7.0);
            assert_eq!(out[1..], values);
        }
    }

    #[test]
    fn traced_activities_are_attributed_to_the_operations_that_enqueued_them() {
        let activity = |start_ns, end_ns, name: &str| Activity {
            start_ns,
            end_ns,
            name: name.to_owned(),
        };
        // Work nodes 10..15 of a capture: "a" enqueued 10, 11; "b" 12; "c" 13, 14.
        let activities = [
            activity(1_000, 3_000, "gemm"),
            activity(3_500, 4_000, "bias"),
            activity(5_000, 9_000, "attention"),
            activity(9_200, 9_700, "memset"),
            activity(10_000, 12_000, "gemm"),
        ];
        let mark = |op, start, end| OpEvent {
            op,
            layer: Some(0),
            cost: Cost { flops: 7, bytes: 9 },
            start,
            end,
        };
        let marks = [mark("a", 10, 12), mark("b", 12, 13), mark("c", 13, 15)];
        let t = attribute_trace(&marks, 10, &activities);
        let ns = |ms: f64| (ms * 1e6).round() as u64;
        let times: Vec<(&str, u64, u64)> = t
            .ops
            .iter()
            .map(|o| (o.op, ns(o.start_ms), ns(o.ms)))
            .collect();
        // "a" runs until "b" starts (the 1 µs gap is "a"'s), "c" until the pass ends.
        assert_eq!(
            times,
            [("a", 0, 4_000), ("b", 4_000, 4_200), ("c", 8_200, 2_800)]
        );
        assert_eq!(ns(t.span_ms), 11_000);
        assert_eq!(ns(t.busy_ms), 9_000);
        let kernels: Vec<(&str, &str)> =
            t.kernels.iter().map(|k| (k.op, k.name.as_str())).collect();
        assert_eq!(
            kernels,
            [
                ("a", "gemm"),
                ("a", "bias"),
                ("b", "attention"),
                ("c", "memset"),
                ("c", "gemm")
            ]
        );
        assert_eq!((t.ops[0].flops, t.ops[0].bytes), (7, 9));
    }
}
