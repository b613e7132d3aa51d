//! Damaged weights files made from valid ones with a seeded generator: the kinds of damage a
//! user's disk, download or hand-made converter produces. Each mutant says what was done, so
//! a failure can be reproduced from its description and the seed.

use std::io::Write;

use flate2::{Compression, write::GzEncoder};
use rand::RngExt;
use rand_chacha::ChaCha8Rng;

use super::wire::{Field, Value, encode, field_paths, parent_mut, parse, put_varint};

/// A valid network to damage: its protobuf, its field tree and its gzip file.
pub struct Base {
    pub name: String,
    pub payload: Vec<u8>,
    pub gzip: Vec<u8>,
    tree: Vec<Field>,
    paths: Vec<Vec<usize>>,
    /// Paths of `Layer.params` (field 3 holding bytes), the tensors' data.
    params: Vec<Vec<usize>>,
}

/// A damaged file and what was done to it.
pub struct Mutant {
    pub bytes: Vec<u8>,
    pub what: String,
    /// The damage is in the gzip layer (so the file must go through the file reader).
    pub gzip_level: bool,
}

pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::fast());
    gz.write_all(bytes).expect("writing to memory");
    gz.finish().expect("writing to memory")
}

impl Base {
    pub fn new(name: String, payload: Vec<u8>) -> Self {
        let tree = parse(&payload).expect("a valid network parses");
        assert_eq!(encode(&tree), payload, "{name}: the wire view round-trips");
        let paths = field_paths(&tree);
        let params = paths
            .iter()
            .filter(|p| {
                let field = field_at(&tree, p);
                field.number == 3 && matches!(field.value, Value::Bytes(_))
            })
            .cloned()
            .collect();
        let gzip = gzip(&payload);
        Self {
            name,
            payload,
            gzip,
            tree,
            paths,
            params,
        }
    }

    /// The field tree with one change made at the first field reached through `numbers`.
    pub fn changed(&self, numbers: &[u64], change: impl FnOnce(&mut Field)) -> Vec<u8> {
        let mut tree = self.tree.clone();
        let path = super::wire::path_of(&tree, numbers).expect("the field exists");
        let (message, i) = parent_mut(&mut tree, &path);
        change(&mut message[i]);
        encode(&tree)
    }
}

fn field_at<'a>(tree: &'a [Field], path: &[usize]) -> &'a Field {
    let mut fields = tree;
    let (last, outer) = path.split_last().expect("a path names a field");
    for &i in outer {
        let Value::Message(inner) = &fields[i].value else {
            unreachable!("paths only pass through messages")
        };
        fields = inner;
    }
    &fields[*last]
}

fn pick<'a, T>(rng: &mut ChaCha8Rng, items: &'a [T]) -> &'a T {
    &items[rng.random_range(0..items.len())]
}

/// One damaged file from a random base: about a fifth damaged in the gzip layer, the rest in
/// the protobuf (written plain or, for one in eight, gzipped again).
pub fn mutant(bases: &[Base], rng: &mut ChaCha8Rng) -> Mutant {
    let base = pick(rng, bases);
    if rng.random_bool(0.2) {
        let (bytes, what) = gzip_damage(base, rng);
        return Mutant {
            bytes,
            what: format!("{}: {what}", base.name),
            gzip_level: true,
        };
    }
    let (payload, what) = protobuf_damage(base, rng);
    let zipped = rng.random_bool(0.125);
    Mutant {
        bytes: if zipped { gzip(&payload) } else { payload },
        what: format!(
            "{}{}: {what}",
            base.name,
            if zipped { " (gzipped)" } else { "" }
        ),
        gzip_level: false,
    }
}

fn set_isize(gz: &mut [u8], size: u32) {
    let at = gz.len() - 4;
    gz[at..].copy_from_slice(&size.to_le_bytes());
}

