//! A schema-free view of protobuf wire format, for making damaged weights files on purpose:
//! a message is a list of fields; a length-delimited field whose bytes parse (and re-encode
//! exactly) as a message is kept as one, so mutations can reach any depth and the lengths
//! around them are rewritten. `Raw` fields are written as given, to produce wrong wire types
//! and wrong lengths.

/// One field of a message.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub number: u64,
    pub value: Value,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Varint(u64),
    Fixed64([u8; 8]),
    Fixed32([u8; 4]),
    Bytes(Vec<u8>),
    Message(Vec<Field>),
    /// A tag with this wire type, followed by these bytes as they are.
    Raw {
        wire: u8,
        bytes: Vec<u8>,
    },
}

impl Value {
    fn wire_type(&self) -> u8 {
        match self {
            Value::Varint(_) => 0,
            Value::Fixed64(_) => 1,
            Value::Bytes(_) | Value::Message(_) => 2,
            Value::Fixed32(_) => 5,
            Value::Raw { wire, .. } => *wire,
        }
    }

    /// What follows the tag: the value, with its length prefix where it has one.
    pub fn payload(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Value::Varint(v) => put_varint(&mut out, *v),
            Value::Fixed64(b) => out.extend_from_slice(b),
            Value::Fixed32(b) => out.extend_from_slice(b),
            Value::Bytes(b) => {
                put_varint(&mut out, b.len() as u64);
                out.extend_from_slice(b);
            }
            Value::Message(fields) => {
                let body = encode(fields);
                put_varint(&mut out, body.len() as u64);
                out.extend_from_slice(&body);
            }
            Value::Raw { bytes, .. } => out.extend_from_slice(bytes),
        }
        out
    }
}

pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// Parses a message; `None` where the bytes are not well-formed wire format.
pub fn parse(bytes: &[u8]) -> Option<Vec<Field>> {
    let mut fields = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let tag = get_varint(bytes, &mut at)?;
        let number = tag >> 3;
        if number == 0 {
            return None;
        }
        let value = match tag & 7 {
            0 => Value::Varint(get_varint(bytes, &mut at)?),
            1 => Value::Fixed64(bytes.get(at..at + 8)?.try_into().ok()?),
            2 => {
                let len = usize::try_from(get_varint(bytes, &mut at)?).ok()?;
                let body = bytes.get(at..at.checked_add(len)?)?;
                at += len;
                match parse(body) {
                    Some(inner) if !inner.is_empty() && encode(&inner) == body => {
                        Value::Message(inner)
                    }
                    _ => Value::Bytes(body.to_vec()),
                }
            }
            5 => Value::Fixed32(bytes.get(at..at + 4)?.try_into().ok()?),
            _ => return None,
        };
        if tag & 7 == 1 {
            at += 8;
        } else if tag & 7 == 5 {
            at += 4;
        }
        fields.push(Field { number, value });
    }
    Some(fields)
}

pub fn encode(fields: &[Field]) -> Vec<u8> {
    let mut out = Vec::new();
    for field in fields {
        put_varint(
            &mut out,
            field.number << 3 | u64::from(field.value.wire_type()),
        );
        out.extend_from_slice(&field.value.payload());
    }
    out
}

/// The path of every field: the index in each enclosing message, outermost first.
pub fn field_paths(fields: &[Field]) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    collect_paths(fields, &mut Vec::new(), &mut out);
    out
}

fn collect_paths(fields: &[Field], prefix: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
    for (i, field) in fields.iter().enumerate() {
        prefix.push(i);
        out.push(prefix.clone());
        if let Value::Message(inner) = &field.value {
            collect_paths(inner, prefix, out);
        }
        prefix.pop();
    }
}

/// The message holding the field at `path`, and the field's index in it.
pub fn parent_mut<'a>(fields: &'a mut Vec<Field>, path: &[usize]) -> (&'a mut Vec<Field>, usize) {
    let (last, outer) = path.split_last().expect("a path names a field");
    let mut message = fields;
    for &i in outer {
        match &mut message[i].value {
            Value::Message(inner) => message = inner,
            _ => unreachable!("paths only pass through messages"),
        }
    }
    (message, *last)
}

/// The path of the first field reached by following field numbers (`[10, 27, 1]`: the first
/// `weights.encoder[..].mha`).
pub fn path_of(fields: &[Field], numbers: &[u64]) -> Option<Vec<usize>> {
    let (first, rest) = numbers.split_first()?;
    fields.iter().enumerate().find_map(|(i, field)| {
        if field.number != *first {
            return None;
        }
        if rest.is_empty() {
            return Some(vec![i]);
        }
        let Value::Message(inner) = &field.value else {
            return None;
        };
        let mut path = vec![i];
        path.extend(path_of(inner, rest)?);
        Some(path)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_messages_round_trip() {
        let inner = encode(&[Field {
            number: 3,
            value: Value::Bytes(vec![0xff, 0x07, 0x80]),
        }]);
        let mut bytes = Vec::new();
        put_varint(&mut bytes, 10 << 3 | 2);
        put_varint(&mut bytes, inner.len() as u64);
        bytes.extend_from_slice(&inner);
        let parsed = parse(&bytes).unwrap();
        assert!(matches!(parsed[0].value, Value::Message(_)));
        assert_eq!(encode(&parsed), bytes);
        assert_eq!(path_of(&parsed, &[10, 3]), Some(vec![0, 0]));
    }
}
