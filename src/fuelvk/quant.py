"""fuelvk.quant: GGML block formats (Q4_0, Q8_0, Q4_K, Q6_K) — quantize, dequantize, fused qmatmul, GGUF.

The implementation lives in fuelvk.ops.quant; this module is the public namespace the docs name.
"""
from .ops.quant import QuantTensor, dequantize, load_gguf, qmatmul, quantize  # noqa: F401

__all__ = ["quantize", "dequantize", "qmatmul", "load_gguf", "QuantTensor"]
