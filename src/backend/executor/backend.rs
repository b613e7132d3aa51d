//! The executor both network families run on: lanes (each a stream with its own buffers and
//! graphs), one captured graph per batch size, the input upload, the output copies with their
//! finite check, and profiling. What is specific to a network is its [`NetworkPass`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::GpuOptions;
use super::batch_sizes::{padded_batch, padded_sizes};
use super::capture::capture_graph;
use super::io::{IoBuffers, upload_inputs, upload_picks};
use super::lanes::{LanePool, Taken};
use super::marks::{Marker, OpEvents};
use super::ops::Ops;
use super::outputs::{AllLogits, GatheredReader, OutputReader, PickedLogits, PolicySink};
use super::pass::NetworkPass;
use super::plan::{Capabilities, PassPlan};
use super::trace::attribute_trace;
use crate::backend::finite::{NonFinite, check_outputs};
use crate::backend::{
    Backend, BackendAttributes, BackendError, BatchOutput, PickedOutput, PolicyPicks, ProfileReport,
};
use crate::chess::InputPlanes;
use crate::gpu::kernels::launchers;
use crate::gpu::{GemmPath, GpuBuffer, GpuDevice, GpuError, GpuGraph, GpuResult, Launch};
use crate::profile::{OpTiming, PassProfile, PassTiming};
use crate::weights::format::InputFormat;

/// One lane: a device handle with a stream of its own, and the buffers and graphs of the
/// batches run on it. Calls that overlap run on different lanes, so their passes can overlap on
/// the GPU (and one call's host work with another's GPU work).
///
/// Fields drop in order: the graphs, which replay addresses in `io` and `buffers`, before
/// those buffers (the device-memory contract; a test checks the order on the emulator).
struct Lane<P: NetworkPass> {
    graphs: HashMap<usize, Box<dyn GpuGraph>>,
    device: Arc<dyn GpuDevice>,
    io: IoBuffers,
    buffers: P::Buffers,
    /// The profiled passes, when profiling.
    profile: Vec<PassProfile>,
    /// Batch sizes that have run eagerly once (GEMM algorithms chosen).
    tuned: std::collections::HashSet<usize>,
}

impl<P: NetworkPass> Lane<P> {
    /// A lane on `device` with buffers for `max_batch` positions, filled with zeros (or NaN
    /// under `poison`), ready when this returns.
    fn new(device: Arc<dyn GpuDevice>, pass: &P, options: &GpuOptions) -> GpuResult<Self> {
        let lane = Self {
            io: IoBuffers::new(device.as_ref(), options.max_batch)?,
            buffers: pass.buffers(device.as_ref(), options.max_batch)?,
            device,
            graphs: HashMap::new(),
            profile: Vec::new(),
            tuned: Default::default(),
        };
        lane.fill(if options.poison { 0xFF } else { 0 })?;
        lane.device.synchronize()?;
        Ok(lane)
    }

    fn all_buffers(&self) -> impl Iterator<Item = &GpuBuffer> {
        self.io
            .all()
            .into_iter()
            .chain(P::each_buffer(&self.buffers))
    }

    /// Device memory held by the lane's buffers.
    fn bytes(&self) -> usize {
        self.all_buffers().map(GpuBuffer::bytes).sum()
    }

    /// Fills every buffer with `byte` (stream-ordered). Buffers are filled once, when made:
    /// with zeros, so that no pass can ever see another process's leftovers and so that
    /// compute-sanitizer's initcheck, which does not see the writes of cuBLAS/cuBLASLt GEMMs
    /// (docs/validation.md), can check the rest; or with 0xFF (NaN in fp16 and f32) under
    /// `poison=true`, so that any value read before the pass wrote it turns the outputs NaN.
    fn fill(&self, byte: u8) -> GpuResult<()> {
        self.all_buffers().try_for_each(|b| {
            // SAFETY: the whole of one of the lane's own buffers (made on this lane's device),
            // which no other work uses: the lane is being made, and filled on its stream.
            unsafe { self.device.fill(b.ptr(), b.bytes(), byte) }
        })
    }
}

