"""ONNX Runtime's attention as an attnbench peer (run by harness.py): ort-attention, a one-node
ONNX graph holding the standard Attention operator (opset 23: 3-D inputs [B, N, H*d] with
q_num_heads and kv_num_heads, so G < H is its own grouped-query attention; is_causal for the
core; decode: one query row over the cache, no mask), run by the CPU execution provider with
intra_op_num_threads = the case's threads. The contrib MultiHeadAttention op cannot take G < H,
so the standard operator serves every family. Records onnxruntime's version, its threads, the
execution provider and the operator."""
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper


def graph(case):
    H, G, d = case["heads"], case["kv_heads"], case["d_model"] // case["heads"]
    causal = bool(case["causal"]) and case["mode"] != "decode"
    if causal and case["n_q"] != case["n_kv"]:
        raise RuntimeError("ONNX Attention's is_causal is top-left aligned; attnbench's causal is bottom-right")
    B, n_q, n_kv = case["batch"], case["n_q"], case["n_kv"]
    io = [helper.make_tensor_value_info("q", TensorProto.FLOAT, [B, n_q, H * d]),
          helper.make_tensor_value_info("k", TensorProto.FLOAT, [B, n_kv, G * d]),
          helper.make_tensor_value_info("v", TensorProto.FLOAT, [B, n_kv, G * d])]
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], q_num_heads=H, kv_num_heads=G,
                            is_causal=int(causal), scale=float(1.0 / np.sqrt(d)))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, n_q, H * d])
    model = helper.make_model(helper.make_graph([node], "attention", io, [y]),
                              opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model.SerializeToString()


class Peer:
    def __init__(self, call, output, info):
        self.call, self.output, self.info = call, output, info


def make_attention(case, inputs, threads):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(graph(case), so, providers=["CPUExecutionProvider"])
    B = case["batch"]
    feeds = {n: np.ascontiguousarray(inputs[n].reshape(B, inputs[n].shape[1], -1)) for n in ("q", "k", "v")}
    state = {}

    def call():
        state["y"] = sess.run(["y"], feeds)[0]

    info = {"library": "onnxruntime", "version": ort.__version__, "threads": threads,
            "op": "ONNX Attention (opset 23)", "kernel": ", ".join(sess.get_providers())}
    return Peer(call, lambda: state["y"].astype(np.float32), info)
