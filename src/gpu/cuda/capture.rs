//! Graph capture on a CUDA stream: whether a capture is running, the graph it ends in, how
//! much traced work it holds, and timing events that stay timing points inside a capture.

use std::sync::Arc;

use cudarc::driver::sys::{
    self as d, CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode, CUstreamCaptureStatus,
};
use cudarc::driver::{CudaContext, CudaEvent, CudaGraph, CudaStream};

use crate::gpu::{GpuError, GpuGraph, GpuResult, library_error};

/// A CUDA graph, replayed on the stream it was captured on.
struct Graph(CudaGraph);

// SAFETY: the graph executable is only launched by the backend that owns it, under its lock.
unsafe impl Send for Graph {}

impl GpuGraph for Graph {
    fn launch(&self) -> GpuResult<()> {
        self.0
            .launch()
            .map_err(library_error("CUDA driver", "cuGraphLaunch"))
    }
}

/// Whether `stream` is capturing a graph.
pub fn is_capturing(stream: &CudaStream) -> GpuResult<bool> {
    Ok(stream
        .capture_status()
        .map_err(library_error("CUDA driver", "cuStreamIsCapturing"))?
        != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
}

/// Starts capturing the work this thread enqueues on `stream`.
pub fn begin(stream: &CudaStream) -> GpuResult<()> {
    stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .map_err(library_error("CUDA driver", "cuStreamBeginCapture"))
}

/// Ends the capture on `stream`: the graph, instantiated. It uploads on its first launch, not
/// here: on an H100 (driver 580) a graph uploaded with `cuGraphUpload` and not yet launched
/// made every other graph of the process ~70 µs slower per launch until its own first launch
/// (docs/performance.md, "Graphs").
pub fn end(stream: &Arc<CudaStream>) -> GpuResult<Box<dyn GpuGraph>> {
    let graph = stream
        .end_capture(CUgraphInstantiate_flags(0))
        .map_err(|error| {
            if error.0 == d::CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED {
                GpuError::CaptureInvalidated {
                    call: "cuStreamEndCapture",
                }
            } else {
                library_error("CUDA driver", "cuStreamEndCapture")(error)
            }
        })?
        .ok_or_else(|| GpuError::Call {
            call: "cuStreamEndCapture",
            detail: "nothing was captured".to_owned(),
        })?;
    Ok(Box::new(Graph(graph)))
}

/// A timing event recorded on `stream`. Inside a capture it is recorded "external": a real
/// timing point of the graph (an event-record node), not only a capture-internal dependency
/// (the flag is invalid outside a capture).
pub fn timing_event(ctx: &Arc<CudaContext>, stream: &CudaStream) -> GpuResult<CudaEvent> {
    let event = ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .map_err(library_error("CUDA driver", "cuEventCreate"))?;
    if is_capturing(stream)? {
        let external = d::CUevent_record_flags::CU_EVENT_RECORD_EXTERNAL as u32;
        // SAFETY: a valid event and stream of this context.
        unsafe { d::cuEventRecordWithFlags(event.cu_event(), stream.cu_stream(), external) }
            .result()
            .map_err(library_error("CUDA driver", "cuEventRecordWithFlags"))?;
    } else {
        event
            .record(stream)
            .map_err(library_error("CUDA driver", "cuEventRecord"))?;
    }
    Ok(event)
}

/// How many nodes of the running capture do work that shows in the activity trace (kernels,
/// copies and fills; not empty, event or wait nodes).
pub fn captured_work(stream: &CudaStream) -> GpuResult<usize> {
    let graph = capture_graph(stream)?;
    let mut count = 0usize;
    // SAFETY: the capture's graph, alive while the capture is; a null array asks for the count.
    unsafe { d::cuGraphGetNodes(graph, std::ptr::null_mut(), &mut count) }
        .result()
        .map_err(library_error("CUDA driver", "cuGraphGetNodes"))?;
    if count == 0 {
        return Ok(0);
    }
    let mut nodes = vec![std::ptr::null_mut(); count];
    // SAFETY: `nodes` has room for `count` handles.
    unsafe { d::cuGraphGetNodes(graph, nodes.as_mut_ptr(), &mut count) }
        .result()
        .map_err(library_error("CUDA driver", "cuGraphGetNodes"))?;
    let mut traced = 0;
    for &node in &nodes[..count.min(nodes.len())] {
        let mut kind = d::CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
        // SAFETY: a node of the live capture graph.
        unsafe { d::cuGraphNodeGetType(node, &mut kind) }
            .result()
            .map_err(library_error("CUDA driver", "cuGraphNodeGetType"))?;
        use d::CUgraphNodeType as T;
        if matches!(
            kind,
            T::CU_GRAPH_NODE_TYPE_KERNEL
                | T::CU_GRAPH_NODE_TYPE_MEMCPY
                | T::CU_GRAPH_NODE_TYPE_MEMSET
        ) {
            traced += 1;
        } else {
            tracing::trace!(?kind, "captured node without traced work");
        }
    }
    Ok(traced)
}

/// The graph the running capture on `stream` builds.
fn capture_graph(stream: &CudaStream) -> GpuResult<d::CUgraph> {
    let mut status = CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    let (mut id, mut graph) = (0u64, std::ptr::null_mut());
    let (mut deps, mut edges, mut count) = (std::ptr::null(), std::ptr::null(), 0usize);
    // SAFETY: a live stream; every out-pointer is valid for one value.
    unsafe {
        d::cuStreamGetCaptureInfo_v3(
            stream.cu_stream(),
            &mut status,
            &mut id,
            &mut graph,
            &mut deps,
            &mut edges,
            &mut count,
        )
    }
    .result()
    .map_err(library_error("CUDA driver", "cuStreamGetCaptureInfo"))?;
    if status != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_ACTIVE || graph.is_null() {
        return Err(GpuError::Call {
            call: "cuStreamGetCaptureInfo",
            detail: "the stream is not capturing".to_owned(),
        });
    }
    Ok(graph)
}
