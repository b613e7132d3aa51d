/*
 * lc0rs: Leela Chess Zero networks from C. Generated from crates/lc0rs-c/src/lib.rs by
 * cbindgen; do not edit.
 *
 * Use: lc0rs_net_open (or lc0rs_net_open_bytes for a net in memory),
 * lc0rs_computation_create, lc0rs_computation_add_fen or lc0rs_computation_add_planes for
 * each position, lc0rs_computation_compute, then the lc0rs_computation_get_* readers; free
 * both handles. Every function but the four that return strings or the version returns an
 * lc0rs_status; on failure lc0rs_last_error() says why.
 *
 * Handles are integers from a registry, not pointers: a handle that is 0, was never
 * issued, was freed (double free, use after free) or names the other kind of object is
 * reported as LC0RS_STATUS_INVALID_HANDLE. Handle values are never reused within a
 * process. A NULL pointer where one is required is LC0RS_STATUS_NULL_POINTER; a non-NULL
 * pointer that is invalid, or a buffer shorter than stated, cannot be detected and is
 * undefined behaviour. No Rust panic unwinds into the caller (LC0RS_STATUS_PANIC).
 *
 * Threads: the library functions, lc0rs_net_* included, may be called from any thread at
 * once; a computation serves one thread at a time (a concurrent call on it returns
 * LC0RS_STATUS_BUSY at once and does nothing), see each function.
 */

#ifndef LC0RS_H
#define LC0RS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// The version of this interface: changes whenever a declaration in the header changes.
#define LC0RS_ABI_VERSION 5

// Policy logits per position (lc0's policy index, 0 ≤ index < 1858).
#define LC0RS_POLICY_SIZE 1858

// Input planes per position.
#define LC0RS_INPUT_PLANES 112

// What a call returned. Every failed call also leaves a message for `lc0rs_last_error`.
typedef enum lc0rs_status {
  LC0RS_STATUS_OK = 0,
  // A pointer argument that must not be NULL was NULL.
  LC0RS_STATUS_NULL_POINTER = 1,
  // A handle that is 0, was never issued, was already freed, or names the other kind of
  // object.
  LC0RS_STATUS_INVALID_HANDLE = 2,
  // A position or policy index past the end, or an output buffer too small.
  LC0RS_STATUS_OUT_OF_RANGE = 3,
  // Another thread is inside a call on the same computation; nothing was done.
  LC0RS_STATUS_BUSY = 4,
  // A string that is not UTF-8, or another argument that cannot be used.
  LC0RS_STATUS_INVALID_ARGUMENT = 5,
  // The weights could not be read or are not a valid network.
  LC0RS_STATUS_LOAD = 6,
  // The backend could not be made (unknown name or option) or failed to evaluate.
  LC0RS_STATUS_BACKEND = 7,
  // A FEN or a move was refused.
  LC0RS_STATUS_POSITION = 8,
  // The call does not fit the computation's state (outputs read before computing,
  // positions added after computing, moves asked of a position added as planes).
  LC0RS_STATUS_STATE = 9,
  // A Rust panic was caught at the boundary: a bug in lc0rs.
  LC0RS_STATUS_PANIC = 10,
} lc0rs_status;

// A network opened on a backend; 0 is never a valid handle.
typedef uint64_t lc0rs_net;

// What a network on its backend takes and gives.
typedef struct lc0rs_net_info {
  // lc0's input format id (`pblczero::NetworkFormat::InputFormat`: 1 classical,
  // 2 castling plane, 3 canonical, 4 canonical with hectoplies, 5 the same with
  // armageddon, 132 canonical v2, 133 canonical v2 armageddon): how planes passed to
  // `lc0rs_computation_add_planes` must be encoded.
  int32_t input_format;
  // Whether the value head gives W/D/L (else D is 0 and Q the tanh value).
  bool has_wdl;
  // Whether the network has a moves-left head (else M is 0).
  bool has_moves_left;
  // The most positions the backend evaluates in one pass (a computation with more is
  // evaluated in several passes).
  size_t max_batch;
  // The batch size the backend runs best at.
  size_t recommended_batch;
} lc0rs_net_info;

// A batch of positions being built, computed and read; 0 is never a valid handle.
typedef uint64_t lc0rs_computation;

// One input plane as lc0 holds it (`lczero::InputPlane`: a `uint64_t` mask, then a `float`
// value): `value` on the squares whose bit is set in `mask`, 0 on the others.
typedef struct lc0rs_input_plane {
  uint64_t mask;
  float value;
} lc0rs_input_plane;

