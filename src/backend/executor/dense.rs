//! Dense layers on the device in fp16, as both network passes upload them.

use half::f16;

use crate::gpu::{DevicePtr, GpuBuffer, GpuDevice, GpuError, GpuResult};
use crate::weights::network::Dense;

/// A dense layer on the device: `W[outputs][inputs]` row-major, optional `bias[outputs]`.
pub struct DenseGpu {
    pub inputs: usize,
    pub outputs: usize,
    pub w: GpuBuffer,
    pub b: Option<GpuBuffer>,
}

impl DenseGpu {
    pub fn bias(&self) -> Option<DevicePtr> {
        self.b.as_ref().map(GpuBuffer::ptr)
    }

    /// The bias of a layer whose kernel needs one (`layer` names it in the error).
    pub fn required_bias(&self, layer: &'static str) -> GpuResult<DevicePtr> {
        self.bias().ok_or_else(|| GpuError::Call {
            call: layer,
            detail: "the layer has no bias, which its kernel needs".to_owned(),
        })
    }

    /// A layer from weights already in the executor's order (`[outputs][inputs]`).
    pub fn upload(
        device: &dyn GpuDevice,
        (inputs, outputs): (usize, usize),
        weights: &[f32],
        biases: Option<&[f32]>,
    ) -> GpuResult<Self> {
        debug_assert_eq!(weights.len(), inputs * outputs);
        Ok(Self {
            inputs,
            outputs,
            w: upload_f16(device, weights)?,
            b: biases.map(|b| upload_f16(device, b)).transpose()?,
        })
    }
}

/// `values` as fp16 in a new device buffer.
pub fn upload_f16(device: &dyn GpuDevice, values: &[f32]) -> GpuResult<GpuBuffer> {
    let bytes: Vec<u8> = values
        .iter()
        .flat_map(|&v| f16::from_f32(v).to_le_bytes())
        .collect();
    let mut buffer = device.alloc(bytes.len())?;
    buffer.copy_from_host(device, 0, &bytes)?;
    Ok(buffer)
}

/// `values` as little-endian bytes in a new device buffer (index maps).
pub fn upload_i16(device: &dyn GpuDevice, values: &[i16]) -> GpuResult<GpuBuffer> {
    let bytes: Vec<u8> = values.iter().flat_map(|i| i.to_le_bytes()).collect();
    let mut buffer = device.alloc(bytes.len())?;
    buffer.copy_from_host(device, 0, &bytes)?;
    Ok(buffer)
}

pub fn dense(device: &dyn GpuDevice, d: &Dense) -> GpuResult<DenseGpu> {
    DenseGpu::upload(
        device,
        (d.inputs, d.outputs),
        &d.weights,
        d.biases.as_deref(),
    )
}

/// Dense layers with the same inputs stacked along the outputs (`[Σ out][in]`).
pub fn stacked(device: &dyn GpuDevice, parts: &[&Dense]) -> GpuResult<DenseGpu> {
    let weights: Vec<f32> = parts
        .iter()
        .flat_map(|d| d.weights.iter().copied())
        .collect();
    let biases: Vec<f32> = parts
        .iter()
        .flat_map(|d| d.biases.iter().flatten().copied())
        .collect();
    DenseGpu::upload(
        device,
        (parts[0].inputs, parts.iter().map(|d| d.outputs).sum()),
        &weights,
        Some(&biases),
    )
}