/// A GPU backend: weights on the device, lanes with buffers for `max_batch` positions and
/// graphs per (padded) batch size.
///
/// Fields drop in order: the lanes (with their graphs, which replay addresses of the weights)
/// before the pass that owns the weights.
pub struct GpuBackend<P: NetworkPass> {
    /// The lanes made so far (the first at creation, another whenever a call finds every
    /// lane busy, up to `options.lanes`) and the calls waiting for one.
    pool: LanePool<Lane<P>>,
    name: String,
    /// The first lane's device, for queries (name, memory, SMs).
    device: Arc<dyn GpuDevice>,
    pass: P,
    gemm: GemmPath,
    options: GpuOptions,
    /// What the device offers the plans (every lane is on the same GPU).
    capabilities: Arc<Capabilities>,
    /// The plan of each batch size a pass has run at, made when first needed.
    plans: Mutex<HashMap<usize, Arc<P::Plan>>>,
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

impl<P: NetworkPass> GpuBackend<P> {
    /// A backend on `device` for the network `upload` puts on it (after the GEMM path is
    /// known to be usable), with its first lane ready.
    pub fn new(
        name: &str,
        device: Arc<dyn GpuDevice>,
        upload: impl FnOnce(&dyn GpuDevice) -> GpuResult<P>,
        options: GpuOptions,
    ) -> GpuResult<Self> {
        let gemm = choose_gemm_path(device.as_ref(), options.gemm)?;
        let pass = upload(device.as_ref())?;
        let first = Lane::new(device.clone(), &pass, &options)?;
        Ok(Self {
            name: name.to_owned(),
            capabilities: Arc::new(Capabilities::of(device.as_ref())),
            plans: Mutex::default(),
            device,
            pass,
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
        (first.bytes(), lanes.len())
    }

    /// Runs `work` on a lane no other call holds: a free one, else a new one (up to
    /// `options.lanes`), else the first to come free, calls served in the order they came.
    fn with_lane<T>(&self, work: impl FnOnce(&mut Lane<P>) -> GpuResult<T>) -> GpuResult<T> {
        let taken = self.take_lane()?;
        let lane = taken.lane();
        let mut lane = lane.lock().unwrap_or_else(|e| e.into_inner());
        work(&mut lane)
    }

    /// A lane no other call holds (see [`Self::with_lane`]).
    fn take_lane(&self) -> GpuResult<Taken<'_, Lane<P>>> {
        self.pool.take(self.options.lanes, || {
            Lane::new(self.device.new_lane()?, &self.pass, &self.options)
        })
    }

    fn gpu_error(&self, error: GpuError) -> BackendError {
        BackendError::Gpu {
            backend: self.name.clone(),
            error,
        }
    }

    fn non_finite(&self, error: NonFinite) -> BackendError {
        BackendError::NonFinite {
            backend: self.name.clone(),
            error,
        }
    }

    /// Every lane made so far, one after another (waiting for any in use).
    fn each_lane(&self, mut visit: impl FnMut(&mut Lane<P>)) {
        for lane in self.pool.lanes() {
            visit(&mut lane.lock().unwrap_or_else(|e| e.into_inner()));
        }
    }

    /// The plan of a pass of `batch` positions: made once per size (and logged), then shared
    /// by every lane and by the pass's graph capture.
    fn plan(&self, batch: usize) -> GpuResult<Arc<P::Plan>> {
        let mut plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(plan) = plans.get(&batch) {
            return Ok(plan.clone());
        }
        let pass = PassPlan::new(self.capabilities.clone(), &self.options.plan, batch);
        let plan = Arc::new(self.pass.plan(pass)?);
        tracing::debug!(backend = %self.name, %plan, "pass plan");
        plans.insert(batch, plan.clone());
        Ok(plan)
    }

    /// How the operations of a pass run on `device`: the GEMM path, the plan's kernels, and
    /// (set on the device) the plan's programmatic launch.
    fn ops<'a>(
        &self,
        device: &'a dyn GpuDevice,
        plan: &'a PassPlan,
        profile: Option<&'a OpEvents>,
    ) -> Ops<'a> {
        device.set_programmatic_launch(plan.programmatic_launch);
        Ops {
            device,
            gemm: self.gemm,
            plan,
            profile,
        }
    }