#ifdef __cplusplus
extern "C" {
#endif // __cplusplus

// The version of the interface this library implements (`LC0RS_ABI_VERSION` of its header).
//
// Thread-safe.
uint32_t lc0rs_abi_version(void);

// The library's version, a static NUL-terminated string.
//
// Thread-safe.
const char *lc0rs_version(void);

// The message of the last failed call on this thread ("" after a call that succeeded): a
// NUL-terminated string owned by the library, valid until the next lc0rs call on this
// thread. Never NULL.
//
// Thread-safe: each thread has its own message.
const char *lc0rs_last_error(void);

// The name of a status code (`"LC0RS_STATUS_BUSY"`), a static NUL-terminated string;
// `"LC0RS_STATUS_UNKNOWN"` for a value that is not one. Does not change `lc0rs_last_error`.
//
// Thread-safe.
const char *lc0rs_status_name(int32_t status);

// Opens a network on a backend and stores its handle in `*out`.
//
// `weights`: a weights file (`.pb.gz` or `.pb`), `bundled:tiny` / `bundled:tiny-dense` (the
// nets built into the library), or `preset:NAME` (as the command line's `-w`); NULL is
// `bundled:tiny`. `backend`: a backend name (`cpu`, `cuda-fp16`, `rocm-fp16`, `hip-emu`, ...);
// NULL is the best one this machine runs. `options`: the backend's options as the command
// line's `-o` (`threads=2,max_batch=64`); NULL is none. An unknown backend or option fails
// with `LC0RS_STATUS_BACKEND` and a message naming what is available.
//
// Thread-safe: any number of threads may open networks at once.
//
// # Safety
// Each string is NULL or NUL-terminated and readable; `out` is NULL or valid for one write.
enum lc0rs_status lc0rs_net_open(const char *weights,
                                 const char *backend,
                                 const char *options,
                                 lc0rs_net *out);

// Opens a network held in memory on a backend and stores its handle in `*out`.
//
// `data`, `len`: the bytes of a weights file, gzip-compressed (`.pb.gz`) or plain protobuf
// (`.pb`, e.g. an lc0 `pblczero::Net` serialized in memory); they are copied, and may be freed
// once the call returns. `name`: what errors call the network (NULL is `"<memory>"`).
// `backend` and `options`: as `lc0rs_net_open`. Bytes that are not a valid network (empty,
// truncated or corrupt gzip, a malformed protobuf, an unsupported format) fail with
// `LC0RS_STATUS_LOAD` and a message naming `name`.
//
// Thread-safe: any number of threads may open networks at once.
//
// # Safety
// `data` is NULL or readable for `len` bytes; each string is NULL or NUL-terminated and
// readable; `out` is NULL or valid for one write.
enum lc0rs_status lc0rs_net_open_bytes(const uint8_t *data,
                                       size_t len,
                                       const char *name,
                                       const char *backend,
                                       const char *options,
                                       lc0rs_net *out);

// Frees a network. Computations made from it keep working (each holds the network until it
// is freed); the handle is invalid afterwards, and freeing it again returns
// `LC0RS_STATUS_INVALID_HANDLE`.
//
// Thread-safe; a call on the network in progress on another thread completes normally.
enum lc0rs_status lc0rs_net_free(lc0rs_net net);

// What the network takes and gives.
//
// Thread-safe.
//
// # Safety
// `out` is NULL or valid for one write of an `lc0rs_net_info`.
enum lc0rs_status lc0rs_net_get_info(lc0rs_net net,
                                     struct lc0rs_net_info *out);

// Does the one-time work of each batch size (a GPU backend's graph capture and GEMM algorithm
// choice) for computations of up to `max_batch` positions (at most the net's `max_batch`,
// which a computation is evaluated in passes of) computed by up to `threads` threads at once,
// so that no computation pays it; lc0rs' own engine does this before its first search.
// Optional: without it, each size's first computation does the work. Both counts are at
// least 1.
//
// Thread-safe: calls from several threads are made one after another (two preparations at
// once could each hold some of a GPU's lanes while waiting for the others'); computations
// may run meanwhile.
enum lc0rs_status lc0rs_net_prepare(lc0rs_net net,
                                    size_t max_batch,
                                    size_t threads);

// Creates an empty computation on the network and stores its handle in `*out`.
//
// Thread-safe: many threads may each create and use their own computations of one network at
// once.
//
// # Safety
// `out` is NULL or valid for one write.
enum lc0rs_status lc0rs_computation_create(lc0rs_net net,
                                           lc0rs_computation *out);

// Frees a computation; the handle is invalid afterwards, and freeing it again returns
// `LC0RS_STATUS_INVALID_HANDLE`.
//
// Computation calls (every `lc0rs_computation_*` function) are for one thread at a time per
// computation: a call made while another thread is inside one on the same computation
// returns `LC0RS_STATUS_BUSY` at once and does nothing (here: the computation stays alive).
// Different computations may be used on different threads at once.
enum lc0rs_status lc0rs_computation_free(lc0rs_computation computation);

// Adds a position given as lc0's 112 input planes: plane `p` is `values[p]` on the squares
// whose bit is set in `masks[p]` (bit 0 = a1, bit 63 = h8) and 0 elsewhere, encoded in the
// network's input format (`lc0rs_net_info.input_format`). Its policy is read by index only.
//
// One thread at a time per computation (else `LC0RS_STATUS_BUSY`; see
// `lc0rs_computation_free`).
//
// # Safety
// `masks` and `values` are NULL or point to 112 readable elements each.
enum lc0rs_status lc0rs_computation_add_planes(lc0rs_computation computation,
                                               const uint64_t *masks,
                                               const float *values);

// Adds a position given as a FEN (as lc0 reads it; NULL is the start position) and the moves
// played from it (`moves`: UCI moves separated by spaces, castling as e1g1 or e1h1; NULL or
// "" for none). The last position is evaluated, with the ones before it as history (lc0's
// `fen_only` history fill). A FEN or move that is refused fails with
// `LC0RS_STATUS_POSITION` and adds nothing.
//
// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
//
// # Safety
// `fen` and `moves` are NULL or NUL-terminated and readable.
enum lc0rs_status lc0rs_computation_add_fen(lc0rs_computation computation,
                                            const char *fen,
                                            const char *moves);

// The number of positions added, in `*out`.
//
// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
//
// # Safety
// `out` is NULL or valid for one write.
enum lc0rs_status lc0rs_computation_size(lc0rs_computation computation,
                                         size_t *out);

// Evaluates every position added (in passes of at most the backend's `max_batch`). Blocks
// until done. Afterwards the outputs can be read and no position can be added until
// `lc0rs_computation_clear`; computing again recomputes the same positions.
//
// One thread at a time per computation (else `LC0RS_STATUS_BUSY`); computations of one
// network may compute on several threads at once.
enum lc0rs_status lc0rs_computation_compute(lc0rs_computation computation);

// Removes every position and output, so that the computation can be filled again.
//
// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
enum lc0rs_status lc0rs_computation_clear(lc0rs_computation computation);

// Q = W − L of position `sample` (for the side to move), in `*out`.
//
// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
//
// # Safety
// `out` is NULL or valid for one write.
enum lc0rs_status lc0rs_computation_get_q(lc0rs_computation computation,
                                          size_t sample,
                                          float *out);

// The draw probability D of position `sample` (0 without a WDL head), in `*out`.
//
// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
//
// # Safety
// `out` is NULL or valid for one write.
enum lc0rs_status lc0rs_computation_get_d(lc0rs_computation computation,
                                          size_t sample,
                                          float *out);

// The moves left M of position `sample` in plies (0 without a moves-left head), in `*out`.
//
// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
//
// # Safety
// `out` is NULL or valid for one write.
enum lc0rs_status lc0rs_computation_get_m(lc0rs_computation computation,
                                          size_t sample,
                                          float *out);

// Win, draw and loss probabilities of position `sample` for the side to move, in
// `out[0..3]`.
//
// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
//
// # Safety
// `out` is NULL or valid for writes of 3 floats.
enum lc0rs_status lc0rs_computation_get_wdl(lc0rs_computation computation,
                                            size_t sample,
                                            float *out);

// The raw policy logit of lc0's policy index `index` (0 ≤ index < 1858) for position
// `sample`, in `*out`.
//
// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
//
// # Safety
// `out` is NULL or valid for one write.
enum lc0rs_status lc0rs_computation_get_policy_logit(lc0rs_computation computation,
                                                     size_t sample,
                                                     size_t index,
                                                     float *out);

// All 1858 raw policy logits of position `sample`, in `out[0..1858]`; `len` is the room in
// `out` (less than 1858: `LC0RS_STATUS_OUT_OF_RANGE`, nothing written).
//
// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
//
// # Safety
// `out` is NULL or valid for writes of `len` floats.
enum lc0rs_status lc0rs_computation_get_policy_logits(lc0rs_computation computation,
                                                      size_t sample,
                                                      float *out,
                                                      size_t len);

// The legal moves of position `sample` (added as a FEN) as a NUL-terminated string of UCI
// moves separated by spaces (castling as e1g1; Chess960 castling as king takes rook), in
// lc0's policy-index order. `*needed` receives the bytes needed, NUL included; when `len` is
// smaller, nothing is written to `buffer` (which may then be NULL) and the call returns
// `LC0RS_STATUS_OUT_OF_RANGE`. Needs no compute.
//
// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
//
// # Safety
// `buffer` is NULL or valid for writes of `len` bytes; `needed` is NULL or valid for one
// write.
enum lc0rs_status lc0rs_computation_get_legal_moves(lc0rs_computation computation,
                                                    size_t sample,
                                                    char *buffer,
                                                    size_t len,
                                                    size_t *needed);

// The policy index of legal move `uci` (castling as e1g1 or king takes rook) of position
// `sample` (added as a FEN), in `*out`: the logit to read for it. A move that is not legal
// there fails with `LC0RS_STATUS_POSITION`. Needs no compute.
//
// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
//
// # Safety
// `uci` is NULL or NUL-terminated and readable; `out` is NULL or valid for one write.
enum lc0rs_status lc0rs_computation_get_move_index(lc0rs_computation computation,
                                                   size_t sample,
                                                   const char *uci,
                                                   size_t *out);

// Adds `count` positions as lc0's input planes, each read back only at the policy indices
// given for it. `masks` and `values` hold `count * 112` elements, position after position
// (as `lc0rs_computation_add_planes` takes one position's); position `i` is read at
// `pick_counts[i]` policy indices (0 ≤ index < 1858, any order, a move's index as lc0's
// `MoveToNNIndex` gives it), all of them one after another in `indices` (the sum of
// `pick_counts` elements). After `lc0rs_computation_compute`, read the outputs with
// `lc0rs_computation_get_picked_outputs`. A computation holds positions added this way or
// positions added one by one, never both (`LC0RS_STATUS_STATE`). An index out of range fails
// with `LC0RS_STATUS_OUT_OF_RANGE` and adds nothing.
//
// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
//
// # Safety
// Each pointer is NULL or valid for the reads stated; `indices` may be NULL where no index
// is given.
enum lc0rs_status lc0rs_computation_add_picked(lc0rs_computation computation,
                                               size_t count,
                                               const uint64_t *masks,
                                               const float *values,
                                               const uint32_t *pick_counts,
                                               const uint16_t *indices);

// Evaluates `count` positions whose planes are read in place from `planes` (`count * 112`
// of them, position after position, each position's 112 as lc0's encoder writes them), each
// read back only at its policy indices (`pick_counts` and `indices` as for
// `lc0rs_computation_add_picked`), in one call: the planes are not copied into the
// computation, which is what an embedder adding large batches from one thread saves. The
// computation must hold no positions (new, or cleared); afterwards it holds the outputs, read
// with `lc0rs_computation_get_picked_outputs`, until it is cleared. `planes` must be aligned
// for its `uint64_t` (`LC0RS_STATUS_INVALID_ARGUMENT` otherwise); `count` 0 computes nothing.
//
// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
//
// # Safety
// `planes` is NULL or valid for reads of `count * 112` elements, `pick_counts` NULL or valid
// for reads of `count`, `indices` NULL or valid for reads of their sum, none written by
// another thread during the call.
enum lc0rs_status lc0rs_computation_compute_planes(lc0rs_computation computation,
                                                   size_t count,
                                                   const struct lc0rs_input_plane *planes,
                                                   const uint32_t *pick_counts,
                                                   const uint16_t *indices);

// Every output of a computation filled with `lc0rs_computation_add_picked`, after
// `lc0rs_computation_compute`: for each of its `count` positions (the number added; another
// count fails with `LC0RS_STATUS_OUT_OF_RANGE`), Q = W − L in `q[i]`, D in `d[i]`, moves
// left in `m[i]`; the logits read, position after position in the order of their indices,
// in `logits[0..total]` (`total` the sum of the pick counts given; `logits_len` is the room
// in `logits`, less than `total` fails with `LC0RS_STATUS_OUT_OF_RANGE`, nothing written).
// Any of the four output pointers may be NULL: that output is not written.
//
// One thread at a time per computation (else `LC0RS_STATUS_BUSY`).
//
// # Safety
// `q`, `d` and `m` are NULL or valid for writes of `count` floats, `logits` NULL or valid
// for writes of `logits_len` floats, none overlapping another.
enum lc0rs_status lc0rs_computation_get_picked_outputs(lc0rs_computation computation,
                                                       size_t count,
                                                       float *q,
                                                       float *d,
                                                       float *m,
                                                       float *logits,
                                                       size_t logits_len);

#ifdef __cplusplus
}  // extern "C"
#endif  // __cplusplus

#endif  /* LC0RS_H */
