//! Element encodings of a `Weights.Layer`: LINEAR16 (lc0's 16-bit quantisation between the
//! layer's min and max), FLOAT16, BFLOAT16 and FLOAT32, all little endian.

use bytes::Bytes;
use half::{bf16, f16};

use super::proto::weights::{Layer, layer::Encoding as ProtoEncoding};

/// How a layer's elements are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerEncoding {
    Linear16,
    Float16,
    BFloat16,
    Float32,
}

impl LayerEncoding {
    pub const ALL: [LayerEncoding; 4] = [
        LayerEncoding::Linear16,
        LayerEncoding::Float16,
        LayerEncoding::BFloat16,
        LayerEncoding::Float32,
    ];

    /// The name used on the command line (`gen-net --encoding`).
    pub fn name(self) -> &'static str {
        match self {
            LayerEncoding::Linear16 => "linear16",
            LayerEncoding::Float16 => "float16",
            LayerEncoding::BFloat16 => "bfloat16",
            LayerEncoding::Float32 => "float32",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.name() == name)
    }

    fn element_size(self) -> usize {
        match self {
            LayerEncoding::Float32 => 4,
            _ => 2,
        }
    }

    fn to_proto(self) -> ProtoEncoding {
        match self {
            LayerEncoding::Linear16 => ProtoEncoding::Linear16,
            LayerEncoding::Float16 => ProtoEncoding::Float16,
            LayerEncoding::BFloat16 => ProtoEncoding::Bfloat16,
            LayerEncoding::Float32 => ProtoEncoding::Float32,
        }
    }

    /// The encoding a layer declares; an absent field means LINEAR16, as in lc0.
    pub(crate) fn of_layer(layer: &Layer) -> Result<Self, CodecError> {
        let Some(raw) = layer.encoding else {
            return Ok(LayerEncoding::Linear16);
        };
        match ProtoEncoding::try_from(raw) {
            Ok(ProtoEncoding::Linear16) => Ok(LayerEncoding::Linear16),
            Ok(ProtoEncoding::Float16) => Ok(LayerEncoding::Float16),
            Ok(ProtoEncoding::Bfloat16) => Ok(LayerEncoding::BFloat16),
            Ok(ProtoEncoding::Float32) => Ok(LayerEncoding::Float32),
            Ok(ProtoEncoding::UnknownEncoding) | Err(_) => Err(CodecError::UnknownEncoding(raw)),
        }
    }
}

/// A layer whose bytes cannot be turned into finite numbers.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CodecError {
    #[error("unknown layer encoding {0}")]
    UnknownEncoding(i32),
    #[error("{len} bytes of {encoding} data is not a whole number of {size}-byte elements")]
    RaggedLength {
        len: usize,
        encoding: &'static str,
        size: usize,
    },
    #[error("LINEAR16 range [{min}, {max}] is not a finite, ordered pair")]
    BadRange { min: f32, max: f32 },
    #[error("element {index} is {value}; weights must be finite")]
    NonFinite { index: usize, value: f32 },
}

/// Dequantises LINEAR16: `θ = u / 65535`, `value = min·(1−θ) + max·θ` (lc0 master's form).
pub fn linear16_value(u: u16, min: f32, max: f32) -> f32 {
    let theta = f32::from(u) / 65535.0;
    min * (1.0 - theta) + max * theta
}

/// The number of elements a layer holds, without decoding them.
pub fn element_count(layer: &Layer) -> Result<usize, CodecError> {
    let size = LayerEncoding::of_layer(layer)?.element_size();
    Ok(layer.params.as_ref().map_or(0, |p| p.len() / size))
}