    /// Enqueues the pass of `batch` positions on `lane` (its operations marked in `profile`).
    /// `batch` is at most `options.max_batch` (every caller's batch is checked or padded
    /// within it).
    fn enqueue(&self, lane: &Lane<P>, batch: usize, profile: Option<&OpEvents>) -> GpuResult<()> {
        assert!(
            batch <= self.options.max_batch,
            "a pass of {batch} positions"
        );
        let plan = self.plan(batch)?;
        let ops = self.ops(lane.device.as_ref(), (*plan).as_ref(), profile);
        let _span = tracing::trace_span!("forward", batch).entered();
        // SAFETY: the lane's io and buffers were made on its device for `max_batch ≥ batch`
        // positions; the lane is held by this call, so no other work uses them; they, and the
        // weights of `self.pass`, outlive the work: calls end waiting for their lane's stream
        // (the output copy, `synchronize`, event timing), and a lane's graphs drop before its
        // buffers, the lanes before the pass (field order of `Lane` and `GpuBackend`).
        unsafe { self.pass.enqueue(&ops, &plan, &lane.io, &lane.buffers) }
    }

    /// The outputs of a pass, and whether they are all finite (see [`Self::outputs`]).
    /// Runs a pass over `batch` on a free lane, its policy logits kept by `policy`.
    fn run<S: PolicySink>(&self, batch: &[InputPlanes], policy: S) -> GpuResult<(S::Output, bool)> {
        self.with_lane(|lane| self.run_on(lane, batch, policy))
    }

    fn run_on<S: PolicySink>(
        &self,
        lane: &mut Lane<P>,
        positions: &[InputPlanes],
        policy: S,
    ) -> GpuResult<(S::Output, bool)> {
        let size = self.pass_size(positions.len());
        self.upload(lane, positions, size)?;
        self.pass(lane, positions.len(), size)?;
        self.outputs(lane, positions.len(), size, policy)
    }

    /// Runs a pass over `batch` on a free lane and reads back its Q, D, M and the logits
    /// `picks` names: gathered on the device (`gather_picked`), so that the copy back is those
    /// alone instead of every logit (7.6 MB at batch 1024), where the picks fit its buffer;
    /// else picked out of the whole policy as it lands.
    fn run_picked(
        &self,
        batch: &[InputPlanes],
        picks: &PolicyPicks,
    ) -> GpuResult<(PickedOutput, bool)> {
        self.with_lane(|lane| {
            let size = self.pass_size(batch.len());
            self.upload(lane, batch, size)?;
            // Before the pass, as the inputs: an upload waits for its copy.
            let gathered = upload_picks(lane.device.as_ref(), &mut lane.io, picks)?;
            self.pass(lane, batch.len(), size)?;
            if gathered {
                self.gathered_outputs(lane, size, picks)
            } else {
                self.outputs(lane, batch.len(), size, PickedLogits::new(picks))
            }
        })
    }

    /// The size a pass over `batch` positions runs at: profiled passes time the size asked
    /// for, others run at its padded size.
    fn pass_size(&self, batch: usize) -> usize {
        if self.options.profile {
            batch
        } else {
            padded_batch(batch, self.options.max_batch)
        }
    }

    /// Uploads `positions` for a pass of `size`.
    fn upload(&self, lane: &mut Lane<P>, positions: &[InputPlanes], size: usize) -> GpuResult<()> {
        tracing::trace_span!("upload inputs", batch = positions.len())
            .in_scope(|| upload_inputs(lane.device.as_ref(), &mut lane.io, positions, size))
    }

