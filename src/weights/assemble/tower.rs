//! From the decoded message to a validated [`TowerNetwork`]: reads lc0's residual-tower layout
//! (input convolution, residual blocks with optional squeeze-excitation, convolutional heads),
//! derives every size from the data as lc0 does and folds batch norm into each convolution
//! with lc0's epsilon (docs/lc0-format.md §1.2, `Weights.ConvBlock`).

use super::heads::top_level_policy;
use super::reader::{Reader, join};
use crate::board::{CONV_POLICY_USED_PLANES, INPUT_PLANES, POLICY_SIZE, SQUARES};
use crate::weights::error::WeightsError;
use crate::weights::format::NetFormat;
use crate::weights::network::Dense;
use crate::weights::proto::network_format::PolicyFormat;
use crate::weights::proto::weights::{self as pw, Layer};
use crate::weights::proto::{NetworkFormat, Weights};
use crate::weights::tower::{
    Conv, ConvHead, ResidualBlock, SqueezeExcitation, TowerNetwork, TowerPolicy,
};

/// lc0's batch-norm epsilon, added to the stored variance (`bn_stddivs`) before folding.
pub const BATCH_NORM_EPSILON: f32 = 1e-5;

/// Reads a residual-tower network; `format` is the already-resolved common format. The heads
/// the options ask for are checked by the caller, before any layer is read.
pub(super) fn assemble_tower(
    reader: &Reader<'_>,
    nf: &NetworkFormat,
    w: &Weights,
    format: NetFormat,
) -> Result<TowerNetwork, WeightsError> {
    if w.residual.is_empty() {
        return Err(reader.field_error(
            "weights.residual",
            "a residual tower needs at least one block",
        ));
    }
    let input = conv_block(reader, "weights.input", w.input.as_ref(), INPUT_PLANES, 3)?;
    let filters = input.outputs;
    let blocks = w
        .residual
        .iter()
        .enumerate()
        .map(|(i, block)| residual_block(reader, &format!("weights.residual[{i}]"), block, filters))
        .collect::<Result<Vec<_>, _>>()?;
    let policy_format: PolicyFormat =
        reader.enum_value("format.network_format.policy", nf.policy)?;
    let policy = policy(reader, policy_format, w, filters)?;
    let value = conv_head(
        reader,
        ("value", w.value.as_ref()),
        (
            ("ip1_val_w", w.ip1_val_w.as_ref()),
            ("ip1_val_b", w.ip1_val_b.as_ref()),
        ),
        (
            ("ip2_val_w", w.ip2_val_w.as_ref()),
            ("ip2_val_b", w.ip2_val_b.as_ref()),
        ),
        (filters, if format.wdl { 3 } else { 1 }),
    )?;
    let moves_left = if format.moves_left {
        Some(conv_head(
            reader,
            ("moves_left", w.moves_left.as_ref()),
            (
                ("ip1_mov_w", w.ip1_mov_w.as_ref()),
                ("ip1_mov_b", w.ip1_mov_b.as_ref()),
            ),
            (
                ("ip2_mov_w", w.ip2_mov_w.as_ref()),
                ("ip2_mov_b", w.ip2_mov_b.as_ref()),
            ),
            (filters, 1),
        )?)
    } else {
        None
    };
    Ok(TowerNetwork {
        format,
        input,
        blocks,
        policy,
        value,
        moves_left,
    })
}

fn residual_block(
    reader: &Reader<'_>,
    base: &str,
    block: &pw::Residual,
    filters: usize,
) -> Result<ResidualBlock, WeightsError> {
    let conv = |name: &str, b: Option<&pw::ConvBlock>| -> Result<Conv, WeightsError> {
        let field = join(base, name);
        let conv = conv_block(reader, &field, b, filters, 3)?;
        if conv.outputs != filters {
            return Err(reader.field_error(
                &field,
                format!("{} output channels, the tower has {filters}", conv.outputs),
            ));
        }
        Ok(conv)
    };
    Ok(ResidualBlock {
        conv1: conv("conv1", block.conv1.as_ref())?,
        conv2: conv("conv2", block.conv2.as_ref())?,
        se: match &block.se {
            None => None,
            Some(se) => Some(squeeze_excitation(reader, &join(base, "se"), se, filters)?),
        },
    })
}