/// Decodes a layer's elements to f32. An absent `params` is an empty layer.
pub fn decode_layer(layer: &Layer) -> Result<Vec<f32>, CodecError> {
    let encoding = LayerEncoding::of_layer(layer)?;
    let bytes: &[u8] = layer.params.as_deref().unwrap_or_default();
    let size = encoding.element_size();
    if !bytes.len().is_multiple_of(size) {
        return Err(CodecError::RaggedLength {
            len: bytes.len(),
            encoding: encoding.name(),
            size,
        });
    }
    let halves = || {
        bytes
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
    };
    let values: Vec<f32> = match encoding {
        LayerEncoding::Linear16 => {
            let (min, max) = (layer.min_val(), layer.max_val());
            if !(min.is_finite() && max.is_finite() && min <= max) {
                return Err(CodecError::BadRange { min, max });
            }
            halves().map(|u| linear16_value(u, min, max)).collect()
        }
        LayerEncoding::Float16 => halves().map(|u| f16::from_bits(u).to_f32()).collect(),
        LayerEncoding::BFloat16 => halves().map(|u| bf16::from_bits(u).to_f32()).collect(),
        LayerEncoding::Float32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
    };
    if let Some(index) = values.iter().position(|v| !v.is_finite()) {
        return Err(CodecError::NonFinite {
            index,
            value: values[index],
        });
    }
    Ok(values)
}

