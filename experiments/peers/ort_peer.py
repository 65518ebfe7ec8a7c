"""ONNX Runtime's attention as an attnbench peer (run by harness.py): ort-attention, a one-node
ONNX graph holding the standard Attention operator (opset 23: 3-D inputs [B, N, H*d] with
q_num_heads and kv_num_heads, so G < H is its own grouped-query attention; is_causal for the
core; decode: one query row over the cache, no mask; a sliding window as window.py gives it: a
boolean attn_mask on the core, all N_q x N_kv pairs still scored, and the cache's last W rows in
decode), run by the CPU execution provider with
intra_op_num_threads = the case's threads. The contrib MultiHeadAttention op cannot take G < H,
so the standard operator serves every family. Records onnxruntime's version, its threads, the
execution provider and the operator, and names the kernel that ran from onnxruntime's own
profile of one call (SessionOptions.enable_profiling: one record per node with its op, its
execution provider and its input types; an operator without a kernel of its own would show as the
nodes of its function body).

Precisions: f32 (attn::peer_providers). It runs f16 (the CPU provider has a float16 Attention
kernel), but that kernel fails the suite's f16 judgement, 3-5x the bound on queries and keys in
[-4, 4] (its intermediate results are rounded beyond what the bound charges), so no sweep times it;
bf16 it refuses: the CPU provider has no bfloat16 Attention kernel (the session falls back to the
operator's function body and fails: no bfloat16 Expand kernel)."""
import json
import os
import shutil
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper
from window import kv_rows, mask as window_of


ELEM = {"f32": (TensorProto.FLOAT, np.float32), "f16": (TensorProto.FLOAT16, np.float16)}


def graph(case):
    H, G, d = case["heads"], case["kv_heads"], case["d_model"] // case["heads"]
    window = case.get("window", 0)
    causal = bool(case["causal"]) and case["mode"] != "decode"
    if causal and not window and case["n_q"] != case["n_kv"]:
        raise RuntimeError("ONNX Attention's is_causal is top-left aligned; attnbench's causal is bottom-right")
    B, n_q, n_kv = case["batch"], case["n_q"], kv_rows(case)
    t = ELEM[case.get("precision", "f32")][0]
    io = [helper.make_tensor_value_info("q", t, [B, n_q, H * d]),
          helper.make_tensor_value_info("k", t, [B, n_kv, G * d]),
          helper.make_tensor_value_info("v", t, [B, n_kv, G * d])]
    inputs, masks = ["q", "k", "v"], []
    window_mask = window_of(case)
    if window_mask is not None:  # the window's keys as a constant boolean mask (window.py)
        masks.append(helper.make_tensor("window_mask", TensorProto.BOOL, [n_q, n_kv], window_mask.ravel().tolist()))
        inputs.append("window_mask")
        causal = False
    node = helper.make_node("Attention", inputs, ["y"], q_num_heads=H, kv_num_heads=G,
                            is_causal=int(causal), scale=float(1.0 / np.sqrt(d)))
    y = helper.make_tensor_value_info("y", t, [B, n_q, H * d])
    model = helper.make_model(helper.make_graph([node], "attention", io, [y], initializer=masks),
                              opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model.SerializeToString()


class Peer:
    def __init__(self, call, output, info):
        self.call, self.output, self.info = call, output, info


def kernel_of(graph_bytes, threads, feeds):
    """The kernels one profiled call ran: per node record, its op, execution provider and input
    types (onnxruntime's profile, a Chrome trace of JSON records)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.mkdtemp(prefix="attnbench-ort-"), "profile")
    sess = ort.InferenceSession(graph_bytes, so, providers=["CPUExecutionProvider"])
    sess.run(None, feeds)
    path = sess.end_profiling()
    with open(path) as f:
        records = json.load(f)
    shutil.rmtree(os.path.dirname(path), ignore_errors=True)
    kernels = []
    for r in records:
        a = r.get("args", {})
        if r.get("cat") == "Node" and "op_name" in a:
            types = sorted({t for shape in a.get("input_type_shape", []) for t in shape})
            k = f"{a['op_name']} kernel of {a.get('provider', '?')} ({'/'.join(types)} inputs)"
            if k not in kernels:
                kernels.append(k)
    return "; ".join(kernels) or "unknown"


def make_attention(case, inputs, threads):
    prec = case.get("precision", "f32")
    if prec not in ELEM:
        raise RuntimeError(f"ort-attention does not serve {prec}: onnxruntime {ort.__version__}'s CPU provider has "
                           "no bfloat16 Attention kernel")
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    g = graph(case)
    sess = ort.InferenceSession(g, so, providers=["CPUExecutionProvider"])
    B, elem = case["batch"], ELEM[prec][1]
    rows = {"q": case["n_q"], "k": kv_rows(case), "v": kv_rows(case)}
    feeds = {n: np.ascontiguousarray(inputs[n].reshape(B, inputs[n].shape[1], -1)[:, -rows[n]:]).astype(elem)
             for n in ("q", "k", "v")}
    state = {}

    def call():
        state["y"] = sess.run(["y"], feeds)[0]

    info = {"library": "onnxruntime", "version": ort.__version__, "threads": threads,
            "op": "ONNX Attention (opset 23)" + ("" if prec == "f32" else f" on {prec} tensors"),
            "kernel": kernel_of(g, threads, feeds)}
    return Peer(call, lambda: state["y"].astype(np.float32), info)