fn gzip_damage(base: &Base, rng: &mut ChaCha8Rng) -> (Vec<u8>, String) {
    let mut gz = base.gzip.clone();
    let len = gz.len();
    match rng.random_range(0..7) {
        0 => {
            let cut = rng.random_range(0..len);
            gz.truncate(cut);
            (gz, format!("gzip truncated to {cut} bytes"))
        }
        1 => {
            let at = rng.random_range(0..len);
            let old = gz[at];
            gz[at] ^= rng.random_range(1..=255u8);
            let new = gz[at];
            (gz, format!("gzip byte {at} {old:#x} -> {new:#x}"))
        }
        2 => {
            let any = rng.random();
            let size = *pick(rng, &[u32::MAX, 0x7fff_ffff, 0, 1, any]);
            set_isize(&mut gz, size);
            (gz, format!("ISIZE={size:#x}"))
        }
        3 => {
            let extra = rng.random_range(1..64);
            gz.extend((0..extra).map(|_| rng.random::<u8>()));
            (gz, format!("{extra} trailing bytes"))
        }
        4 => {
            // A truncated file whose last four bytes read as a huge size.
            let cut = rng.random_range(18..len);
            gz.truncate(cut);
            set_isize(&mut gz, u32::MAX - rng.random_range(0..1024));
            (gz, format!("gzip truncated to {cut} bytes, huge ISIZE"))
        }
        5 => (
            vec![0x1f, 0x8b][..rng.random_range(1..=2)].to_vec(),
            "only the gzip magic".to_owned(),
        ),
        _ => {
            let junk: Vec<u8> = (0..rng.random_range(0..4096))
                .map(|_| rng.random::<u8>())
                .collect();
            gz.extend_from_slice(&[0x1f, 0x8b, 0x08, 0]);
            gz.extend_from_slice(&junk);
            (gz, "a second gzip member of junk".to_owned())
        }
    }
}

fn protobuf_damage(base: &Base, rng: &mut ChaCha8Rng) -> (Vec<u8>, String) {
    let kind = rng.random_range(0..10);
    if kind < 2 {
        let mut payload = base.payload.clone();
        return if kind == 0 {
            let cut = rng.random_range(0..payload.len());
            payload.truncate(cut);
            (payload, format!("protobuf truncated to {cut} bytes"))
        } else {
            let flips = rng.random_range(1..=4);
            for _ in 0..flips {
                let at = rng.random_range(0..payload.len());
                payload[at] ^= 1 << rng.random_range(0..8);
            }
            (payload, format!("{flips} bit flips"))
        };
    }
    let mut tree = base.tree.clone();
    let path = if kind < 6 {
        pick(rng, &base.paths)
    } else {
        pick(rng, &base.params)
    };
    let name = path_name(&base.tree, path);
    let (message, i) = parent_mut(&mut tree, path);
    let what = if kind < 6 {
        field_damage(message, i, rng)
    } else {
        tensor_damage(message, i, rng)
    };
    (encode(&tree), format!("{what} at {name}"))
}

/// A path as the field numbers passed through (`10.27.1.9.1`: weights, an encoder layer, mha,
/// smolgen, compress).
fn path_name(tree: &[Field], path: &[usize]) -> String {
    (1..=path.len())
        .map(|depth| field_at(tree, &path[..depth]).number.to_string())
        .collect::<Vec<_>>()
        .join(".")
}

