//! The 112 input planes of a position with its history, for every lc0 input format
//! (docs/lc0-format.md §2), and the canonicalising transform chosen for it.

use shakmaty::{CastlingSide, Color, Role};

use super::history::{HistoryEntry, PositionHistory};
use super::transform::{Transform, flip_files, mirror_ranks, transpose};
use crate::board::{INPUT_PLANES, SQUARES};
use crate::weights::format::InputFormat;

/// Planes per history board (12 piece planes and the repetition plane).
const PLANES_PER_BOARD: usize = 13;
/// History boards.
const HISTORY_BOARDS: usize = 8;
/// The first auxiliary plane (castling, side to move / en passant, rule50, edges).
pub const AUX_PLANE_BASE: usize = HISTORY_BOARDS * PLANES_PER_BOARD;
const ALL_SQUARES: u64 = !0;

/// One plane as lc0 sends it: `plane[s] = value` where bit `s` of `mask` is set, else 0.
/// Laid out as C lays out lc0's `InputPlane` (a `uint64_t` mask, then a `float`), so that an
/// embedder's array of lc0's planes can be read in place.
#[derive(Debug, Clone, Copy, PartialEq)]
#[repr(C)]
pub struct InputPlane {
    pub mask: u64,
    pub value: f32,
}

impl InputPlane {
    const EMPTY: InputPlane = InputPlane {
        mask: 0,
        value: 1.0,
    };
    const ALL: InputPlane = InputPlane {
        mask: ALL_SQUARES,
        value: 1.0,
    };

    fn filled(value: f32) -> InputPlane {
        InputPlane {
            mask: ALL_SQUARES,
            value,
        }
    }
}

/// The 112 planes of one position, as backends take them.
pub type InputPlanes = [InputPlane; INPUT_PLANES];

/// How history planes are filled when the game is shorter than 8 positions (lc0's
/// `HistoryFill`; lc0's default is `fen_only`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HistoryFill {
    /// Leave missing history boards empty.
    No,
    /// Repeat the oldest position unless it is the standard start position.
    #[default]
    FenOnly,
    /// Always repeat the oldest position.
    Always,
}

impl HistoryFill {
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "no" => Some(Self::No),
            "fen_only" => Some(Self::FenOnly),
            "always" => Some(Self::Always),
            _ => None,
        }
    }
}

/// The planes of one position and the transform its move indices must use.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedPosition {
    pub planes: InputPlanes,
    pub transform: Transform,
}

impl EncodedPosition {
    /// The dense planes, plane-major `[112][64]` (lc0's NCHW order).
    pub fn dense(&self) -> Vec<f32> {
        let mut out = vec![0.0; INPUT_PLANES * SQUARES];
        for (plane, chunk) in self.planes.iter().zip(out.chunks_exact_mut(SQUARES)) {
            for (square, value) in chunk.iter_mut().enumerate() {
                if plane.mask >> square & 1 == 1 {
                    *value = plane.value;
                }
            }
        }
        out
    }
}

fn is_canonical(format: InputFormat) -> bool {
    format.lc0_id() >= InputFormat::Canonical.lc0_id()
}

fn is_hectoplies(format: InputFormat) -> bool {
    format.lc0_id() >= InputFormat::CanonicalHectoplies.lc0_id()
}

fn is_armageddon(format: InputFormat) -> bool {
    matches!(
        format,
        InputFormat::CanonicalHectopliesArmageddon | InputFormat::CanonicalV2Armageddon
    )
}

fn writes_only_repeats(format: InputFormat) -> bool {
    matches!(
        format,
        InputFormat::CanonicalV2 | InputFormat::CanonicalV2Armageddon
    )
}

/// Encodes the last position of `history` with up to 7 earlier ones.
pub fn encode_position(
    history: &PositionHistory,
    format: InputFormat,
    fill: HistoryFill,
) -> EncodedPosition {
    let mut planes = [InputPlane::EMPTY; INPUT_PLANES];
    let current = history.last();
    let us = current.turn;
    write_aux_planes(&mut planes, current, format);
    write_history(&mut planes, history, format, fill, us);
    let transform = if is_canonical(format) {
        choose_transform(&planes, format)
    } else {
        Transform::NONE
    };
    if transform != Transform::NONE {
        for plane in &mut planes[..=AUX_PLANE_BASE + 4] {
            if plane.mask != 0 && plane.mask != ALL_SQUARES {
                plane.mask = transform.apply_bits(plane.mask);
            }
        }
    }
    EncodedPosition { planes, transform }
}

