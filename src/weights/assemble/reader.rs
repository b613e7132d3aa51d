//! The tensor primitives every layer is read with: a present layer, its length, a vector,
//! a matrix, a dense layer, a LayerNorm and an FFN, each checked against the shape it must
//! have and failing with an error that names the file and the field.

use super::FileInfo;
use crate::weights::codec::{LayerEncoding, decode_layer, element_count};
use crate::weights::container::min_version;
use crate::weights::error::WeightsError;
use crate::weights::network::{Dense, Ffn, LayerNorm};
use crate::weights::proto::Net;
use crate::weights::proto::weights::{self as pw, Layer};

/// `base.name`: the path of a field, as errors name it.
pub(super) fn join(base: &str, name: &str) -> String {
    format!("{base}.{name}")
}

/// Reads layers of one file, turning every problem into an error that names file and field.
pub(super) struct Reader<'a> {
    pub(super) file: &'a str,
    /// The encodings of the layers read so far (for `lc0rs info`); shared by the threads that
    /// decode encoder layers.
    encodings: std::sync::Mutex<Vec<LayerEncoding>>,
}

impl Reader<'_> {
    /// A reader of the file named `file` that has read no layer yet.
    pub(super) fn new(file: &str) -> Reader<'_> {
        Reader {
            file,
            encodings: Default::default(),
        }
    }

    pub(super) fn field_error(&self, field: &str, problem: impl Into<String>) -> WeightsError {
        WeightsError::Field {
            file: self.file.to_owned(),
            field: field.to_owned(),
            problem: problem.into(),
        }
    }

    pub(super) fn unsupported(&self, what: impl Into<String>) -> WeightsError {
        WeightsError::Unsupported {
            file: self.file.to_owned(),
            what: what.into(),
        }
    }

    /// Reads a raw protobuf enum value, refusing values the schema does not know.
    pub(super) fn enum_value<E>(&self, field: &str, raw: Option<i32>) -> Result<E, WeightsError>
    where
        E: TryFrom<i32> + Default,
    {
        match raw {
            None => Ok(E::default()),
            Some(v) => {
                E::try_from(v).map_err(|_| self.field_error(field, format!("unknown value {v}")))
            }
        }
    }

    /// What the file says about itself, with the encodings of the layers read.
    pub(super) fn file_info(self, net: &Net) -> FileInfo {
        FileInfo {
            min_version: min_version(net),
            license: net.license.clone(),
            layer_encodings: self
                .encodings
                .into_inner()
                .unwrap_or_else(|e| e.into_inner()),
        }
    }

    fn present<'l>(
        &self,
        field: &str,
        layer: Option<&'l Layer>,
    ) -> Result<&'l Layer, WeightsError> {
        layer
            .filter(|l| l.params.as_ref().is_some_and(|p| !p.is_empty()))
            .ok_or_else(|| self.field_error(field, "missing"))
    }

    /// The element count of a layer that must be present and non-empty.
    pub(super) fn len(&self, field: &str, layer: Option<&Layer>) -> Result<usize, WeightsError> {
        let layer = self.present(field, layer)?;
        element_count(layer).map_err(|error| WeightsError::Layer {
            file: self.file.to_owned(),
            field: field.to_owned(),
            error,
        })
    }

    /// Decodes a layer that must hold exactly `expected` values (`shape` describes them).
    pub(super) fn tensor(
        &self,
        field: &str,
        layer: Option<&Layer>,
        expected: usize,
        shape: &dyn Fn() -> String,
    ) -> Result<Vec<f32>, WeightsError> {
        let layer = self.present(field, layer)?;
        if let Ok(encoding) = LayerEncoding::of_layer(layer) {
            let mut seen = self.encodings.lock().unwrap_or_else(|e| e.into_inner());
            if !seen.contains(&encoding) {
                seen.push(encoding);
            }
        }
        let values = decode_layer(layer).map_err(|error| WeightsError::Layer {
            file: self.file.to_owned(),
            field: field.to_owned(),
            error,
        })?;
        if values.len() != expected {
            return Err(WeightsError::Shape {
                file: self.file.to_owned(),
                field: field.to_owned(),
                expected,
                shape: shape(),
                found: values.len(),
            });
        }
        Ok(values)
    }

    pub(super) fn vector(
        &self,
        field: &str,
        layer: Option<&Layer>,
        len: usize,
    ) -> Result<Vec<f32>, WeightsError> {
        self.tensor(field, layer, len, &|| format!("[{len}]"))
    }

    pub(super) fn matrix(
        &self,
        field: &str,
        layer: Option<&Layer>,
        outputs: usize,
        inputs: usize,
    ) -> Result<Vec<f32>, WeightsError> {
        self.tensor(field, layer, outputs * inputs, &|| {
            format!("[{outputs}][{inputs}]")
        })
    }

    /// A dense layer `base.{w}` / `base.{b}` with the given output and input sizes.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn dense(
        &self,
        base: &str,
        (w_name, w): (&str, Option<&Layer>),
        (b_name, b): (&str, Option<&Layer>),
        outputs: usize,
        inputs: usize,
    ) -> Result<Dense, WeightsError> {
        Ok(Dense {
            inputs,
            outputs,
            biases: Some(self.vector(&join(base, b_name), b, outputs)?),
            weights: self.matrix(&join(base, w_name), w, outputs, inputs)?,
        })
    }

    /// A dense layer whose output size is its bias length (how lc0 derives it).
    pub(super) fn dense_sized_by_bias(
        &self,
        base: &str,
        w: (&str, Option<&Layer>),
        b: (&str, Option<&Layer>),
        inputs: usize,
    ) -> Result<Dense, WeightsError> {
        let outputs = self.len(&join(base, b.0), b.1)?;
        self.dense(base, w, b, outputs, inputs)
    }

    pub(super) fn layer_norm(
        &self,
        base: &str,
        (g_name, g): (&str, Option<&Layer>),
        (b_name, b): (&str, Option<&Layer>),
        len: usize,
        eps: f32,
    ) -> Result<LayerNorm, WeightsError> {
        Ok(LayerNorm {
            gammas: self.vector(&join(base, g_name), g, len)?,
            betas: self.vector(&join(base, b_name), b, len)?,
            eps,
        })
    }

    pub(super) fn ffn(
        &self,
        base: &str,
        ffn: Option<&pw::Ffn>,
        width: usize,
        dff: usize,
    ) -> Result<Ffn, WeightsError> {
        let ffn = ffn.ok_or_else(|| self.field_error(base, "missing"))?;
        Ok(Ffn {
            dense1: self.dense(
                base,
                ("dense1_w", ffn.dense1_w.as_ref()),
                ("dense1_b", ffn.dense1_b.as_ref()),
                dff,
                width,
            )?,
            dense2: self.dense(
                base,
                ("dense2_w", ffn.dense2_w.as_ref()),
                ("dense2_b", ffn.dense2_b.as_ref()),
                width,
                dff,
            )?,
        })
    }
}
