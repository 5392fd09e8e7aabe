"""Indexing families: index_select (take), gather (take_along_axis), scatter_add, index_add, and
index_bounds (the device-side check of device indices).

index_select and gather are data moves (raw words per byte width, bit-exact for any dtype);
index_select keeps the inventory's dtype tags (f32 = 4-byte words, f16/bf16 = 2, f64 = 8) plus a
1-byte extra. scatter_add and index_add are one kernel (shaders/scatter_add.comp): per dtype a
portable compare-and-swap variant (the inventory names) and a native-float-atomics variant
(`*_native`, needs VK_EXT_shader_atomic_float); both never drop a value.
"""
from .registry import WIDTH_DEFINES, WIDTH_FEATURES, family, id_defines, texel_twins, width_variants

GROUP = "Indexing / scatter / gather"
INDEX_KINDS = {"uint32": 0, "int32": 1, "int64": 2}

# The scatter kernel's passes (spec constant MODE): out[dst] += src; half types first widen base into
# the f32 accumulator (init) and round it into out once at the end (finish).
SCATTER_MODES = {"accumulate": 0, "init": 1, "finish": 2}
# The shaders see the ids as defines: IDX_UINT32 ... (index_fetch.glsl), MODE_INIT ... (scatter_add.comp).
_IDX_DEFINES = id_defines(IDX=INDEX_KINDS)

# The device-side bounds check of device indices (ops/indexing.py _bounds): one launch over the index
# words, bad ones recorded atomically into a host-visible slot; BOUNDS_PER indices per invocation.
BOUNDS_WG, BOUNDS_PER = 128, 4
family("index_bounds", "index_bounds.comp", {"check": "index_bounds"}, GROUP,
       defines={**_IDX_DEFINES, "WG": BOUNDS_WG, "PER": BOUNDS_PER}, tag_defines={}, tag_features={})

_SEL_WIDTH = {"f32": "b4", "f16": "b2", "bf16": "b2", "f64": "b8", "b1": "b1"}
# index_select reads whole-texel rows through a texel view (TEX); index_select_ssbo is its view-less twin.
texel_twins("index_select", "index_select.comp", {"f32": "index_select", "f16": "index_select_f16", "bf16": "index_select_bf16", "f64": "index_select_f64"},
       GROUP, extra=("b1",), defines=_IDX_DEFINES, tag_defines={t: WIDTH_DEFINES[w] for t, w in _SEL_WIDTH.items()},
       tag_features={t: WIDTH_FEATURES[w] for t, w in _SEL_WIDTH.items()})
# gather writes whole 16-byte output words, GATHER_WORDS per invocation; it reads x (binding 4, one
# element per texel) and the index words (binding 5) through texel views where the device reads
# texels faster, else its storage-only twin gather_ssbo.
GATHER_WG, GATHER_WORDS = 128, 4
_GATHER_TEXELS = {"b1": "R8_UINT", "b2": "R16_UINT", "b4": "R32_UINT", "b8": "R32G32_UINT"}
texel_twins("gather", "gather.comp", width_variants("gather"), GROUP,
            defines={**_IDX_DEFINES, "WG": GATHER_WG, "WORDS": GATHER_WORDS}, tag_defines=WIDTH_DEFINES,
            tag_features=WIDTH_FEATURES, tag_texel_formats={t: {4: f, 5: "R32_UINT"} for t, f in _GATHER_TEXELS.items()})

_ACC_DEFINES = {"f32": {"DT_F32": 1}, "f16": {"DT_F16": 1}, "bf16": {"DT_BF16": 1}, "f64": {"DT_F64": 1}}
_ACC_DEFINES.update({f"{t}_native": dict(d, ATOMIC_NATIVE=1) for t, d in list(_ACC_DEFINES.items())})
_ACC_FEATURES = {"f32": (), "f16": ("storage16",), "bf16": ("storage16",),
                 "f64": ("float64", "int64", "int64_atomics"),
                 "f32_native": ("float32_atomic_add",), "f16_native": ("storage16", "float32_atomic_add"),
                 "bf16_native": ("storage16", "float32_atomic_add"),
                 "f64_native": ("float64", "float64_atomic_add")}
NATIVE_FEATURE = {"f32": "float32_atomic_add", "f16": "float32_atomic_add", "bf16": "float32_atomic_add",
                  "f64": "float64_atomic_add"}
# The accumulate pass: SCATTER_RUN consecutive row elements per invocation; src (binding 4, one element
# per texel) and the index words (binding 5) through texel views where the device reads texels faster,
# else the storage-only twins scatter_add_ssbo / index_add_ssbo (which the init / finish passes take).
SCATTER_WG, SCATTER_RUN = 128, 8
_SRC_TEXELS = {"f32": "R32_UINT", "f64": "R32G32_UINT", "bf16": "R16_UINT", "f16": "R16_UINT"}
_SRC_TEXELS.update({f"{t}_native": f for t, f in list(_SRC_TEXELS.items())})
for _fam in ("scatter_add", "index_add"):
    texel_twins(_fam, "scatter_add.comp", {t: f"{_fam}_{t}" for t in ("f32", "f64", "bf16", "f16")},
                GROUP, extra=("f32_native", "f64_native", "bf16_native", "f16_native"),
                defines=dict(_IDX_DEFINES, **id_defines(MODE=SCATTER_MODES), WG=SCATTER_WG, RUN=SCATTER_RUN),
                tag_defines=_ACC_DEFINES, tag_features=_ACC_FEATURES,
                tag_texel_formats={t: {4: f, 5: "R32_UINT"} for t, f in _SRC_TEXELS.items()})
