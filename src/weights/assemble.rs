//! From the decoded `pblczero.Net` to a validated [`Network`]: resolves the formats, derives
//! every dimension from the data as lc0 does (lc0-network.md §3.6) and checks each layer's
//! length against its derived shape, naming the field on any mismatch.

use super::codec::{LayerEncoding, decode_layer, element_count};
use super::container::{Version, min_version};
use super::error::WeightsError;
use super::fixups::fix_older_weights_file;
use super::format::{Activation, HeadLayout, InputEmbedding, InputFormat, NetFormat};
use super::model::Model;
use super::network::{
    Dense, DenseEmbeddingParts, Dims, Embedding, EncoderLayer, Ffn, InputGating, LayerNorm,
    MovesLeftHead, Named, Network, PolicyHead, Smolgen, SmolgenDims, ValueHead, residual_alpha,
};
use super::proto::network_format::{
    ActivationFunction, DefaultActivation, InputEmbeddingFormat, InputFormat as ProtoInput,
    MovesLeftFormat, NetworkStructure, PolicyFormat, ValueFormat,
};
use super::proto::weights::{self as pw, Layer};
use super::proto::{Net, NetworkFormat, Weights};

/// Squares on the board, hence tokens per position.
pub const SQUARES: usize = 64;
/// Input planes per position.
pub const INPUT_PLANES: usize = 112;
/// Planes of the current board that PE_DENSE preprocesses (our 6 and their 6 piece planes).
const PE_DENSE_PLANES: usize = 12;
/// LayerNorm eps of smolgen and of the PE_DENSE embedding.
const EPS_1E3: f32 = 1e-3;
/// LayerNorm eps of the encoders for PE_MAP nets.
const EPS_1E6: f32 = 1e-6;

/// Which heads to evaluate, by lc0's names (backend options `policy_head` / `value_head`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadOptions {
    pub policy_head: String,
    pub value_head: String,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            policy_head: "vanilla".to_owned(),
            value_head: "winner".to_owned(),
        }
    }
}

/// What a file says about itself beyond the network (for `lc0rs info`).
#[derive(Debug, Clone, PartialEq)]
pub struct FileInfo {
    pub min_version: Version,
    pub license: Option<String>,
    /// The distinct layer encodings, in the order first met.
    pub layer_encodings: Vec<LayerEncoding>,
}

/// Applies lc0's fix-ups and turns the message into a validated network of either body.
pub fn assemble(
    mut net: Net,
    file: &str,
    options: &LoadOptions,
) -> Result<(Model, FileInfo), WeightsError> {
    if net.weights.is_none() {
        return Err(WeightsError::Field {
            file: file.to_owned(),
            field: "weights".to_owned(),
            problem: "missing".to_owned(),
        });
    }
    fix_older_weights_file(&mut net);
    let nf = net
        .format
        .as_ref()
        .and_then(|f| f.network_format)
        .unwrap_or_default();
    let weights = net.weights.as_ref().expect("checked above");
    let reader = Reader {
        file,
        encodings: Default::default(),
    };
    let format = reader.net_format(&nf)?;
    if is_residual_tower(&nf) {
        let tower = super::residual::assemble_tower(&reader, &nf, weights, format, options)?;
        return Ok((Model::Residual(tower), reader.file_info(&net)));
    }
    reader.check_supported_body(&nf, weights)?;
    let embedding = reader.embedding(weights, &format)?;
    let e = embedding.dense.outputs;
    let (encoders, smolgen_weight_gen) = reader.encoders(weights, &format, e)?;
    let policy_heads = reader.policy_heads(weights, e)?;
    let value_heads = reader.value_heads(weights, e, format.wdl)?;
    let moves_left = if format.moves_left {
        Some(reader.moves_left(weights, e)?)
    } else {
        None
    };
    let dims = derive_dims(
        &embedding,
        &encoders,
        moves_left.as_ref(),
        weights.headcount() as usize,
    );
    let info = reader.file_info(&net);
    let network = Network {
        format,
        dims,
        residual_alpha: residual_alpha(encoders.len()),
        embedding,
        encoders,
        smolgen_weight_gen,
        policy_heads,
        value_heads,
        moves_left,
        selected_policy: 0,
        selected_value: 0,
    };
    let mut network = network;
    network
        .select_heads(&options.policy_head, &options.value_head)
        .map_err(|error| WeightsError::UnknownHead {
            file: file.to_owned(),
            error,
        })?;
    Ok((Model::Attention(network), info))
}