    /// Enqueues the pass of `size` over the `batch` positions uploaded (profiled, or at its
    /// padded size).
    fn pass(&self, lane: &mut Lane<P>, batch: usize, size: usize) -> GpuResult<()> {
        if self.options.profile {
            self.profiled_pass(lane, batch)
        } else {
            self.pass_at(lane, size)
        }
    }

    /// Enqueues the pass of `size` positions on `lane`: its graph where captured, else an
    /// eager pass (which also picks the GEMM algorithms), then captured for the next calls.
    fn pass_at(&self, lane: &mut Lane<P>, size: usize) -> GpuResult<()> {
        match lane.graphs.get(&size) {
            Some(graph) => graph.launch(),
            None => {
                self.enqueue(lane, size, None)?;
                lane.tuned.insert(size);
                if self.options.graph {
                    self.capture(lane, size)?;
                }
                Ok(())
            }
        }
    }

    /// Runs a pass at every size that batches of up to `largest` positions run at and that
    /// `lane` has not run yet, on whatever inputs its buffers hold (the outputs are not read),
    /// and launches each new graph once.
    fn prepare_lane(&self, lane: &mut Lane<P>, largest: usize) -> GpuResult<()> {
        for size in padded_sizes(largest, self.options.max_batch) {
            let prepared = if self.options.graph {
                lane.graphs.contains_key(&size)
            } else {
                lane.tuned.contains(&size)
            };
            if !prepared {
                self.pass_at(lane, size)?;
                // Done here, the graph's upload stays out of the first call.
                first_launch(lane, size)?;
            }
        }
        lane.device.synchronize()
    }

    /// Captures the pass of `batch` positions into a graph (after an eager pass at that size).
    fn capture(&self, lane: &mut Lane<P>, batch: usize) -> GpuResult<()> {
        let (graph, ()) = capture_graph(lane.device.as_ref(), || self.enqueue(lane, batch, None))?;
        lane.graphs.insert(batch, graph);
        Ok(())
    }

    /// The GPU time of one uninstrumented pass (the captured graph, or eager without graphs).
    fn pass_time_ms(&self, lane: &mut Lane<P>, batch: usize) -> GpuResult<f64> {
        if self.options.graph && !lane.graphs.contains_key(&batch) {
            self.capture(lane, batch)?;
            // Its upload is not a pass to time.
            first_launch(lane, batch)?;
        }
        let start = lane.device.record_event()?;
        match lane.graphs.get(&batch) {
            Some(graph) => graph.launch()?,
            None => self.enqueue(lane, batch, None)?,
        }
        let end = lane.device.record_event()?;
        let ms = f64::from(lane.device.elapsed_ms(start, end)?);
        lane.device.clear_events();
        Ok(ms)
    }

