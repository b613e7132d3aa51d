//! Whole batches in one call each way, reading only the policy logits a search needs: a
//! search reads its legal moves' logits (about 30 of 1858), and a call per position and
//! output, with every logit copied out, cost an embedder such as lc0 more than the backend's
//! own work on a fast GPU.

use lc0rs::backend::PolicyPicks;
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
        let planes_len = count.checked_mul(LC0RS_INPUT_PLANES).ok_or(Error::Range {
            what: "count",
            index: count,
            len: usize::MAX / LC0RS_INPUT_PLANES,
        })?;
        // SAFETY: the caller promises `count * 112` readable elements behind each plane
        // pointer and `count` behind `pick_counts`.
        let (masks, values, pick_counts) = unsafe {
            (
                in_array(masks, planes_len, "masks")?,
                in_array(values, planes_len, "values")?,
                in_array(pick_counts, count, "pick_counts")?,
            )
        };
        let total = pick_counts.iter().map(|&n| n as usize).sum();
        let indices = if total == 0 {
            // Nothing to read: an empty array's pointer may be NULL (an empty std::vector's).
            &[]
        } else {
            // SAFETY: the caller promises the sum of `pick_counts` readable elements.
            unsafe { in_array(indices, total, "indices")? }
        };
        if let Some(at) = indices
            .iter()
            .position(|&i| usize::from(i) >= LC0RS_POLICY_SIZE)
        {
            return Err(Error::Range {
                what: "policy index",
                index: usize::from(indices[at]),
                len: LC0RS_POLICY_SIZE,
            });
        }
        with_computation(computation, |c| {
            c.accepts_inputs()?;
            if c.picks.is_none() && !c.inputs.is_empty() {
                return Err(Error::State(
                    "the computation holds positions added one by one; a computation takes \
                     positions of one kind"
                        .into(),
                ));
            }
            let picks = c.picks.get_or_insert_with(PolicyPicks::default);
            let mut rest = indices;
            for (position, &n) in pick_counts.iter().enumerate() {
                let (own, next) = rest.split_at(n as usize);
                picks.push(own.iter().map(|&i| usize::from(i)));
                rest = next;
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

/// One position's planes from its masks and values (112 of each).
pub(super) fn planes_of(masks: &[u64], values: &[f32]) -> InputPlanes {
    let mut planes = [InputPlane {
        mask: 0,
        value: 0.0,
    }; LC0RS_INPUT_PLANES];
    for (plane, (&mask, &value)) in planes.iter_mut().zip(masks.iter().zip(values)) {
        *plane = InputPlane { mask, value };
    }
    planes
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
