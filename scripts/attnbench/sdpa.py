#!/usr/bin/env python3
"""PyTorch's attention at lc0's attention-body shapes, for comparison with `lc0rs attnbench`.

Times torch.nn.functional.scaled_dot_product_attention with each of its CUDA backends forced
in turn (flash, memory-efficient, math, cuDNN), and an explicit unfused path (fp16 matmul for
the scores, softmax in fp32, fp16 matmul for the context, as lc0's unfused path does), at 64
tokens per position (the squares), `heads` heads of `depth`, `batch` positions, with and without
the smolgen bias ([batch, heads, 64, 64] fp16, added to the scores as a float `attn_mask`).
Scale 1/sqrt(depth). Inputs are fp16, seeded normal values.

Every case is first run once and compared with an fp32 reference computed from the same
inputs (max abs error; status `ok` within --tolerance, `mismatch` otherwise), then timed:
--warmup calls, then --repeats runs of --iters calls between two CUDA events; the median
per-call time. With --graphs one call is captured in a CUDA graph and the replays are timed
instead (falling back to eager timing, with a note, where capture fails). A backend that
refuses a case gets an `unsupported` row, with the reason in `notes`.

TFLOP/s counts the two products only (4 * batch * heads * 64 * 64 * depth); GB/s the
compulsory fp16 traffic (Q, K, V, the output, and the bias if given). The CSV columns are the
same as `lc0rs attnbench`'s, so the two outputs can be concatenated.

usage: python3 scripts/attnbench/sdpa.py > sdpa.csv
       python3 scripts/attnbench/sdpa.py --heads 32 --batches 256,1024 --bias yes --graphs
Exit status 1 if any row is `mismatch`.
"""
import argparse
import contextlib
import math
import statistics
import sys
import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

HEADER = ("kernel,heads,depth,batch,bias,us,tflops,gbps,pct_flop_peak,pct_bw_peak,"
          "max_abs_err,status,notes")
TOKENS = 64
# Backend name: (SDPBackend member, the start of PyTorch's "... not used because:" warning).
SDPA_BACKENDS = {
    "flash": ("FLASH_ATTENTION", "flash attention"),
    "efficient": ("EFFICIENT_ATTENTION", "memory efficient"),
    "math": ("MATH", "math"),
    "cudnn": ("CUDNN_ATTENTION", "cudnn attention"),
}
ALL_BACKENDS = [*SDPA_BACKENDS, "unfused"]
REFERENCE_CHUNK = 64  # positions per slice of the fp32 reference, to bound its memory


def int_list(text):
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--heads", type=int_list, default=[24, 32], help="comma list (24,32)")
    p.add_argument("--depth", type=int, default=32, help="head depth (32)")
    p.add_argument("--batches", type=int_list, default=[1, 8, 64, 256, 1024],
                   help="positions, comma list (1,8,64,256,1024)")
    p.add_argument("--bias", choices=["both", "yes", "no"], default="both",
                   help="with the smolgen bias, without, or both (both)")
    p.add_argument("--backends", default=",".join(ALL_BACKENDS),
                   help=f"comma list of {','.join(ALL_BACKENDS)} (all)")
    p.add_argument("--warmup", type=int, default=10, help="untimed calls first (10)")
    p.add_argument("--iters", type=int, default=100, help="calls per timed run (100)")
    p.add_argument("--repeats", type=int, default=5, help="timed runs; the median (5)")
    p.add_argument("--graphs", action="store_true", help="time CUDA graph replays")
    p.add_argument("--tolerance", type=float, default=2e-2,
                   help="max abs error against the fp32 reference (2e-2)")
    p.add_argument("--peak-tflops", type=float, default=785.0, help="fp16 dense peak (785)")
    p.add_argument("--peak-gbps", type=float, default=4800.0, help="memory bandwidth (4800)")
    p.add_argument("--seed", type=int, default=0, help="torch.manual_seed for the inputs (0)")
    args = p.parse_args()
    args.backends = [b.strip().removeprefix("sdpa-").removeprefix("torch-")
                     for b in args.backends.split(",") if b.strip()]
    unknown = [b for b in args.backends if b not in ALL_BACKENDS]
    if unknown:
        p.error(f"unknown backend(s) {','.join(unknown)}; choose from {','.join(ALL_BACKENDS)}")
    args.iters, args.repeats = max(args.iters, 1), max(args.repeats, 1)
    return args


def describe_environment():
    cuda = torch.version.cuda or "none"
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else "none"
    return (f"torch {torch.__version__}, CUDA {cuda}, cuDNN {cudnn}, "
            f"{torch.cuda.get_device_name(0)}")


def make_inputs(heads, depth, batch, with_bias, seed):
    """Q, K, V as [batch, heads, 64, depth] and the bias as [batch, heads, 64, 64] (or None)."""
    torch.manual_seed(seed)
    shape = (batch, heads, TOKENS, depth)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.float16) for _ in range(3))
    bias = None
    if with_bias:
        bias = torch.randn((batch, heads, TOKENS, TOKENS), device="cuda", dtype=torch.float16)
    return q, k, v, bias


def attention_fp32(q, k, v, bias, scale):
    """The reference: the math formula in fp32 from the (fp16) inputs."""
    scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scale
    if bias is not None:
        scores += bias.float()
    return torch.matmul(scores.softmax(-1), v.float())


