"""Mixture-of-experts kernels: x @ W.T with an fp8 (e4m3fn) block-scaled weight, dequantized as it
is read (shaders/fp8_block_matmul.comp): one expert's weight at a time, never expanded."""
from .registry import family

GROUP = "Mixture of experts"
FP8_WG = 64
# Loop iterations per invocation (kernels/matmul.py K_LOOP's form): at worst one per K element (the
# byte path) plus one per block; counted as two per element, 8 outside.
K_LOOP = (1, 2, 8)

family("fp8_block_matmul", "fp8_block_matmul.comp", {"f32": "fp8_block_matmul_f32"}, GROUP,
       defines={"WG": FP8_WG})
