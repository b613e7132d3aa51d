//! Whole batches in one call each way, reading only the policy logits a search needs: a
//! search reads its legal moves' logits (about 30 of 1858), and a call per position and
//! output, with every logit copied out, cost an embedder such as lc0 more than the backend's
//! own work on a fast GPU.

use lc0rs::backend::{PolicyPicks, evaluate_picked_in_passes};
use lc0rs::chess::{InputPlane, InputPlanes};

use super::{
    Error, LC0RS_INPUT_PLANES, LC0RS_POLICY_SIZE, Lc0rsComputation, Lc0rsStatus, boundary,
    in_array, out_array, with_computation,
};

/// Adds `count` positions as lc0's input planes, each read back only at the policy indices
/// given for it. `masks` and `values` hold `count * 112` elements, position after position
/// (as `lc0rs_computation_add_planes` takes one position's); position `i` is read at
/// `pick_counts[i]` policy indices (0 ≤ index < 1858, any order, a move's index as lc0's
/// `MoveToNNIndex` gives it), all of them one after another in `indices` (the sum of
/// `pick_counts` elements). After `lc0rs_computation_compute`, read the outputs with
/// `lc0rs_computation_get_picked_outputs`. A computation holds positions added this way or
/// positions added one by one, never both (`LC0RS_STATUS_STATE`). An index out of range fails
/// with `LC0RS_STATUS_OUT_OF_RANGE` and adds nothing.
///
/// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
///
/// # Safety
/// Each pointer is NULL or valid for the reads stated; `indices` may be NULL where no index
/// is given.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lc0rs_computation_add_picked(
    computation: Lc0rsComputation,
    count: usize,
    masks: *const u64,
    values: *const f32,
    pick_counts: *const u32,
    indices: *const u16,
) -> Lc0rsStatus {
    boundary(|| {
        let planes_len = planes_len(count)?;
        // SAFETY: the caller promises `count * 112` readable elements behind each plane
        // pointer, `count` behind `pick_counts` and their sum behind `indices`.
        let (masks, values, (pick_counts, indices)) = unsafe {
            (
                in_array(masks, planes_len, "masks")?,
                in_array(values, planes_len, "values")?,
                picks_of(count, pick_counts, indices)?,
            )
        };
        with_computation(computation, |c| {
            c.accepts_inputs()?;
            if c.picks.is_none() && !c.inputs.is_empty() {
                return Err(Error::State(
                    "the computation holds positions added one by one; a computation takes \
                     positions of one kind"
                        .into(),
                ));
            }
            c.inputs.reserve(count);
            let picks = c.picks.get_or_insert_with(PolicyPicks::default);
            push_picks(picks, pick_counts, indices);
            for position in 0..count {
                c.inputs.push(planes_of(
                    &masks[position * LC0RS_INPUT_PLANES..][..LC0RS_INPUT_PLANES],
                    &values[position * LC0RS_INPUT_PLANES..][..LC0RS_INPUT_PLANES],
                ));
                c.legal.push(None);
            }
            Ok(())
        })
    })
}

/// `count × 112`, the planes of `count` positions.
fn planes_len(count: usize) -> Result<usize, Error> {
    count.checked_mul(LC0RS_INPUT_PLANES).ok_or(Error::Range {
        what: "count",
        index: count,
        len: usize::MAX / LC0RS_INPUT_PLANES,
    })
}

/// The pick counts of `count` positions and their policy indices, each checked in range.
///
/// # Safety
/// `pick_counts` is NULL or valid for reads of `count` elements, `indices` NULL or valid for
/// reads of their sum.
unsafe fn picks_of<'a>(
    count: usize,
    pick_counts: *const u32,
    indices: *const u16,
) -> Result<(&'a [u32], &'a [u16]), Error> {
    // SAFETY: the caller's promise.
    let pick_counts = unsafe { in_array(pick_counts, count, "pick_counts")? };
    let total = pick_counts.iter().map(|&n| n as usize).sum();
    let indices = if total == 0 {
        // Nothing to read: an empty array's pointer may be NULL (an empty std::vector's).
        &[]
    } else {
        // SAFETY: the caller promises the sum of `pick_counts` readable elements.
        unsafe { in_array(indices, total, "indices")? }
    };
    if let Some(&bad) = indices
        .iter()
        .find(|&&i| usize::from(i) >= LC0RS_POLICY_SIZE)
    {
        return Err(Error::Range {
            what: "policy index",
            index: usize::from(bad),
            len: LC0RS_POLICY_SIZE,
        });
    }
    Ok((pick_counts, indices))
}

/// Appends each position's policy indices to `picks`.
fn push_picks(picks: &mut PolicyPicks, pick_counts: &[u32], indices: &[u16]) {
    let mut rest = indices;
    for &n in pick_counts {
        let (own, next) = rest.split_at(n as usize);
        picks.push(own.iter().map(|&i| usize::from(i)));
        rest = next;
    }
}

/// One input plane as lc0 holds it (`lczero::InputPlane`: a `uint64_t` mask, then a `float`
/// value): `value` on the squares whose bit is set in `mask`, 0 on the others.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct Lc0rsInputPlane {
    pub mask: u64,
    pub value: f32,
}

// The C struct and lc0rs' own plane are one layout, so that an array of one is read as the other.
const _: () = {
    assert!(size_of::<Lc0rsInputPlane>() == size_of::<InputPlane>());
    assert!(align_of::<Lc0rsInputPlane>() == align_of::<InputPlane>());
    assert!(std::mem::offset_of!(Lc0rsInputPlane, mask) == std::mem::offset_of!(InputPlane, mask));
    assert!(
        std::mem::offset_of!(Lc0rsInputPlane, value) == std::mem::offset_of!(InputPlane, value)
    );
};