/// Whether the (fixed-up) structure is a residual tower: classical or SE, with head formats.
fn is_residual_tower(nf: &NetworkFormat) -> bool {
    matches!(
        nf.network(),
        NetworkStructure::NetworkClassicalWithHeadformat
            | NetworkStructure::NetworkSeWithHeadformat
    )
}

/// The body's dimensions (head sizes are read from the selected heads themselves).
fn derive_dims(
    embedding: &Embedding,
    encoders: &[EncoderLayer],
    moves_left: Option<&MovesLeftHead>,
    heads: usize,
) -> Dims {
    let first = &encoders[0];
    let d_model = first.q.outputs;
    Dims {
        embedding: embedding.dense.outputs,
        d_model,
        encoders: encoders.len(),
        heads,
        head_depth: d_model / heads,
        dff: first.ffn.dense1.outputs,
        input_width: embedding.dense.inputs,
        dense_size: embedding.dense.inputs - INPUT_PLANES - pe_map_width(embedding),
        smolgen: first.smolgen.as_ref().map(|s| SmolgenDims {
            hidden_channels: s.compress.outputs,
            hidden_size: s.dense1.outputs,
            gen_size: s.dense2.outputs / heads,
        }),
        mlh_embedding: moves_left.map_or(0, |m| m.embedding.outputs),
        mlh_hidden: moves_left.map_or(0, |m| m.hidden.outputs),
    }
}

