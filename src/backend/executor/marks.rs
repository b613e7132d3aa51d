//! How a profiled pass marks where its operations begin and end, and what each costs (FLOPs
//! and compulsory bytes, for the profile's rates).

use crate::gpu::{GpuDevice, GpuResult};

use super::dense::DenseGpu;
use super::io::HALF;

/// An operation of a profiled pass between two marks.
#[derive(Debug, Clone, Copy)]
pub struct OpEvent {
    pub op: &'static str,
    pub layer: Option<usize>,
    pub cost: Cost,
    pub start: usize,
    pub end: usize,
}

/// How a profiled pass marks where its operations begin and end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marker {
    /// A timing event on the stream (inside a capture: an event-record node); the mark is the
    /// event's index.
    Event,
    /// The number of graph nodes captured so far; kernel timestamps are matched to the nodes
    /// after a replay.
    CapturedWork,
}

/// The marked operations of a profiled pass.
#[derive(Debug)]
pub struct OpEvents {
    pub marker: Marker,
    pub ops: std::sync::Mutex<Vec<OpEvent>>,
}

impl OpEvents {
    pub fn new(marker: Marker) -> Self {
        Self {
            marker,
            ops: Default::default(),
        }
    }

    pub fn mark(&self, device: &dyn GpuDevice) -> GpuResult<usize> {
        match self.marker {
            Marker::Event => device.record_event(),
            Marker::CapturedWork => device.captured_work(),
        }
    }
}

/// FLOPs and compulsory bytes of an operation (for the profile's rates).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cost {
    pub flops: u64,
    pub bytes: u64,
}

impl std::ops::Add for Cost {
    type Output = Cost;
    fn add(self, o: Cost) -> Cost {
        Cost {
            flops: self.flops + o.flops,
            bytes: self.bytes + o.bytes,
        }
    }
}

/// A dense layer on `rows` fp16 rows: 2·rows·in·out FLOPs; input, weights, output bytes.
pub fn linear_cost(layer: &DenseGpu, rows: usize) -> Cost {
    let (i, o, r) = (layer.inputs as u64, layer.outputs as u64, rows as u64);
    Cost {
        flops: 2 * r * i * o,
        bytes: HALF as u64 * (r * i + i * o + r * o),
    }
}

/// A pass over `elements` fp16 values that reads `reads` and writes one tensor of that size.
pub fn pass_cost(elements: usize, reads: u64) -> Cost {
    Cost {
        flops: 8 * elements as u64,
        bytes: HALF as u64 * elements as u64 * (reads + 1),
    }
}