/// Encodes finite values as a layer. `dims` is informational (lc0 ignores it).
pub fn encode_layer(values: &[f32], encoding: LayerEncoding, dims: &[usize]) -> Layer {
    let mut bytes = Vec::with_capacity(values.len() * encoding.element_size());
    let mut layer = Layer {
        encoding: Some(encoding.to_proto() as i32),
        dims: dims.iter().map(|&d| d as u32).collect(),
        ..Layer::default()
    };
    match encoding {
        LayerEncoding::Linear16 => {
            let min = values.iter().copied().fold(f32::INFINITY, f32::min);
            let max = values.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let (min, max) = if values.is_empty() {
                (0.0, 0.0)
            } else {
                (min, max)
            };
            let range = max - min;
            for &v in values {
                let u = if range > 0.0 {
                    ((v - min) / range * 65535.0).round().clamp(0.0, 65535.0) as u16
                } else {
                    0
                };
                bytes.extend_from_slice(&u.to_le_bytes());
            }
            layer.min_val = Some(min);
            layer.max_val = Some(max);
        }
        LayerEncoding::Float16 => {
            for &v in values {
                bytes.extend_from_slice(&f16::from_f32(v).to_le_bytes());
            }
        }
        LayerEncoding::BFloat16 => {
            for &v in values {
                bytes.extend_from_slice(&bf16::from_f32(v).to_le_bytes());
            }
        }
        LayerEncoding::Float32 => {
            for &v in values {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
        }
    }
    layer.params = Some(Bytes::from(bytes));
    layer
}

/// The largest error a value may have after an encode/decode round trip in `encoding`, for a
/// layer whose values span `[min, max]`: half a quantisation step for LINEAR16 (plus float
/// rounding), half an ULP of the format otherwise.
pub fn round_trip_tolerance(encoding: LayerEncoding, value: f32, min: f32, max: f32) -> f32 {
    match encoding {
        LayerEncoding::Linear16 => {
            let step = (max - min) / 65535.0;
            0.5 * step + 4.0 * f32::EPSILON * max.abs().max(min.abs())
        }
        LayerEncoding::Float16 => value.abs() * 2f32.powi(-11) + 2f32.powi(-25),
        LayerEncoding::BFloat16 => value.abs() * 2f32.powi(-8),
        LayerEncoding::Float32 => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn linear16_layer(units: &[u16], min: f32, max: f32) -> Layer {
        let bytes: Vec<u8> = units.iter().flat_map(|u| u.to_le_bytes()).collect();
        Layer {
            min_val: Some(min),
            max_val: Some(max),
            params: Some(Bytes::from(bytes)),
            ..Layer::default()
        }
    }

    #[test]
    fn linear16_hand_computed_values() {
        // min = -2, max = 6, range 8: u = 0 → -2, 65535 → 6, 32768 → -2 + 8·32768/65535.
        let layer = linear16_layer(&[0, 65535, 32768, 16384, 1], -2.0, 6.0);
        let v = decode_layer(&layer).unwrap();
        assert_eq!(v[0], -2.0);
        assert_eq!(v[1], 6.0);
        assert!((v[2] - 2.000_061).abs() < 1e-6, "{}", v[2]);
        // 16384 of 65535 over [-2, 6]: -2 + 8·16384/65535 = 2/65535.
        assert!((v[3] - 3.0518e-5).abs() < 1e-7, "{}", v[3]);
        assert!((v[4] - (-2.0 + 8.0 / 65535.0)).abs() < 1e-6, "{}", v[4]);
    }

    #[test]
    fn linear16_with_equal_bounds_is_constant() {
        let layer = linear16_layer(&[0, 123, 65535], 0.25, 0.25);
        assert_eq!(decode_layer(&layer).unwrap(), vec![0.25; 3]);
    }

    #[test]
    fn float_encodings_hand_computed() {
        // f16 0x3c00 = 1.0, 0xc000 = -2.0, 0x0001 = 2^-24 (subnormal kept).
        let layer = Layer {
            encoding: Some(ProtoEncoding::Float16 as i32),
            params: Some(Bytes::from_static(&[0x00, 0x3c, 0x00, 0xc0, 0x01, 0x00])),
            ..Layer::default()
        };
        assert_eq!(
            decode_layer(&layer).unwrap(),
            vec![1.0, -2.0, 2f32.powi(-24)]
        );
        // bf16 0x3fc0 = 1.5.
        let layer = Layer {
            encoding: Some(ProtoEncoding::Bfloat16 as i32),
            params: Some(Bytes::from_static(&[0xc0, 0x3f])),
            ..Layer::default()
        };
        assert_eq!(decode_layer(&layer).unwrap(), vec![1.5]);
        let layer = Layer {
            encoding: Some(ProtoEncoding::Float32 as i32),
            params: Some(Bytes::from(0.1f32.to_le_bytes().to_vec())),
            ..Layer::default()
        };
        assert_eq!(decode_layer(&layer).unwrap(), vec![0.1]);
    }

    #[test]
    fn bad_layers_are_errors() {
        let odd = linear16_layer(&[1], 0.0, 1.0);
        let odd = Layer {
            params: Some(Bytes::from(odd.params.unwrap()[..1].to_vec())),
            ..odd
        };
        assert!(matches!(
            decode_layer(&odd),
            Err(CodecError::RaggedLength { .. })
        ));
        let nan_range = linear16_layer(&[1], f32::NAN, 1.0);
        assert!(matches!(
            decode_layer(&nan_range),
            Err(CodecError::BadRange { .. })
        ));
        let reversed = linear16_layer(&[1], 2.0, 1.0);
        assert!(matches!(
            decode_layer(&reversed),
            Err(CodecError::BadRange { .. })
        ));
        let unknown = Layer {
            encoding: Some(17),
            ..Layer::default()
        };
        assert_eq!(decode_layer(&unknown), Err(CodecError::UnknownEncoding(17)));
        let inf = Layer {
            encoding: Some(ProtoEncoding::Float16 as i32),
            params: Some(Bytes::from_static(&[0x00, 0x00, 0x00, 0x7c])),
            ..Layer::default()
        };
        assert!(matches!(
            decode_layer(&inf),
            Err(CodecError::NonFinite { index: 1, .. })
        ));
    }

    #[test]
    fn every_encoding_round_trips_within_tolerance() {
        let values: Vec<f32> = (0..1000)
            .map(|i| ((i as f32) * 0.37).sin() * 3.0 - 0.5)
            .collect();
        let (min, max) = (-3.5f32, 2.5f32);
        for encoding in LayerEncoding::ALL {
            let back = decode_layer(&encode_layer(&values, encoding, &[1000])).unwrap();
            for (a, b) in values.iter().zip(&back) {
                let tol = round_trip_tolerance(encoding, *a, min, max);
                assert!((a - b).abs() <= tol, "{encoding:?}: {a} -> {b} (tol {tol})");
            }
        }
    }
}