def max_abs_error(out, q, k, v, bias, scale):
    """Largest |out - reference| over all positions (NaN counts as infinite)."""
    worst = 0.0
    for start in range(0, q.shape[0], REFERENCE_CHUNK):
        part = slice(start, start + REFERENCE_CHUNK)
        want = attention_fp32(q[part], k[part], v[part],
                              None if bias is None else bias[part], scale)
        error = (out[part].float() - want).abs().max().item()
        worst = math.inf if math.isnan(error) else max(worst, error)
        del want
    return worst


def unfused(q, k, v, bias, scale):
    """lc0's unfused path: fp16 scores, softmax in fp32 back to fp16, fp16 context."""
    scores = torch.matmul(q, k.transpose(-1, -2))
    scores.mul_(scale)
    if bias is not None:
        scores.add_(bias)
    return torch.matmul(scores.float().softmax(-1).half(), v)


def backend_context(backend):
    if backend == "unfused":
        return contextlib.nullcontext()
    return sdpa_kernel([getattr(SDPBackend, SDPA_BACKENDS[backend][0])])


def refusal_note(error, caught, backend):
    """The error's first line, and PyTorch's reasons for refusing `backend` if it gave any.

    A forced backend that cannot run makes PyTorch warn "<Backend> kernel not used because:"
    for each fused backend, each followed by its reasons, then raise "No available kernel".
    """
    note = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if backend not in SDPA_BACKENDS:
        return note
    reasons, section = [], None
    for w in caught:
        message = str(w.message).split(" (Triggered internally")[0].strip()
        if message.lower().endswith("not used because:"):
            section = message.lower()
        elif section and section.startswith(SDPA_BACKENDS[backend][1]) and message:
            reasons.append(message.splitlines()[0])
    return f"{note} ({'; '.join(reasons)})" if reasons else note


def time_calls(call, iters, repeats):
    """Median over `repeats` event-timed runs of `iters` calls; µs per call."""
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            call()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / iters)
    return statistics.median(times)


def capture_graph(call):
    """One call captured in a CUDA graph (after a few calls on the capture stream)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        call()
    torch.cuda.synchronize()
    return graph


def measure(backend, inputs, args):
    """(µs, max abs error, status, notes) of one backend on one case; µs is None if refused."""
    q, k, v, bias = inputs
    scale = 1.0 / math.sqrt(q.shape[-1])
    if backend == "unfused":
        def call():
            return unfused(q, k, v, bias, scale)
    else:
        def call():
            return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    with backend_context(backend):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out = call()
                torch.cuda.synchronize()
            except RuntimeError as error:
                return None, None, "unsupported", refusal_note(error, caught, backend)
        error = max_abs_error(out, q, k, v, bias, scale)
        del out
        status = "ok" if error <= args.tolerance else "mismatch"
        for _ in range(args.warmup):
            call()
        torch.cuda.synchronize()
        notes = ""
        if args.graphs:
            try:
                graph = capture_graph(call)
                us = time_calls(graph.replay, args.iters, args.repeats)
                del graph
                return us, error, status, "graph replays"
            except Exception as failure:  # capture can fail in many ways; eager still works
                with contextlib.suppress(RuntimeError):
                    torch.cuda.synchronize()
                first = (str(failure).strip().splitlines() or [type(failure).__name__])[0]
                notes = f"graph capture failed ({first}); eager"
        us = time_calls(call, args.iters, args.repeats)
        return us, error, status, notes


def csv_row(backend, heads, depth, batch, with_bias, result, args):
    us, error, status, notes = result
    kernel = "torch-unfused" if backend == "unfused" else f"sdpa-{backend}"
    numbers = ",,,,"  # us, tflops, gbps and the two percentages, empty
    if us is not None:
        elements = batch * heads * TOKENS
        flops = 4.0 * elements * TOKENS * depth
        nbytes = 2.0 * (4 * elements * depth + (elements * TOKENS if with_bias else 0))
        tflops, gbps = flops / us * 1e-6, nbytes / us * 1e-3
        numbers = (f"{us:.2f},{tflops:.2f},{gbps:.1f},"
                   f"{100 * tflops / args.peak_tflops:.1f},{100 * gbps / args.peak_gbps:.1f}")
    err = "" if error is None else f"{error:.3g}"
    notes = notes.replace(",", ";").replace("\n", " ")
    return (f"{kernel},{heads},{depth},{batch},{'yes' if with_bias else 'no'},"
            f"{numbers},{err},{status},{notes}")


def main():
    args = parse_args()
    if not torch.cuda.is_available():
        print("sdpa.py: CUDA is not available", file=sys.stderr)
        return 2
    print(describe_environment(), file=sys.stderr)
    bias_options = {"both": [False, True], "yes": [True], "no": [False]}[args.bias]
    print(HEADER, flush=True)
    mismatches = 0
    with torch.inference_mode():
        for heads in args.heads:
            for batch in args.batches:
                for with_bias in bias_options:
                    inputs = make_inputs(heads, args.depth, batch, with_bias, args.seed)
                    for backend in args.backends:
                        result = measure(backend, inputs, args)
                        mismatches += result[2] == "mismatch"
                        row = csv_row(backend, heads, args.depth, batch, with_bias, result, args)
                        print(row, flush=True)
                        print(f"  {row}", file=sys.stderr, flush=True)
                    del inputs
                    torch.cuda.empty_cache()
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