fn squeeze_excitation(
    reader: &Reader<'_>,
    base: &str,
    se: &pw::SEunit,
    filters: usize,
) -> Result<SqueezeExcitation, WeightsError> {
    let fc1 = reader.dense_sized_by_bias(
        base,
        ("w1", se.w1.as_ref()),
        ("b1", se.b1.as_ref()),
        filters,
    )?;
    let fc2 = reader.dense(
        base,
        ("w2", se.w2.as_ref()),
        ("b2", se.b2.as_ref()),
        2 * filters,
        fc1.outputs,
    )?;
    Ok(SqueezeExcitation { fc1, fc2 })
}

fn policy(
    reader: &Reader<'_>,
    format: PolicyFormat,
    w: &Weights,
    filters: usize,
) -> Result<TowerPolicy, WeightsError> {
    match format {
        PolicyFormat::PolicyClassical => {
            let conv = conv_block(reader, "weights.policy", w.policy.as_ref(), filters, 1)?;
            let dense = reader.dense(
                "weights",
                ("ip_pol_w", w.ip_pol_w.as_ref()),
                ("ip_pol_b", w.ip_pol_b.as_ref()),
                POLICY_SIZE,
                conv.outputs * SQUARES,
            )?;
            Ok(TowerPolicy::Classical { conv, dense })
        }
        PolicyFormat::PolicyConvolution => {
            let conv1 = conv_block(reader, "weights.policy1", w.policy1.as_ref(), filters, 3)?;
            if conv1.outputs != filters {
                return Err(reader.field_error(
                    "weights.policy1",
                    format!("{} output channels, the tower has {filters}", conv1.outputs),
                ));
            }
            let conv2 = conv_block(reader, "weights.policy", w.policy.as_ref(), filters, 3)?;
            if conv2.outputs < CONV_POLICY_USED_PLANES {
                return Err(reader.field_error(
                    "weights.policy",
                    format!(
                        "{} output planes; the convolution policy map reads {CONV_POLICY_USED_PLANES}",
                        conv2.outputs
                    ),
                ));
            }
            Ok(TowerPolicy::Convolution { conv1, conv2 })
        }
        PolicyFormat::PolicyAttention => {
            let top = top_level_policy(w);
            let head = reader.policy_head("weights", &top, (None, None), filters)?;
            Ok(TowerPolicy::Attention(head))
        }
        PolicyFormat::PolicyUnknown => Err(reader.field_error(
            "format.network_format.policy",
            "policy format is unknown (0)",
        )),
    }
}

type NamedLayer<'l> = (&'static str, Option<&'l Layer>);

/// A value or moves-left head: `weights.{conv}` (1×1), then two dense layers whose inputs
/// follow from the data; `(filters, outputs)` are the tower width and the final size.
fn conv_head(
    reader: &Reader<'_>,
    (conv_name, conv): (&str, Option<&pw::ConvBlock>),
    (hidden_w, hidden_b): (NamedLayer<'_>, NamedLayer<'_>),
    (output_w, output_b): (NamedLayer<'_>, NamedLayer<'_>),
    (filters, outputs): (usize, usize),
) -> Result<ConvHead, WeightsError> {
    let conv = conv_block(reader, &join("weights", conv_name), conv, filters, 1)?;
    let hidden: Dense =
        reader.dense_sized_by_bias("weights", hidden_w, hidden_b, conv.outputs * SQUARES)?;
    let output = reader.dense("weights", output_w, output_b, outputs, hidden.outputs)?;
    Ok(ConvHead {
        conv,
        hidden,
        output,
    })
}