/// Structural damage to field `i` of `message`.
fn field_damage(message: &mut Vec<Field>, i: usize, rng: &mut ChaCha8Rng) -> String {
    let number = message[i].number;
    match rng.random_range(0..7) {
        0 => {
            let wire = *pick(rng, &[0u8, 1, 2, 3, 4, 5, 6, 7]);
            let bytes = message[i].value.payload();
            message[i].value = Value::Raw { wire, bytes };
            format!("field {number}: wire type -> {wire}")
        }
        1 => {
            let (Value::Bytes(_) | Value::Message(_)) = message[i].value else {
                message.remove(i);
                return format!("field {number} removed");
            };
            let body = &message[i].value.payload();
            let mut at = 0;
            let len = read_len(body, &mut at);
            let wrong = match rng.random_range(0..3) {
                0 => len.saturating_sub(rng.random_range(1..16)),
                1 => len + rng.random_range(1..16),
                _ => rng.random::<u64>() >> rng.random_range(0..64),
            };
            let mut bytes = Vec::new();
            put_varint(&mut bytes, wrong);
            bytes.extend_from_slice(&body[at..]);
            message[i].value = Value::Raw { wire: 2, bytes };
            format!("field {number}: length {len} -> {wrong}")
        }
        2 => {
            let unknown = *pick(rng, &[8u64, 15, 99, 1000, (1 << 29) - 1]);
            let blob: Vec<u8> = vec![rng.random(); rng.random_range(0..(1 << 21))];
            let len = blob.len();
            message.insert(
                i,
                Field {
                    number: unknown,
                    value: Value::Bytes(blob),
                },
            );
            format!("unknown field {unknown} of {len} bytes")
        }
        3 if rng.random_bool(0.5) => {
            let copy = message[i].clone();
            message.push(copy);
            format!("field {number} repeated")
        }
        3 => {
            // Empty elements: 3 bytes each in the file, a whole struct each when decoded.
            let copies = rng.random_range(1_000..300_000);
            let empty = Field {
                number,
                value: Value::Bytes(Vec::new()),
            };
            message.extend(std::iter::repeat_n(empty, copies));
            format!("{copies} empty copies of field {number}")
        }
        4 => {
            message.remove(i);
            format!("field {number} removed")
        }
        5 => {
            let any = rng.random();
            let value = *pick(rng, &[0, 1, 2, 7, u64::from(u32::MAX), u64::MAX, any]);
            message[i].value = Value::Varint(value);
            format!("field {number} -> varint {value}")
        }
        _ => {
            let bits = *pick(rng, &[f32::NAN, f32::INFINITY, -1.0, 0.0, 1e30]);
            message[i].value = Value::Fixed32(bits.to_le_bytes());
            format!("field {number} -> float {bits}")
        }
    }
}

fn read_len(bytes: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = bytes[*at];
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            break;
        }
    }
    v
}

/// Damage to the data of a tensor (`Layer.params`, field `i` of `message`) or to the fields
/// beside it that say how to read it.
fn tensor_damage(layer: &mut Vec<Field>, i: usize, rng: &mut ChaCha8Rng) -> String {
    let Value::Bytes(params) = &mut layer[i].value else {
        unreachable!("params paths hold bytes")
    };
    let len = params.len();
    match rng.random_range(0..7) {
        0 => {
            let keep = rng.random_range(0..len.max(1));
            params.truncate(keep);
            format!("tensor of {len} bytes truncated to {keep}")
        }
        1 => {
            let extra = *pick(rng, &[1, 2, 4, len]);
            let copy = params[..extra.min(len)].to_vec();
            params.extend_from_slice(&copy);
            format!("tensor of {len} bytes grown by {}", copy.len())
        }
        2 => {
            let byte = *pick(rng, &[0u8, 0x3c, 0x7f, 0xff]);
            params.fill(byte);
            format!("tensor of {len} bytes constant {byte:#x}")
        }
        3 => {
            // NaN or infinity in FLOAT16/BFLOAT16 (the high byte) or FLOAT32 (the top two).
            if len < 4 {
                params.clear();
                return format!("tensor of {len} bytes emptied");
            }
            let at = rng.random_range(0..len / 4) * 4;
            let pattern = *pick(
                rng,
                &[[0x00, 0x7c], [0x80, 0x7f], [0xc0, 0x7f], [0x00, 0xfc]],
            );
            params[at..at + 2].copy_from_slice(&[0, 0]);
            params[at + 2..at + 4].copy_from_slice(&pattern);
            format!("tensor element at byte {at} -> {pattern:x?}")
        }
        4 => {
            let encoding = *pick(rng, &[0u64, 1, 2, 3, 4, 5, 99, u64::MAX]);
            set_field(layer, 4, Value::Varint(encoding));
            format!("tensor encoding -> {encoding}")
        }
        5 => {
            let (field, value) = (
                *pick(rng, &[1u64, 2]),
                *pick(
                    rng,
                    &[f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 3e38, -3e38],
                ),
            );
            set_field(layer, field, Value::Fixed32(value.to_le_bytes()));
            format!("tensor min/max field {field} -> {value}")
        }
        _ => {
            params.clear();
            format!("tensor of {len} bytes emptied")
        }
    }
}

fn set_field(message: &mut Vec<Field>, number: u64, value: Value) {
    match message.iter_mut().find(|f| f.number == number) {
        Some(field) => field.value = value,
        None => message.push(Field { number, value }),
    }
}
