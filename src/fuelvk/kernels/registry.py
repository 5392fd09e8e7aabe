"""The kernel registry: every kernel family declared once, as data.

build_shaders.py compiles what is declared here, the pipeline cache builds from it, the tests walk it
and `python -m fuelvk kernels --json` lists it. A variant's id is ``family.tag``, where tag is a
dtype (f32/f16/bf16/f64), a byte width (b1/b2/b4/b8) or a dtype combination.
"""
from dataclasses import dataclass, field

# Per-tag preprocessor defines and device features of the float families (shaders/common/dtype.glsl).
DTYPE_DEFINES = {"f32": {"DT_F32": 1}, "f16": {"DT_F16": 1}, "bf16": {"DT_BF16": 1}, "f64": {"DT_F64": 1}}
DTYPE_FEATURES = {"f32": (), "f16": ("storage16",), "bf16": ("storage16",), "f64": ("float64",)}
# Byte-width families move raw words (shaders/common/width.glsl).
WIDTH_DEFINES = {"b1": {"WIDTH": 1}, "b2": {"WIDTH": 2}, "b4": {"WIDTH": 4}, "b8": {"WIDTH": 8}}
WIDTH_FEATURES = {"b1": ("storage8",), "b2": ("storage16",), "b4": (), "b8": ("int64",)}

def ids(*names):
    """name -> id, numbered by position: the ids of one table (one shader switch) are unique."""
    if len(set(names)) != len(names):
        raise ValueError(f"an op is named twice in {names}")
    return {name: i for i, name in enumerate(names)}


def id_defines(**tables):
    """Preprocessor defines naming each table's ids, so shaders say OP_SUM where the host says
    REDUCE_OPS["sum"]: id_defines(OP=REDUCE_OPS) -> {"OP_SUM": 0, "OP_MAX": 1, ...}."""
    return {f"{prefix}_{name.upper()}": i for prefix, table in tables.items() for name, i in table.items()}


@dataclass(frozen=True)
class Variant:
    family: str
    tag: str
    name: object         # inventory kernel name (e.g. "unary_bf16") or a tuple of the names it serves
    source: str          # path under shaders/
    defines: tuple       # ((NAME, value), ...)
    features: tuple      # device features the variant needs (runtime.device.FEATURE_FIELDS names)
    entry: str = "main"
    texel_formats: tuple = ()  # ((binding, VkFormat name), ...): views of uniform texel buffer bindings

    def __post_init__(self):
        object.__setattr__(self, "_id", f"{self.family}.{self.tag}")

    @property
    def names(self):
        return self.name if isinstance(self.name, tuple) else (self.name,)

    @property
    def id(self):
        return self._id

    @property
    def spv(self):
        return f"{self.id}.spv"


@dataclass
class Family:
    name: str
    source: str
    group: str
    variants: dict = field(default_factory=dict)  # tag -> Variant
    bench_only: bool = False   # run by the bench suite / tools only, never by a public op


FAMILIES: dict = {}
VARIANTS: dict = {}


def family(name, source, variants, group, defines=None, tag_defines=DTYPE_DEFINES,
           tag_features=DTYPE_FEATURES, features=(), entry="main", extra=(), tag_texel_formats=None,
           bench_only=False):
    """Declare a family. `variants` maps tag -> kernel name(s); `extra` tags get `<family>_<tag>` names.

    `tag_texel_formats` maps tag -> {binding: VkFormat name (e.g. "R32_UINT")} for uniform texel
    buffer bindings (GLSL's samplerBuffer has no format qualifier; storage texel buffers take theirs
    from the shader's layout(r32ui) etc. via the manifest). `bench_only`: kernels no public op runs
    (roof calibration, load-path micro-benchmarks)."""
    fam = Family(name, source, group, bench_only=bench_only)
    for tag, kname in list(variants.items()) + [(t, f"{name}_{t}") for t in extra]:
        d = dict(defines or {})
        d.update(tag_defines.get(tag, {}))
        v = Variant(name, tag, kname, source, tuple(sorted(d.items())),
                    tuple(sorted(set(features) | set(tag_features.get(tag, ())))), entry,
                    tuple(sorted((tag_texel_formats or {}).get(tag, {}).items())))
        fam.variants[tag] = v
        if v.id in VARIANTS:
            raise ValueError(f"kernel variant {v.id} declared twice")
        VARIANTS[v.id] = v
    FAMILIES[name] = fam
    return fam


SSBO_TWIN = "_ssbo"   # the suffix of a family's storage-only twin (texel_twins)


def texel_twins(name, source, variants, group, defines=None, **kw):
    """Declare family `name` and its storage-only twin `<name>_ssbo`: the same shader with NO_TEXEL
    defined, so it has no texel view bindings (launch_strided runs the twin when a launch reads and
    writes nothing through texels: an unused bound view still costs a CPU driver per dispatch)."""
    fam = family(name, source, variants, group, defines=defines, **kw)
    family(name + SSBO_TWIN, source, {t: tuple(f"{n}{SSBO_TWIN}" for n in v.names) for t, v in fam.variants.items()},
           group, defines={**(defines or {}), "NO_TEXEL": 1},
           **{k: v for k, v in kw.items() if k not in ("extra", "tag_texel_formats")})
    return fam


def storage_twin(variant):
    """The storage-only twin of a variant declared by texel_twins, or None."""
    fam = FAMILIES.get(variant.family + SSBO_TWIN)
    return None if fam is None else fam.variants.get(variant.tag)


def kernel(family_name, tag):
    return FAMILIES[family_name].variants[tag]


def wide_or_plain(plain, wide, tag, features):
    """A faster twin family's variant (e.g. 64-bit-word loads) where the device has every feature it needs
    (`features`), else the plain family's: kernel(wide, tag) or kernel(plain, tag)."""
    v = FAMILIES[wide].variants.get(tag)
    return v if v is not None and features.issuperset(v.features) else kernel(plain, tag)


def float_variants(prefix, tags=("f32", "f16", "bf16", "f64"), bare="f32"):
    """The inventory's naming of float families: `unary`, `unary_f16`, ... (f32 has no suffix)."""
    return {t: prefix if t == bare else f"{prefix}_{t}" for t in tags}


def width_variants(prefix, tags=("b1", "b2", "b4", "b8")):
    return {t: f"{prefix}_{t}" for t in tags}


# Workgroups assumed to occupy a GPU (Vulkan reports no core count); see parallel_groups.
GPU_PARALLEL_GROUPS = 128


def parallel_groups(device):
    """Workgroups a launch needs to occupy `device`: the cores this process may use on a CPU device (its
    workgroups run one per driver thread), GPU_PARALLEL_GROUPS on a GPU. Routes that trade extra passes
    for occupancy ask it: attention's key splits (decode_target), matmul's split-K, cumsum's serial walk."""
    if device.device_type == "cpu":
        import os
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return GPU_PARALLEL_GROUPS


def occupying_wg(device, invocations, wg, floor, waves=1):
    """wg halved (not below floor) until `invocations` make waves x parallel_groups(device) workgroups: a
    CPU device runs a workgroup per driver thread, so a few large workgroups leave its cores idle."""
    while wg // 2 >= floor and -(-invocations // wg) < waves * parallel_groups(device):
        wg //= 2
    return wg