/// Reads a `ConvBlock` of `kernel`×`kernel` filters over `inputs` channels and folds its batch
/// norm in. The output count is the bias length, or the mean length when there is no bias
/// (lc0 then uses zero biases); missing gammas are 1 and missing betas 0 (old files).
pub fn conv_block(
    reader: &Reader<'_>,
    base: &str,
    block: Option<&pw::ConvBlock>,
    inputs: usize,
    kernel: usize,
) -> Result<Conv, WeightsError> {
    let block = block.ok_or_else(|| reader.field_error(base, "missing"))?;
    let has = |l: &Option<Layer>| {
        l.as_ref()
            .is_some_and(|l| l.params.as_ref().is_some_and(|p| !p.is_empty()))
    };
    let outputs = if has(&block.biases) {
        reader.len(&join(base, "biases"), block.biases.as_ref())?
    } else if has(&block.bn_means) {
        reader.len(&join(base, "bn_means"), block.bn_means.as_ref())?
    } else {
        return Err(reader.field_error(base, "has neither biases nor bn_means"));
    };
    let mut weights = reader.tensor(
        &join(base, "weights"),
        block.weights.as_ref(),
        outputs * inputs * kernel * kernel,
        &|| format!("[{outputs}][{inputs}][{kernel}][{kernel}]"),
    )?;
    let mut biases = if has(&block.biases) {
        reader.vector(&join(base, "biases"), block.biases.as_ref(), outputs)?
    } else {
        vec![0.0; outputs]
    };
    if has(&block.bn_means) {
        let optional = |name: &str, layer: &Option<Layer>, default: f32| {
            if has(layer) {
                reader.vector(&join(base, name), layer.as_ref(), outputs)
            } else {
                Ok(vec![default; outputs])
            }
        };
        let norm = BatchNorm {
            means: reader.vector(&join(base, "bn_means"), block.bn_means.as_ref(), outputs)?,
            variances: reader.vector(
                &join(base, "bn_stddivs"),
                block.bn_stddivs.as_ref(),
                outputs,
            )?,
            gammas: optional("bn_gammas", &block.bn_gammas, 1.0)?,
            betas: optional("bn_betas", &block.bn_betas, 0.0)?,
        };
        if let Some(i) = norm
            .variances
            .iter()
            .position(|v| v.is_nan() || v + BATCH_NORM_EPSILON <= 0.0)
        {
            return Err(reader.field_error(
                &format!("{base}.bn_stddivs[{i}]"),
                format!(
                    "variance {} is not above -{BATCH_NORM_EPSILON}",
                    norm.variances[i]
                ),
            ));
        }
        norm.fold_into(&mut weights, &mut biases);
    }
    Ok(Conv {
        inputs,
        outputs,
        kernel,
        weights,
        biases,
    })
}

/// The batch norm after a convolution: `γ·(y − mean)/sqrt(var + ε) + β`, per output channel.
struct BatchNorm {
    means: Vec<f32>,
    variances: Vec<f32>,
    gammas: Vec<f32>,
    betas: Vec<f32>,
}

impl BatchNorm {
    /// Scales each output channel's filter by `g = γ/sqrt(var + ε)` and sets its bias to
    /// `β − g·(mean − bias)`, in f32 as lc0 does, so the convolution alone gives the
    /// normalised output.
    fn fold_into(&self, weights: &mut [f32], biases: &mut [f32]) {
        let per_output = weights.len() / biases.len();
        for (o, filter) in weights.chunks_mut(per_output).enumerate() {
            let g = self.gammas[o] * (1.0 / (self.variances[o] + BATCH_NORM_EPSILON).sqrt());
            let mean = self.means[o] - biases[o];
            filter.iter_mut().for_each(|w| *w *= g);
            biases[o] = -g * mean + self.betas[o];
        }
    }
}