/// A bitboard seen from `us`: our back rank is rank 1.
fn view(bb: u64, us: Color) -> u64 {
    if us == Color::White {
        bb
    } else {
        mirror_ranks(bb)
    }
}

fn write_aux_planes(
    planes: &mut [InputPlane; INPUT_PLANES],
    current: &HistoryEntry,
    format: InputFormat,
) {
    let aux = &mut planes[AUX_PLANE_BASE..];
    let us = current.turn;
    let castling = &current.castling;
    if format == InputFormat::Classical112 {
        let all_if = |color: Color, side: CastlingSide| {
            if castling.rook_file(color, side).is_some() {
                InputPlane::ALL
            } else {
                InputPlane::EMPTY
            }
        };
        aux[0] = all_if(us, CastlingSide::QueenSide);
        aux[1] = all_if(us, CastlingSide::KingSide);
        aux[2] = all_if(!us, CastlingSide::QueenSide);
        aux[3] = all_if(!us, CastlingSide::KingSide);
    } else {
        // Each right's rook square: ours on rank 1 and theirs on rank 8 (our view), each at
        // its own colour's rook file.
        for (plane, side) in [(0, CastlingSide::QueenSide), (1, CastlingSide::KingSide)] {
            let ours = castling
                .rook_file(us, side)
                .map_or(0, |file| 1u64 << u32::from(file));
            let theirs = castling
                .rook_file(!us, side)
                .map_or(0, |file| 1u64 << (56 + u32::from(file)));
            aux[plane].mask = ours | theirs;
        }
    }
    if is_canonical(format) {
        aux[4].mask = current.en_passant;
    } else if us == Color::Black {
        aux[4] = InputPlane::ALL;
    }
    let rule50 = current.rule50 as f32;
    aux[5] = InputPlane::filled(if is_hectoplies(format) {
        rule50 / 100.0
    } else {
        rule50
    });
    if is_armageddon(format) && us == Color::Black {
        aux[6] = InputPlane::ALL;
    }
    aux[7] = InputPlane::ALL;
}

fn write_history(
    planes: &mut [InputPlane; INPUT_PLANES],
    history: &PositionHistory,
    format: InputFormat,
    fill: HistoryFill,
    us: Color,
) {
    let entries = history.entries();
    let last_index = entries.len() as isize - 1;
    let stop_early = is_canonical(format);
    let only_repeats = writes_only_repeats(format);
    let current_castling = history.last().castling;
    let mut written = 0;
    let mut index = last_index;
    while written < HISTORY_BOARDS {
        let synthesized = index < 0;
        let entry = &entries[index.max(0) as usize];
        if stop_early && entry.castling != current_castling {
            break;
        }
        if stop_early && index != last_index && entry.en_passant != 0 {
            break;
        }
        // With fill `no`, lc0 still writes the one board an en-passant flag tells.
        if fill == HistoryFill::No && (index < -1 || (synthesized && entry.en_passant == 0)) {
            break;
        }
        if synthesized && fill == HistoryFill::FenOnly && entry.is_startpos() {
            break;
        }
        if only_repeats && entry.repetitions == 0 && written > 0 {
            // lc0 loops forever on a synthesized board here (a known defect); stopping gives
            // the planes of history fill `no`.
            if synthesized || entry.rule50 == 0 {
                break;
            }
            index -= 1;
            continue;
        }
        let base = written * PLANES_PER_BOARD;
        let pieces = piece_masks(entry, us, synthesized);
        for (plane, mask) in planes[base..base + 12].iter_mut().zip(pieces) {
            plane.mask = mask;
        }
        if entry.repetitions >= 1 {
            planes[base + 12] = InputPlane::ALL;
        }
        if stop_early && entry.rule50 == 0 {
            break;
        }
        written += 1;
        index -= 1;
    }
}

