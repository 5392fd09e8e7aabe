"""torch <-> numpy for the Definitions' tensors: FlashInfer-Bench dtype names, bit-exact conversions."""
import numpy as np
import torch

TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
                "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2,
                "int64": torch.int64, "int32": torch.int32, "int16": torch.int16, "int8": torch.int8,
                "bool": torch.bool}


def to_numpy(t):
    """torch CPU tensor -> numpy (bfloat16 / float8 through ml_dtypes, bit for bit)."""
    import ml_dtypes
    special = {torch.bfloat16: (torch.int16, ml_dtypes.bfloat16),
               torch.float8_e4m3fn: (torch.int8, ml_dtypes.float8_e4m3fn),
               torch.float8_e5m2: (torch.int8, ml_dtypes.float8_e5m2)}
    t = t.contiguous()
    if t.dtype in special:
        iv, npd = special[t.dtype]
        return t.view(iv).numpy().view(npd)
    return t.numpy()


def to_torch(a):
    a = np.asarray(a)
    name = a.dtype.name
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        iv = np.int16 if name == "bfloat16" else np.int8
        return torch.from_numpy(a.view(iv).copy()).view(TORCH_DTYPES[name])
    return torch.from_numpy(np.array(a, copy=True))


def np_dtype(name):
    """The numpy dtype of a FlashInfer-Bench dtype name (bfloat16 / float8 through ml_dtypes)."""
    return to_numpy(torch.empty(0, dtype=TORCH_DTYPES[name])).dtype