    /// One profiled pass: from kernel timestamps of a graph replay where the device can trace
    /// (CUPTI), else with every operation bracketed by device events.
    fn profiled_pass(&self, lane: &mut Lane<P>, batch: usize) -> GpuResult<()> {
        if lane.tuned.insert(batch) {
            // An eager pass first: it picks the GEMM algorithms, which cannot be timed in a capture.
            self.enqueue(lane, batch, None)?;
        }
        let traced = if self.options.graph && lane.device.can_trace() {
            self.traced_pass(lane, batch)?
        } else {
            None
        };
        let profile = match traced {
            Some(profile) => profile,
            None => self.event_timed_pass(lane, batch)?,
        };
        for op in &profile.ops {
            tracing::debug!(
                op = op.op,
                layer = op.layer,
                batch,
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
    fn traced_pass(&self, lane: &mut Lane<P>, batch: usize) -> GpuResult<Option<PassProfile>> {
        let (graph, (marks, first, last)) = capture_graph(lane.device.as_ref(), || {
            let marks = OpEvents::new(Marker::CapturedWork);
            let first = lane.device.captured_work()?;
            self.enqueue(lane, batch, Some(&marks))?;
            Ok((marks, first, lane.device.captured_work()?))
        })?;
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
                batch,
                "the kernel trace does not match the graph's work nodes; timing with events instead"
            );
            return Ok(None);
        }
        let marks = marks.ops.into_inner().unwrap_or_else(|e| e.into_inner());
        let traced = attribute_trace(&marks, first, &activities);
        Ok(Some(PassProfile {
            batch,
            pass_ms: self.pass_time_ms(lane, batch)?,
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
    fn event_timed_pass(&self, lane: &mut Lane<P>, batch: usize) -> GpuResult<PassProfile> {
        let events = OpEvents::new(Marker::Event);
        if self.options.graph {
            lane.device.begin_capture()?;
        }
        let recorded = (|| -> GpuResult<(usize, usize)> {
            let first = lane.device.record_event()?;
            self.enqueue(lane, batch, Some(&events))?;
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
            batch,
            pass_ms: self.pass_time_ms(lane, batch)?,
            instrumented_ms,
            timing: PassTiming::DeviceEvents,
            ops,
            kernels: Vec::new(),
        })
    }

    /// The residual stream after each layer of the body, where the network reports it
    /// (eager passes).
    fn layer_outputs_on(
        &self,
        lane: &mut Lane<P>,
        batch: &[InputPlanes],
    ) -> GpuResult<Option<Vec<Vec<f32>>>> {
        upload_inputs(lane.device.as_ref(), &mut lane.io, batch, batch.len())?;
        let plan = self.plan(batch.len())?;
        let ops = self.ops(lane.device.as_ref(), (*plan).as_ref(), None);
        // SAFETY: as in `enqueue` (the caller checked `batch.len() ≤ max_batch`); nothing is
        // captured, and the pass synchronises before it returns.
        unsafe { self.pass.layer_outputs(&ops, &lane.io, &lane.buffers) }
    }

    /// Downloads the outputs of the pass over `size` positions for its first `batch`; the
    /// flag says whether all are finite. The one copy is enqueued right behind the pass, so
    /// waiting for it is waiting for the pass, with no second round trip between the pass's
    /// end and the copy's start; each piece is taken apart as it lands.
    fn outputs<S: PolicySink>(
        &self,
        lane: &Lane<P>,
        batch: usize,
        size: usize,
        policy: S,
    ) -> GpuResult<(S::Output, bool)> {
        let _span = tracing::trace_span!("wait for the pass and its outputs", batch).entered();
        let mut reader = OutputReader::new(batch, size, policy);
        let device = lane.device.as_ref();
        lane.io
            .outputs
            .copy_to_host_with(device, 0, reader.bytes(), &mut |landed| reader.take(landed))?;
        Ok(reader.finish())
    }

    /// Gathers the batch's Q, D, M and the logits `picks` names out of the pass of `size`
    /// (the picks uploaded by `upload_picks`) and waits for them.
    fn gathered_outputs(
        &self,
        lane: &Lane<P>,
        size: usize,
        picks: &PolicyPicks,
    ) -> GpuResult<(PickedOutput, bool)> {
        let _span =
            tracing::trace_span!("wait for the pass and its picks", batch = picks.len()).entered();
        let device = lane.device.as_ref();
        let (ends, indices) = lane.io.picks(picks.len());
        let mut reader = GatheredReader::new(picks);
        // SAFETY: `outputs` holds the pass's `size` positions of outputs, `picks` the batch's
        // ends and indices (uploaded before the pass, in stream order), `picked` room for
        // `PICKS_PER_POSITION` a position (checked by `upload_picks`).
        unsafe {
            launchers::gather_picked(
                device,
                Launch::elements(reader.bytes() / size_of::<f32>()),
                lane.io.outputs.ptr(),
                size as i32,
                picks.len() as i32,
                ends,
                indices,
                picks.total() as i32,
                lane.io.picked.ptr(),
            )?;
        }
        lane.io
            .picked
            .copy_to_host_with(device, 0, reader.bytes(), &mut |landed| reader.take(landed))?;
        Ok(reader.finish())
    }
}

/// Launches `lane`'s graph for `size`, where there is one, for the first time: the launch that
/// uploads it (graphs are not uploaded at capture; see `gpu::cuda::capture::end`).
fn first_launch<P: NetworkPass>(lane: &Lane<P>, size: usize) -> GpuResult<()> {
    lane.graphs
        .get(&size)
        .map_or(Ok(()), |graph| graph.launch())
}

impl<P: NetworkPass> Backend for GpuBackend<P> {
    fn name(&self) -> &str {
        &self.name
    }

    fn attributes(&self) -> BackendAttributes {
        BackendAttributes {
            has_wdl: self.pass.format().wdl,
            has_mlh: self.pass.has_moves_left(),
            runs_on_cpu: false,
            max_batch: self.options.max_batch,
            recommended_batch: 2 * self.device.info().multiprocessors as usize,
            recommended_threads: 2,
        }
    }

    fn input_format(&self) -> InputFormat {
        self.pass.format().input
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

    fn prepare(&self, max_batch: usize, callers: usize) -> Result<(), BackendError> {
        if self.options.profile {
            return Ok(());
        }
        // Holding every lane taken so far makes the pool hand out (or make) another one.
        let held: Vec<_> = (0..callers.clamp(1, self.options.lanes))
            .map(|_| self.take_lane())
            .collect::<GpuResult<_>>()
            .map_err(|error| self.gpu_error(error))?;
        held.iter()
            .try_for_each(|taken| {
                let lane = taken.lane();
                let mut lane = lane.lock().unwrap_or_else(|e| e.into_inner());
                self.prepare_lane(&mut lane, max_batch)
            })
            .map_err(|error| self.gpu_error(error))
    }

    fn layer_outputs(&self, batch: &[InputPlanes]) -> Result<Option<Vec<Vec<f32>>>, BackendError> {
        BackendError::check_batch_size(&self.name, batch.len(), self.options.max_batch)?;
        self.with_lane(|lane| self.layer_outputs_on(lane, batch))
            .map_err(|error| self.gpu_error(error))
    }

    fn profile_reports(&self) -> Vec<ProfileReport> {
        if !self.options.profile {
            return Vec::new();
        }
        vec![{
            let mut passes = Vec::new();
            self.each_lane(|lane| passes.extend(lane.profile.iter().cloned()));
            let plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
            let mut sizes: Vec<usize> = passes.iter().map(|p| p.batch).collect();
            sizes.sort_unstable();
            sizes.dedup();
            ProfileReport {
                device: self.device.info().name.clone(),
                gpu: Some(self.options.gpu),
                plans: sizes
                    .iter()
                    .filter_map(|size| plans.get(size))
                    .map(ToString::to_string)
                    .collect(),
                passes,
            }
        }]
    }

    fn evaluate(&self, batch: &[InputPlanes]) -> Result<BatchOutput, BackendError> {
        BackendError::check_batch_size(&self.name, batch.len(), self.options.max_batch)?;
        if batch.is_empty() {
            return Ok(BatchOutput::default());
        }
        let (out, finite) = self
            .run(batch, AllLogits::new(batch.len()))
            .map_err(|error| self.gpu_error(error))?;
        if !finite {
            // Only now is it worth finding which output and position.
            check_outputs(&out).map_err(|error| self.non_finite(error))?;
        }
        Ok(out)
    }

    fn evaluate_picked(
        &self,
        batch: &[InputPlanes],
        picks: &PolicyPicks,
    ) -> Result<PickedOutput, BackendError> {
        BackendError::check_picked(&self.name, batch.len(), self.options.max_batch, picks.len())?;
        if batch.is_empty() {
            return Ok(PickedOutput::default());
        }
        let (out, finite) = self
            .run_picked(batch, picks)
            .map_err(|error| self.gpu_error(error))?;
        if !finite {
            out.check_finite().map_err(|error| self.non_finite(error))?;
        }
        Ok(out)
    }
}