/// Our 6 then their 6 piece bitboards (pawn, knight, bishop, rook, queen, king) from `us`'s
/// view.
fn piece_masks(entry: &HistoryEntry, us: Color, synthesized: bool) -> [u64; 12] {
    let board = &entry.board;
    let roles = [
        Role::Pawn,
        Role::Knight,
        Role::Bishop,
        Role::Rook,
        Role::Queen,
        Role::King,
    ];
    let mut out = [0u64; 12];
    for (side, color) in [us, us.other()].into_iter().enumerate() {
        for (r, role) in roles.into_iter().enumerate() {
            let bb = u64::from(board.by_color(color) & board.by_role(role));
            out[side * 6 + r] = view(bb, us);
        }
    }
    if synthesized {
        undo_double_push(&mut out, view_from(entry, us));
    }
    out
}

/// `entry`'s en-passant flag seen from `us`.
fn view_from(entry: &HistoryEntry, us: Color) -> u64 {
    if entry.turn == us {
        entry.en_passant
    } else {
        mirror_ranks(entry.en_passant)
    }
}

/// lc0's undo of the double push an en-passant flag tells, on a synthesized history board: a
/// flag on rank 1 moves our pawn on its file from rank 4 back to rank 2, one on rank 8 their
/// pawn from rank 5 to rank 7. lc0 does this by adding to the masks (`EncodePositionForNN`),
/// so the same wrapping arithmetic is used here: for a FEN whose flag has no pawn behind it,
/// the planes carry lc0's borrow as well.
fn undo_double_push(masks: &mut [u64; 12], flag: u64) {
    if flag == 0 {
        return;
    }
    let index = flag.trailing_zeros();
    if index < 8 {
        let delta = 0x100u64.wrapping_sub(0x0100_0000) << index;
        masks[0] = masks[0].wrapping_add(delta);
    } else if index >= 56 {
        let delta = 0x0001_0000_0000_0000u64.wrapping_sub(0x0000_0001_0000_0000) << (index - 56);
        masks[6] = masks[6].wrapping_add(delta);
    }
}

/// lc0's choice of canonical transform, made on the untransformed planes.
fn choose_transform(planes: &[InputPlane; INPUT_PLANES], format: InputFormat) -> Transform {
    let mut castling = planes[AUX_PLANE_BASE].mask | planes[AUX_PLANE_BASE + 1].mask;
    if format == InputFormat::Classical112 {
        castling |= planes[AUX_PLANE_BASE + 2].mask | planes[AUX_PLANE_BASE + 3].mask;
    }
    if castling != 0 {
        return Transform::NONE;
    }
    let mask = |i: usize| planes[i].mask;
    let mut king = mask(5);
    let mut transform = Transform::NONE;
    if king & 0x0F0F_0F0F_0F0F_0F0F != 0 {
        transform = transform.with(Transform::FLIP);
        king = flip_files(king);
    }
    if mask(0) | mask(6) != 0 {
        return transform;
    }
    if king & 0xFFFF_FFFF_0000_0000 != 0 {
        transform = transform.with(Transform::MIRROR);
        king = mirror_ranks(king);
    }
    // Our king is now in the a1–h4 half on files e–h: transpose when it is above the
    // anti-diagonal, break ties on it by comparing the piece sets.
    if king & 0xE0C0_8000 != 0 {
        return transform.with(Transform::TRANSPOSE);
    }
    if king & 0x1020_4080 != 0 {
        let ours = (0..6).fold(0, |acc, i| acc | mask(i));
        let theirs = (6..12).fold(0, |acc, i| acc | mask(i));
        let tie_breakers = [
            ours | theirs,
            ours,
            mask(5) | mask(11),
            mask(4) | mask(10),
            mask(3) | mask(9),
            mask(1) | mask(7),
            mask(2) | mask(8),
        ];
        for value in tie_breakers {
            let value = transform.apply_bits(value);
            let transposed = transpose(value);
            if value < transposed {
                return transform;
            }
            if value > transposed {
                return transform.with(Transform::TRANSPOSE);
            }
        }
    }
    transform
}
