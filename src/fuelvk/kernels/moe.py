"""Mixture-of-experts kernels: x @ W.T with an fp8 (e4m3fn) block-scaled weight, dequantized as it
is read (shaders/fp8_block_matmul.comp): one expert's weight at a time, never expanded."""
from .registry import family

GROUP = "Mixture of experts"
FP8_WG = 64
FP8_MT = 4      # rows of x per invocation: each decoded weight word serves them all
# Loop iterations per invocation (kernels/matmul.py K_LOOP's form): at worst one per K element (the
# byte path) times the MT-row inner loop, plus one per block; counted as MT + 2 per element, 16 outside.
K_LOOP = (1, FP8_MT + 2, 16)

family("fp8_block_matmul", "fp8_block_matmul.comp", {"f32": "fp8_block_matmul_f32"}, GROUP,
       defines={"WG": FP8_WG, "MT": FP8_MT})