fn pe_map_width(embedding: &Embedding) -> usize {
    if embedding.pe_dense.is_some() {
        0
    } else {
        SQUARES
    }
}

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

    fn net_format(&self, nf: &NetworkFormat) -> Result<NetFormat, WeightsError> {
        const F: &str = "format.network_format";
        let structure: NetworkStructure = self.enum_value(&join(F, "network"), nf.network)?;
        let head_layout = match structure {
            NetworkStructure::NetworkAttentionbodyWithHeadformat => HeadLayout::Single,
            NetworkStructure::NetworkAttentionbodyWithMultiheadformat => HeadLayout::Multi,
            NetworkStructure::NetworkOnnx => {
                return Err(self.unsupported("ONNX networks; lc0rs reads lc0's own weights format"));
            }
            NetworkStructure::NetworkClassicalWithHeadformat
            | NetworkStructure::NetworkSeWithHeadformat => HeadLayout::Single,
            other => {
                return Err(self.unsupported(format!("network structure {}", other.as_str_name())));
            }
        };
        let input: ProtoInput = self.enum_value(&join(F, "input"), nf.input)?;
        let input = InputFormat::from_proto(input)
            .ok_or_else(|| self.field_error(&join(F, "input"), "input format is unknown (0)"))?;
        let wdl = match self.enum_value(&join(F, "value"), nf.value)? {
            ValueFormat::ValueWdl => true,
            ValueFormat::ValueClassical => false,
            other => {
                return Err(self.unsupported(format!("value format {}", other.as_str_name())));
            }
        };
        let moves_left = self
            .enum_value::<MovesLeftFormat>(&join(F, "moves_left"), nf.moves_left)?
            == MovesLeftFormat::MovesLeftV1;
        let default_activation =
            match self.enum_value(&join(F, "default_activation"), nf.default_activation)? {
                DefaultActivation::Relu => Activation::Relu,
                DefaultActivation::Mish => Activation::Mish,
            };
        let activation = |name: &str, raw: Option<i32>| -> Result<Activation, WeightsError> {
            let field = join(F, name);
            let value: ActivationFunction = self.enum_value(&field, raw)?;
            Activation::from_proto(value, default_activation)
                .ok_or_else(|| self.unsupported(format!("{field} = {}", value.as_str_name())))
        };
        let input_embedding =
            match self.enum_value(&join(F, "input_embedding"), nf.input_embedding)? {
                InputEmbeddingFormat::InputEmbeddingPeDense => InputEmbedding::PeDense,
                InputEmbeddingFormat::InputEmbeddingPeMap
                | InputEmbeddingFormat::InputEmbeddingNone => InputEmbedding::PeMap,
            };
        Ok(NetFormat {
            input,
            head_layout,
            input_embedding,
            wdl,
            moves_left,
            default_activation,
            smolgen_activation: activation("smolgen_activation", nf.smolgen_activation)?,
            ffn_activation: activation("ffn_activation", nf.ffn_activation)?,
        })
    }

    fn check_supported_body(
        &self,
        nf: &NetworkFormat,
        weights: &Weights,
    ) -> Result<(), WeightsError> {
        let policy: PolicyFormat = self.enum_value("format.network_format.policy", nf.policy)?;
        if policy != PolicyFormat::PolicyAttention {
            return Err(self.unsupported(format!(
                "policy format {} over an attention body; lc0 runs attention policy only there",
                policy.as_str_name()
            )));
        }
        if !weights.residual.is_empty() {
            return Err(self.unsupported(format!(
                "a residual tower ({} blocks in weights.residual); lc0rs runs attention bodies without one",
                weights.residual.len()
            )));
        }
        if weights.encoder.is_empty() {
            return Err(self.unsupported("an attention-body network without encoder layers"));
        }
        for (i, layer) in weights.encoder.iter().enumerate() {
            let mha = layer.mha.as_ref();
            if mha.is_some_and(|m| m.rpe_q.is_some() || m.rpe_k.is_some() || m.rpe_v.is_some()) {
                return Err(self.unsupported(format!(
                    "RPE attention (weights.encoder[{i}].mha.rpe_*), which lc0 does not support either"
                )));
            }
        }
        Ok(())
    }

    /// What the file says about itself, with the encodings of the layers read.
    fn file_info(self, net: &Net) -> FileInfo {
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

    fn layer_norm(
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

    fn ffn(
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

    fn embedding(&self, w: &Weights, format: &NetFormat) -> Result<Embedding, WeightsError> {
        const B: &str = "weights";
        let e = self.len("weights.ip_emb_b", w.ip_emb_b.as_ref())?;
        let pe_dense = match format.input_embedding {
            InputEmbedding::PeMap => None,
            InputEmbedding::PeDense => Some(self.pe_dense_parts(w, e)?),
        };
        let extra = match &pe_dense {
            None => SQUARES,
            Some(parts) => parts.preprocess.outputs / SQUARES,
        };
        let dense = self.dense(
            B,
            ("ip_emb_w", w.ip_emb_w.as_ref()),
            ("ip_emb_b", w.ip_emb_b.as_ref()),
            e,
            INPUT_PLANES + extra,
        )?;
        let gating = match (&w.ip_mult_gate, &w.ip_add_gate) {
            (None, None) => None,
            (mult, add) => Some(InputGating {
                mult: self.matrix("weights.ip_mult_gate", mult.as_ref(), e, SQUARES)?,
                add: self.matrix("weights.ip_add_gate", add.as_ref(), e, SQUARES)?,
            }),
        };
        Ok(Embedding {
            dense,
            gating,
            pe_dense,
        })
    }

    fn pe_dense_parts(&self, w: &Weights, e: usize) -> Result<DenseEmbeddingParts, WeightsError> {
        const B: &str = "weights";
        let pre_len = self.len("weights.ip_emb_preproc_b", w.ip_emb_preproc_b.as_ref())?;
        if pre_len % SQUARES != 0 {
            return Err(self.field_error(
                "weights.ip_emb_preproc_b",
                format!("length {pre_len} is not a multiple of {SQUARES}"),
            ));
        }
        let preprocess = self.dense(
            B,
            ("ip_emb_preproc_w", w.ip_emb_preproc_w.as_ref()),
            ("ip_emb_preproc_b", w.ip_emb_preproc_b.as_ref()),
            pre_len,
            SQUARES * PE_DENSE_PLANES,
        )?;
        let ffn_base = "weights.ip_emb_ffn";
        let ffn_weights = w.ip_emb_ffn.as_ref();
        let dff = self.len(
            &join(ffn_base, "dense1_b"),
            ffn_weights.and_then(|f| f.dense1_b.as_ref()),
        )?;
        Ok(DenseEmbeddingParts {
            preprocess,
            ln: self.layer_norm(
                B,
                ("ip_emb_ln_gammas", w.ip_emb_ln_gammas.as_ref()),
                ("ip_emb_ln_betas", w.ip_emb_ln_betas.as_ref()),
                e,
                EPS_1E3,
            )?,
            ffn: self.ffn(ffn_base, ffn_weights, e, dff)?,
            ffn_ln: self.layer_norm(
                B,
                ("ip_emb_ffn_ln_gammas", w.ip_emb_ffn_ln_gammas.as_ref()),
                ("ip_emb_ffn_ln_betas", w.ip_emb_ffn_ln_betas.as_ref()),
                e,
                EPS_1E3,
            )?,
        })
    }

    /// The encoder stack and, with smolgen, the global weight generator.
    fn encoders(
        &self,
        w: &Weights,
        format: &NetFormat,
        e: usize,
    ) -> Result<(Vec<EncoderLayer>, Option<Dense>), WeightsError> {
        let heads = w.headcount() as usize;
        let first = &w.encoder[0];
        let first_mha = first.mha.as_ref();
        let d = self.len(
            "weights.encoder[0].mha.q_b",
            first_mha.and_then(|m| m.q_b.as_ref()),
        )?;
        if heads == 0 || d % heads != 0 {
            return Err(self.field_error(
                "weights.headcount",
                format!("{heads} heads do not divide the model width {d}"),
            ));
        }
        let dff = self.len(
            "weights.encoder[0].ffn.dense1_b",
            first.ffn.as_ref().and_then(|f| f.dense1_b.as_ref()),
        )?;
        let smolgen_dims = match first_mha.and_then(|m| m.smolgen.as_ref()) {
            None => None,
            Some(sg) => Some(self.smolgen_dims("weights.encoder[0].mha.smolgen", sg, e, heads)?),
        };
        let eps = match format.input_embedding {
            InputEmbedding::PeDense => EPS_1E3,
            InputEmbedding::PeMap => EPS_1E6,
        };
        let shape = LayerShape {
            e,
            d,
            dff,
            eps,
            smolgen: smolgen_dims,
            heads,
        };
        let layers = self.encoder_layers_in_parallel(&w.encoder, &shape)?;
        let weight_gen = match smolgen_dims {
            None => None,
            Some(sg) => Some(Dense {
                inputs: sg.gen_size,
                outputs: SQUARES * SQUARES,
                weights: self.matrix(
                    "weights.smolgen_w",
                    w.smolgen_w.as_ref(),
                    SQUARES * SQUARES,
                    sg.gen_size,
                )?,
                biases: None,
            }),
        };
        Ok((layers, weight_gen))
    }

    /// Decodes the encoder layers (about 96 % of T82's values) on all cores, in contiguous
    /// chunks so that the first error reported is the lowest-numbered layer's.
    fn encoder_layers_in_parallel(
        &self,
        layers: &[pw::EncoderLayer],
        shape: &LayerShape,
    ) -> Result<Vec<EncoderLayer>, WeightsError> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let chunk = layers.len().div_ceil(threads).max(1);
        let decode_chunk = |start: usize, part: &[pw::EncoderLayer]| {
            part.iter()
                .enumerate()
                .map(|(i, layer)| {
                    self.encoder_layer(&format!("weights.encoder[{}]", start + i), layer, shape)
                })
                .collect::<Result<Vec<_>, _>>()
        };
        let results: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = layers
                .chunks(chunk)
                .enumerate()
                .map(|(c, part)| scope.spawn(move || decode_chunk(c * chunk, part)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("decoding threads do not panic"))
                .collect()
        });
        let mut out = Vec::with_capacity(layers.len());
        for result in results {
            out.extend(result?);
        }
        Ok(out)
    }

    fn smolgen_dims(
        &self,
        base: &str,
        sg: &pw::Smolgen,
        e: usize,
        heads: usize,
    ) -> Result<SmolgenDims, WeightsError> {
        let compress = self.len(&join(base, "compress"), sg.compress.as_ref())?;
        let gen_total = self.len(&join(base, "dense2_b"), sg.dense2_b.as_ref())?;
        if compress % e != 0 {
            return Err(self.field_error(
                &join(base, "compress"),
                format!("length {compress} is not a multiple of the embedding size {e}"),
            ));
        }
        if gen_total % heads != 0 {
            return Err(self.field_error(
                &join(base, "dense2_b"),
                format!("length {gen_total} is not a multiple of the {heads} heads"),
            ));
        }
        Ok(SmolgenDims {
            hidden_channels: compress / e,
            hidden_size: self.len(&join(base, "dense1_b"), sg.dense1_b.as_ref())?,
            gen_size: gen_total / heads,
        })
    }

    fn encoder_layer(
        &self,
        base: &str,
        layer: &pw::EncoderLayer,
        s: &LayerShape,
    ) -> Result<EncoderLayer, WeightsError> {
        let mha_base = join(base, "mha");
        let mha = layer
            .mha
            .as_ref()
            .ok_or_else(|| self.field_error(&mha_base, "missing"))?;
        let (e, d) = (s.e, s.d);
        let smolgen = match (s.smolgen, mha.smolgen.as_ref()) {
            (None, None) => None,
            (Some(dims), Some(sg)) => {
                Some(self.smolgen(&join(&mha_base, "smolgen"), sg, dims, s)?)
            }
            (expected, _) => {
                return Err(self.field_error(
                    &join(&mha_base, "smolgen"),
                    format!(
                        "is {} here but {} in encoder[0]; every layer must match",
                        presence(expected.is_none()),
                        presence(expected.is_some())
                    ),
                ));
            }
        };
        Ok(EncoderLayer {
            q: self.dense(
                &mha_base,
                ("q_w", mha.q_w.as_ref()),
                ("q_b", mha.q_b.as_ref()),
                d,
                e,
            )?,
            k: self.dense(
                &mha_base,
                ("k_w", mha.k_w.as_ref()),
                ("k_b", mha.k_b.as_ref()),
                d,
                e,
            )?,
            v: self.dense(
                &mha_base,
                ("v_w", mha.v_w.as_ref()),
                ("v_b", mha.v_b.as_ref()),
                d,
                e,
            )?,
            out: self.dense(
                &mha_base,
                ("dense_w", mha.dense_w.as_ref()),
                ("dense_b", mha.dense_b.as_ref()),
                e,
                d,
            )?,
            smolgen,
            ln1: self.layer_norm(
                base,
                ("ln1_gammas", layer.ln1_gammas.as_ref()),
                ("ln1_betas", layer.ln1_betas.as_ref()),
                e,
                s.eps,
            )?,
            ffn: self.ffn(&join(base, "ffn"), layer.ffn.as_ref(), e, s.dff)?,
            ln2: self.layer_norm(
                base,
                ("ln2_gammas", layer.ln2_gammas.as_ref()),
                ("ln2_betas", layer.ln2_betas.as_ref()),
                e,
                s.eps,
            )?,
        })
    }

    fn smolgen(
        &self,
        base: &str,
        sg: &pw::Smolgen,
        dims: SmolgenDims,
        s: &LayerShape,
    ) -> Result<Smolgen, WeightsError> {
        let hc = dims.hidden_channels;
        let hs = dims.hidden_size;
        let gen_total = dims.gen_size * s.heads;
        Ok(Smolgen {
            compress: Dense {
                inputs: s.e,
                outputs: hc,
                weights: self.matrix(&join(base, "compress"), sg.compress.as_ref(), hc, s.e)?,
                biases: None,
            },
            dense1: self.dense(
                base,
                ("dense1_w", sg.dense1_w.as_ref()),
                ("dense1_b", sg.dense1_b.as_ref()),
                hs,
                SQUARES * hc,
            )?,
            ln1: self.layer_norm(
                base,
                ("ln1_gammas", sg.ln1_gammas.as_ref()),
                ("ln1_betas", sg.ln1_betas.as_ref()),
                hs,
                EPS_1E3,
            )?,
            dense2: self.dense(
                base,
                ("dense2_w", sg.dense2_w.as_ref()),
                ("dense2_b", sg.dense2_b.as_ref()),
                gen_total,
                hs,
            )?,
            ln2: self.layer_norm(
                base,
                ("ln2_gammas", sg.ln2_gammas.as_ref()),
                ("ln2_betas", sg.ln2_betas.as_ref()),
                gen_total,
                EPS_1E3,
            )?,
        })
    }

    /// Policy heads by lc0's names: from `weights.policy_heads` if present, else "vanilla" from
    /// the top-level fields. A head without its own embedding uses the shared one.
    fn policy_heads(&self, w: &Weights, e: usize) -> Result<Vec<Named<PolicyHead>>, WeightsError> {
        let Some(heads) = w.policy_heads.as_ref() else {
            let top = top_level_policy(w);
            let head = self.policy_head("weights", &top, (None, None), e)?;
            return Ok(vec![Named {
                name: "vanilla".to_owned(),
                head,
            }]);
        };
        let shared = (
            heads.ip_pol_w.as_ref().or(w.ip_pol_w.as_ref()),
            heads.ip_pol_b.as_ref().or(w.ip_pol_b.as_ref()),
        );
        let entries = [
            ("vanilla", "vanilla", &heads.vanilla),
            ("optimistic", "optimistic_st", &heads.optimistic_st),
            ("soft", "soft", &heads.soft),
            ("opponent", "opponent", &heads.opponent),
        ];
        let list: Vec<_> = entries
            .into_iter()
            .filter_map(|(name, field, head)| head.as_ref().map(|h| (name, field, h)))
            .map(|(name, field, head)| {
                let head =
                    self.policy_head(&format!("weights.policy_heads.{field}"), head, shared, e)?;
                Ok(Named {
                    name: name.to_owned(),
                    head,
                })
            })
            .collect::<Result<_, WeightsError>>()?;
        if list.is_empty() {
            return Err(self.field_error("weights.policy_heads", "holds no policy head"));
        }
        Ok(list)
    }

    pub(super) fn policy_head(
        &self,
        base: &str,
        h: &pw::PolicyHead,
        shared: (Option<&Layer>, Option<&Layer>),
        e: usize,
    ) -> Result<PolicyHead, WeightsError> {
        if !h.pol_encoder.is_empty() {
            return Err(self.unsupported(format!("policy encoder layers ({base}.pol_encoder)")));
        }
        let own = h
            .ip_pol_w
            .as_ref()
            .is_some_and(|l| l.params.as_ref().is_some_and(|p| !p.is_empty()));
        let (emb_base, w, b) = if own || shared.0.is_none() {
            (base, h.ip_pol_w.as_ref(), h.ip_pol_b.as_ref())
        } else {
            ("weights.policy_heads", shared.0, shared.1)
        };
        let embedding = self.dense_sized_by_bias(emb_base, ("ip_pol_w", w), ("ip_pol_b", b), e)?;
        let ep = embedding.outputs;
        let query = self.dense_sized_by_bias(
            base,
            ("ip2_pol_w", h.ip2_pol_w.as_ref()),
            ("ip2_pol_b", h.ip2_pol_b.as_ref()),
            ep,
        )?;
        let dp = query.outputs;
        Ok(PolicyHead {
            embedding,
            key: self.dense(
                base,
                ("ip3_pol_w", h.ip3_pol_w.as_ref()),
                ("ip3_pol_b", h.ip3_pol_b.as_ref()),
                dp,
                ep,
            )?,
            promotion: self.matrix(&join(base, "ip4_pol_w"), h.ip4_pol_w.as_ref(), 4, dp)?,
            query,
        })
    }

    /// Value heads by lc0's names: from `weights.value_heads` if present, else "winner" from
    /// the top-level fields.
    fn value_heads(
        &self,
        w: &Weights,
        e: usize,
        wdl: bool,
    ) -> Result<Vec<Named<ValueHead>>, WeightsError> {
        let Some(heads) = w.value_heads.as_ref() else {
            let top = pw::ValueHead {
                ip_val_w: w.ip_val_w.clone(),
                ip_val_b: w.ip_val_b.clone(),
                ip1_val_w: w.ip1_val_w.clone(),
                ip1_val_b: w.ip1_val_b.clone(),
                ip2_val_w: w.ip2_val_w.clone(),
                ip2_val_b: w.ip2_val_b.clone(),
                ..Default::default()
            };
            let head = self.value_head("weights", &top, e, wdl)?;
            return Ok(vec![Named {
                name: "winner".to_owned(),
                head,
            }]);
        };
        let entries = [
            ("winner", &heads.winner),
            ("q", &heads.q),
            ("st", &heads.st),
        ];
        let list: Vec<_> = entries
            .into_iter()
            .filter_map(|(name, head)| head.as_ref().map(|h| (name, h)))
            .map(|(name, head)| {
                let head = self.value_head(&format!("weights.value_heads.{name}"), head, e, wdl)?;
                Ok(Named {
                    name: name.to_owned(),
                    head,
                })
            })
            .collect::<Result<_, WeightsError>>()?;
        if list.is_empty() {
            return Err(self.field_error("weights.value_heads", "holds no value head"));
        }
        Ok(list)
    }

    fn value_head(
        &self,
        base: &str,
        h: &pw::ValueHead,
        e: usize,
        wdl: bool,
    ) -> Result<ValueHead, WeightsError> {
        let embedding = self.dense_sized_by_bias(
            base,
            ("ip_val_w", h.ip_val_w.as_ref()),
            ("ip_val_b", h.ip_val_b.as_ref()),
            e,
        )?;
        let hidden = self.dense_sized_by_bias(
            base,
            ("ip1_val_w", h.ip1_val_w.as_ref()),
            ("ip1_val_b", h.ip1_val_b.as_ref()),
            SQUARES * embedding.outputs,
        )?;
        let outputs = if wdl { 3 } else { 1 };
        let output = self.dense(
            base,
            ("ip2_val_w", h.ip2_val_w.as_ref()),
            ("ip2_val_b", h.ip2_val_b.as_ref()),
            outputs,
            hidden.outputs,
        )?;
        Ok(ValueHead {
            embedding,
            hidden,
            output,
        })
    }

    fn moves_left(&self, w: &Weights, e: usize) -> Result<MovesLeftHead, WeightsError> {
        const B: &str = "weights";
        let embedding = self.dense_sized_by_bias(
            B,
            ("ip_mov_w", w.ip_mov_w.as_ref()),
            ("ip_mov_b", w.ip_mov_b.as_ref()),
            e,
        )?;
        let hidden = self.dense_sized_by_bias(
            B,
            ("ip1_mov_w", w.ip1_mov_w.as_ref()),
            ("ip1_mov_b", w.ip1_mov_b.as_ref()),
            SQUARES * embedding.outputs,
        )?;
        let output = self.dense(
            B,
            ("ip2_mov_w", w.ip2_mov_w.as_ref()),
            ("ip2_mov_b", w.ip2_mov_b.as_ref()),
            1,
            hidden.outputs,
        )?;
        Ok(MovesLeftHead {
            embedding,
            hidden,
            output,
        })
    }
}

fn presence(present: bool) -> &'static str {
    if present { "present" } else { "absent" }
}

/// The sizes every encoder layer must share.
struct LayerShape {
    e: usize,
    d: usize,
    dff: usize,
    eps: f32,
    heads: usize,
    smolgen: Option<SmolgenDims>,
}

/// The policy head of a file that keeps it in the top-level fields (older attention nets and
/// attention policy over a convolutional body), as one `PolicyHead` message.
pub(super) fn top_level_policy(w: &Weights) -> pw::PolicyHead {
    pw::PolicyHead {
        ip_pol_w: w.ip_pol_w.clone(),
        ip_pol_b: w.ip_pol_b.clone(),
        ip2_pol_w: w.ip2_pol_w.clone(),
        ip2_pol_b: w.ip2_pol_b.clone(),
        ip3_pol_w: w.ip3_pol_w.clone(),
        ip3_pol_b: w.ip3_pol_b.clone(),
        ip4_pol_w: w.ip4_pol_w.clone(),
        pol_encoder: w.pol_encoder.clone(),
        ..Default::default()
    }
}