/// Evaluates `count` positions whose planes are read in place from `planes` (`count * 112`
/// of them, position after position, each position's 112 as lc0's encoder writes them), each
/// read back only at its policy indices (`pick_counts` and `indices` as for
/// `lc0rs_computation_add_picked`), in one call: the planes are not copied into the
/// computation, which is what an embedder adding large batches from one thread saves. The
/// computation must hold no positions (new, or cleared); afterwards it holds the outputs, read
/// with `lc0rs_computation_get_picked_outputs`, until it is cleared. `planes` must be aligned
/// for its `uint64_t` (`LC0RS_STATUS_INVALID_ARGUMENT` otherwise); `count` 0 computes nothing.
///
/// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
///
/// # Safety
/// `planes` is NULL or valid for reads of `count * 112` elements, `pick_counts` NULL or valid
/// for reads of `count`, `indices` NULL or valid for reads of their sum, none written by
/// another thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lc0rs_computation_compute_planes(
    computation: Lc0rsComputation,
    count: usize,
    planes: *const Lc0rsInputPlane,
    pick_counts: *const u32,
    indices: *const u16,
) -> Lc0rsStatus {
    boundary(|| {
        let planes_len = planes_len(count)?;
        if !planes.is_null() && !planes.cast::<InputPlane>().is_aligned() {
            return Err(Error::Alignment { what: "planes" });
        }
        // SAFETY: the caller promises `count * 112` readable planes, `count` pick counts and
        // their sum of indices.
        let (planes, (pick_counts, indices)) = unsafe {
            (
                in_array(planes, planes_len, "planes")?,
                picks_of(count, pick_counts, indices)?,
            )
        };
        // SAFETY: `Lc0rsInputPlane` and `InputPlane` share one layout (asserted above), and
        // `InputPlanes` is an array of 112 of them: `count` of those are the `count × 112`
        // planes, aligned as checked, borrowed for the call.
        let positions: &[InputPlanes] =
            unsafe { std::slice::from_raw_parts(planes.as_ptr().cast::<InputPlanes>(), count) };
        with_computation(computation, |c| {
            c.accepts_inputs()?;
            if c.picks.is_some() || !c.inputs.is_empty() {
                return Err(Error::State(
                    "the computation holds positions; lc0rs_computation_compute_planes takes a \
                     new or cleared one"
                        .into(),
                ));
            }
            let mut picks = PolicyPicks::with_capacity(count, indices.len());
            push_picks(&mut picks, pick_counts, indices);
            c.picked = Some(evaluate_picked_in_passes(
                &*c.net.backend,
                positions,
                &picks,
            )?);
            c.picks = Some(picks);
            Ok(())
        })
    })
}

/// One position's planes from its masks and values (112 of each), built in place: filling a
/// zeroed array and copying it took most of the time of adding a batch.
pub(super) fn planes_of(masks: &[u64], values: &[f32]) -> InputPlanes {
    let (masks, values) = (&masks[..LC0RS_INPUT_PLANES], &values[..LC0RS_INPUT_PLANES]);
    std::array::from_fn(|p| InputPlane {
        mask: masks[p],
        value: values[p],
    })
}

/// Every output of a computation filled with `lc0rs_computation_add_picked`, after
/// `lc0rs_computation_compute`: for each of its `count` positions (the number added; another
/// count fails with `LC0RS_STATUS_OUT_OF_RANGE`), Q = W − L in `q[i]`, D in `d[i]`, moves
/// left in `m[i]`; the logits read, position after position in the order of their indices,
/// in `logits[0..total]` (`total` the sum of the pick counts given; `logits_len` is the room
/// in `logits`, less than `total` fails with `LC0RS_STATUS_OUT_OF_RANGE`, nothing written).
/// Any of the four output pointers may be NULL: that output is not written.
///
/// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
///
/// # Safety
/// `q`, `d` and `m` are NULL or valid for writes of `count` floats, `logits` NULL or valid
/// for writes of `logits_len` floats, none overlapping another.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lc0rs_computation_get_picked_outputs(
    computation: Lc0rsComputation,
    count: usize,
    q: *mut f32,
    d: *mut f32,
    m: *mut f32,
    logits: *mut f32,
    logits_len: usize,
) -> Lc0rsStatus {
    boundary(|| {
        with_computation(computation, |c| {
            let output = c.picked.as_ref().ok_or_else(|| {
                Error::State(
                    "no outputs to read: the positions were not added with \
                     lc0rs_computation_add_picked, or not computed yet (lc0rs_computation_compute)"
                        .into(),
                )
            })?;
            if count != output.len() {
                return Err(Error::Mismatch {
                    what: "positions",
                    given: count,
                    expected: output.len(),
                });
            }
            if !logits.is_null() && logits_len < output.logits.len() {
                return Err(Error::TooSmall {
                    what: "logits buffer",
                    needed: output.logits.len(),
                    given: logits_len,
                });
            }
            for (ptr, values) in [(q, &output.q), (d, &output.d), (m, &output.m)] {
                if !ptr.is_null() {
                    // SAFETY: non-null; the caller promises `count` writable floats.
                    unsafe { out_array(ptr, count, "output") }?.copy_from_slice(values);
                }
            }
            if !logits.is_null() {
                let total = output.logits.len();
                // SAFETY: non-null; the caller promises `logits_len` ≥ `total` writable floats.
                unsafe { out_array(logits, total, "logits") }?.copy_from_slice(&output.logits);
            }
            Ok(())
        })
    })
}
