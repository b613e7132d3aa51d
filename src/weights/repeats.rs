//! A bound on repeated sub-messages, checked on the wire before decoding. Decoding turns each
//! element of a repeated message field into a whole struct: an empty encoder layer is 3 bytes
//! in the file but over 2 KB decoded, so a small file of empty elements would otherwise ask
//! for gigabytes. Only the messages that hold repeated message fields are walked (a few
//! fields each); everything else is skipped by its length, and malformed wire data is left
//! for the decoder to report.

use super::error::WeightsError;

/// The most elements any repeated message field may have (summed over the merged
/// occurrences of its parents, as decoding merges them). lc0's networks have at most a few
/// dozen encoder layers.
pub const MAX_REPEATED: usize = 1024;

/// A field holding a message that the walk counts or descends into.
struct Child {
    number: u64,
    name: &'static str,
    message: &'static Node,
    repeated: bool,
}

/// The fields of a message that matter to the walk.
struct Node(&'static [Child]);

const fn child(number: u64, name: &'static str, message: &'static Node, repeated: bool) -> Child {
    Child {
        number,
        name,
        message,
        repeated,
    }
}

/// A message with no repeated message field below it: counted, not walked.
static LEAF: Node = Node(&[]);
static POLICY_HEAD: Node = Node(&[child(8, "pol_encoder", &LEAF, true)]);
static POLICY_HEAD_MAP: Node = Node(&[child(2, "value", &POLICY_HEAD, false)]);
static POLICY_HEADS: Node = Node(&[
    child(3, "vanilla", &POLICY_HEAD, false),
    child(4, "optimistic_st", &POLICY_HEAD, false),
    child(5, "soft", &POLICY_HEAD, false),
    child(6, "opponent", &POLICY_HEAD, false),
    child(7, "policy_head_map", &POLICY_HEAD_MAP, true),
]);
static VALUE_HEADS: Node = Node(&[child(4, "value_head_map", &LEAF, true)]);
static WEIGHTS: Node = Node(&[
    child(2, "residual", &LEAF, true),
    child(21, "pol_encoder", &LEAF, true),
    child(27, "encoder", &LEAF, true),
    child(44, "value_heads", &VALUE_HEADS, false),
    child(45, "policy_heads", &POLICY_HEADS, false),
]);
/// `pblczero.Net`, from the top.
static NET: Node = Node(&[child(10, "weights", &WEIGHTS, false)]);

/// Refuses a `pblczero.Net` payload with more than [`MAX_REPEATED`] elements in any repeated
/// message field, naming the field.
pub fn check_repeated(payload: &[u8], file: &str) -> Result<(), WeightsError> {
    let mut counts = Vec::new();
    walk(payload, &NET, "", &mut counts).map_err(|field| WeightsError::Field {
        file: file.to_owned(),
        field,
        problem: format!("more than {MAX_REPEATED} entries; no network has that many"),
    })
}

/// Walks one message; `Err` names the field that has too many elements.
fn walk(
    bytes: &[u8],
    node: &Node,
    path: &str,
    counts: &mut Vec<(String, usize)>,
) -> Result<(), String> {
    let mut at = 0;
    while at < bytes.len() {
        let Some(tag) = varint(bytes, &mut at) else {
            return Ok(());
        };
        let skipped = match tag & 7 {
            0 => varint(bytes, &mut at).map(|_| 0),
            1 => Some(8),
            2 => varint(bytes, &mut at).and_then(|len| usize::try_from(len).ok()),
            5 => Some(4),
            _ => None,
        };
        let Some(end) = skipped.and_then(|n| at.checked_add(n)) else {
            return Ok(());
        };
        let Some(body) = bytes.get(at..end) else {
            return Ok(());
        };
        at = end;
        let Some(child) = node.0.iter().find(|c| c.number == tag >> 3 && tag & 7 == 2) else {
            continue;
        };
        let name = if path.is_empty() {
            child.name.to_owned()
        } else {
            format!("{path}.{}", child.name)
        };
        if child.repeated && count(counts, &name) > MAX_REPEATED {
            return Err(name);
        }
        if !child.message.0.is_empty() {
            walk(body, child.message, &name, counts)?;
        }
    }
    Ok(())
}

/// Counts one more element of `name`; returns the count so far.
fn count(counts: &mut Vec<(String, usize)>, name: &str) -> usize {
    match counts.iter_mut().find(|(n, _)| n == name) {
        Some((_, c)) => {
            *c += 1;
            *c
        }
        None => {
            counts.push((name.to_owned(), 1));
            1
        }
    }
}

fn varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `tag, length, body` of a length-delimited field, written by hand.
    fn field(number: u8, body: &[u8]) -> Vec<u8> {
        assert!(number < 16 && body.len() < 128);
        let mut out = vec![number << 3 | 2, body.len() as u8];
        out.extend_from_slice(body);
        out
    }

    /// `weights` (10) holding `n` empty `encoder` (27: tag 0xda 0x01) elements.
    fn net_with_encoders(n: usize) -> Vec<u8> {
        let encoders: Vec<u8> = [0xda, 0x01, 0x00].repeat(n);
        let mut out = vec![10 << 3 | 2];
        let mut len = encoders.len();
        while len >= 0x80 {
            out.push(len as u8 | 0x80);
            len >>= 7;
        }
        out.push(len as u8);
        out.extend_from_slice(&encoders);
        out
    }

    #[test]
    fn up_to_the_limit_is_accepted() {
        assert!(check_repeated(&net_with_encoders(MAX_REPEATED), "f").is_ok());
    }

    #[test]
    fn one_more_than_the_limit_names_the_field() {
        let message = check_repeated(&net_with_encoders(MAX_REPEATED + 1), "f")
            .unwrap_err()
            .to_string();
        assert!(
            message.starts_with("f: weights.encoder: more than 1024"),
            "{message}"
        );
    }

    #[test]
    fn occurrences_of_a_parent_are_summed_as_decoding_merges_them() {
        let half = net_with_encoders(MAX_REPEATED / 2 + 1);
        let twice = [half.clone(), half].concat();
        assert!(check_repeated(&twice, "f").is_err());
    }

    #[test]
    fn nested_heads_are_counted() {
        // policy_heads (45: tag 0xea 0x02) { vanilla (3) { pol_encoder (8) {} × 1025 } }
        let encoders = [0x42u8, 0x00].repeat(MAX_REPEATED + 1);
        let vanilla_len = encoders.len(); // 2050: two varint bytes
        let mut vanilla = vec![
            3 << 3 | 2,
            (vanilla_len as u8) | 0x80,
            (vanilla_len >> 7) as u8,
        ];
        vanilla.extend_from_slice(&encoders);
        let mut heads = vec![0xea, 0x02];
        heads.extend([(vanilla.len() as u8) | 0x80, (vanilla.len() >> 7) as u8]);
        heads.extend_from_slice(&vanilla);
        let mut net = vec![10 << 3 | 2];
        net.extend([(heads.len() as u8) | 0x80, (heads.len() >> 7) as u8]);
        net.extend_from_slice(&heads);
        let message = check_repeated(&net, "f").unwrap_err().to_string();
        assert!(
            message.contains("weights.policy_heads.vanilla.pol_encoder"),
            "{message}"
        );
    }

    #[test]
    fn malformed_or_unrelated_data_is_left_to_the_decoder() {
        assert!(check_repeated(&[0xff, 0xff], "f").is_ok());
        assert!(check_repeated(&field(10, &[0x0f]), "f").is_ok());
        assert!(check_repeated(&field(2, &[0; 40]), "f").is_ok());
    }
}
