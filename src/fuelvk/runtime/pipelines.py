"""Lazily built compute pipelines, cached by (variant id, specialization constants).

Each pipeline carries pre-built descriptor write structs for its bindings. With
VK_KHR_push_descriptor they are pushed straight into the command buffer (one call, no pool); without
it (or with FUELVK_NO_PUSH_DESCRIPTOR=1) the stream writes them into a descriptor set from its
per-batch pools (runtime/commands.py): the set layout is the same minus the push flag. A binding's
descriptor type comes from the manifest (SPIR-V reflection): storage buffers by default, texel
buffers (samplerBuffer / imageBuffer) through a VkBufferView of the bound slot.
"""
import json
import os
import struct
import threading
from pathlib import Path

from .. import config
from ..errors import BuildError, DeviceError, UnsupportedError
from ..kernels.signature import Signature
from ..spirv import evaluate
from .vk import consts, ffi, lib, check

HALF_SPEC = "HALF_NATIVE"   # the spec constant of shaders/common/half.glsl, set from Device.half_native
WHOLE_SIZE = 0xFFFFFFFFFFFFFFFF  # VK_WHOLE_SIZE (the bindings export it as -1)
DESCRIPTOR_TYPES = {"storage_buffer": consts.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                    "uniform_texel_buffer": consts.VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER,
                    "storage_texel_buffer": consts.VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER}


def spv_dir():
    env = config.get("FUELVK_SPV_DIR")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for cand in (here.parents[1] / "spv", here.parents[3] / "spv"):
        if (cand / "manifest.json").exists():
            return cand
    raise BuildError("spv/manifest.json not found (run `python build_shaders.py` or set FUELVK_SPV_DIR)")


def disk_cache_path(device, stem):
    """Where per-driver data (the VkPipelineCache, the probed loop cap) lives on disk:
    $FUELVK_CACHE_DIR or ~/.cache/fuelvk, keyed by device UUID + driver version; None when
    FUELVK_PIPELINE_CACHE=0 turns the disk cache off."""
    if not config.get("FUELVK_PIPELINE_CACHE"):
        return None
    root = config.get("FUELVK_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "fuelvk")
    return Path(root) / f"{stem}-{device.uuid}-{device._props.driverVersion}"



def write_whole(path, data):
    """Write a disk-cache file so readers see the old or the new file, never half of one (two contexts
    on one device, or two processes, share it): a temporary file renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def cached_probe(device, stem, version, probe):
    """A per-driver probe's record (a JSON dict): read from disk_cache_path(device, stem) when a record
    of this `version` is there, else `probe()`, stored for the next process (the disk cache is best
    effort: an unreadable or unwritable file only means probing again)."""
    path = disk_cache_path(device, stem)
    path = None if path is None else path.with_suffix(".json")
    if path is not None:
        try:
            rec = json.loads(path.read_text())
            if rec.get("version") == version:
                return rec
        except (OSError, ValueError, AttributeError):
            pass
    rec = dict(probe(), version=version)
    if path is not None:
        try:
            write_whole(path, json.dumps(rec).encode())
        except OSError:
            pass
    return rec

def best_device_ms(ctx, runs, rounds):
    """{name: the least device ms of runs[name]()} over `rounds` rounds that take every run in turn (a CPU
    device's speed changes from call to call with its host's load: interleaving gives each run the same
    chances), after one untimed call of each (pipeline build, first touch). The probes' timer."""
    for run in runs.values():
        run()
    ctx.stream.synchronize()
    timer, best = ctx.timer(), {}
    for _ in range(rounds):
        for name, run in runs.items():
            timer.start()
            run()
            ms, _ = timer.stop()
            best[name] = min(ms, best.get(name, ms))
    return best


class Pipeline:
    __slots__ = ("handle", "layout", "n_bindings", "infos", "infos_bytes", "writes", "writes_list", "push_size",
                 "variant", "views", "texel", "set_layout", "counts", "_keep")


class PipelineCache:
    def __init__(self, device):
        self.device = device
        self.dir = spv_dir()
        self.manifest = json.loads((self.dir / "manifest.json").read_text())["variants"]
        self.lock = device.lock   # guards creation (lookups of existing pipelines are plain dict reads)
        self.pipelines = {}
        self._modules = {}
        self._signatures = {}
        self._set_layouts = {}
        self._vk_cache = self._load_vk_cache()

    # -- on-disk VkPipelineCache, keyed by device UUID + driver --------------------------------------
    def _cache_path(self):
        path = disk_cache_path(self.device, "pipelines")
        return None if path is None else path.with_suffix(".bin")

    def _load_vk_cache(self):
        data = b""
        path = self._cache_path()
        if path is not None:
            try:
                data = path.read_bytes()
            except OSError:
                data = b""
        blob = ffi.from_buffer(data) if data else ffi.NULL
        info = ffi.new("VkPipelineCacheCreateInfo*", {"sType": consts.VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                                                      "initialDataSize": len(data), "pInitialData": blob})
        out = ffi.new("VkPipelineCache*")
        check(lib.vkCreatePipelineCache(self.device.handle, info, ffi.NULL, out), "vkCreatePipelineCache")
        return out[0]

    def save(self):
        path = self._cache_path()
        if path is None or not self.pipelines:
            return
        n = ffi.new("size_t*")
        dev = self.device.handle
        if lib.vkGetPipelineCacheData(dev, self._vk_cache, n, ffi.NULL) != consts.VK_SUCCESS:
            return
        buf = ffi.new("char[]", n[0])
        if lib.vkGetPipelineCacheData(dev, self._vk_cache, n, buf) == consts.VK_SUCCESS:
            try:
                write_whole(path, ffi.buffer(buf, n[0])[:])
            except OSError:
                pass

    # -- objects ----------------------------------------------------------------------------------
    def meta(self, vid):
        try:
            return self.manifest[vid]
        except KeyError:
            raise BuildError(f"kernel variant {vid!r} is not in {self.dir}/manifest.json; "
                             "run `python build_shaders.py`") from None

    def signature(self, variant):
        """The variant's named interface (kernels.signature.Signature), from this cache's manifest."""
        sig = self._signatures.get(variant._id)
        if sig is None:
            sig = self._signatures[variant._id] = Signature(variant.id, self.meta(variant.id))
        return sig

    def _module(self, vid):
        mod = self._modules.get(vid)
        if mod is None:
            code = (self.dir / self.meta(vid)["spv"]).read_bytes()
            info = ffi.new("VkShaderModuleCreateInfo*", {"sType": consts.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                                         "codeSize": len(code),
                                                         "pCode": ffi.cast("uint32_t*", ffi.from_buffer(code))})
            out = ffi.new("VkShaderModule*")
            check(lib.vkCreateShaderModule(self.device.handle, info, ffi.NULL, out), f"vkCreateShaderModule({vid})")
            mod = self._modules[vid] = out[0]
        return mod

    def _set_layout(self, types):
        """The set layout for bindings 0..n-1 of the given descriptor types (a push-descriptor layout
        where the device pushes descriptors)."""
        lay = self._set_layouts.get(types)
        if lay is None:
            n = len(types)
            binds = ffi.new("VkDescriptorSetLayoutBinding[]", [
                {"binding": i, "descriptorType": t, "descriptorCount": 1,
                 "stageFlags": consts.VK_SHADER_STAGE_COMPUTE_BIT} for i, t in enumerate(types)])
            info = ffi.new("VkDescriptorSetLayoutCreateInfo*", {
                "sType": consts.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                "flags": consts.VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR
                if self.device.push_descriptor is not None else 0,
                "bindingCount": n, "pBindings": binds})
            out = ffi.new("VkDescriptorSetLayout*")
            check(lib.vkCreateDescriptorSetLayout(self.device.handle, info, ffi.NULL, out),
                  "vkCreateDescriptorSetLayout")
            lay = self._set_layouts[types] = out[0]
        return lay

    def get(self, variant, spec=()):
        """The pipeline of a registry Variant with the given specialization constant values."""
        key = (variant._id, spec)
        pipe = self.pipelines.get(key)
        if pipe is None:
            with self.lock:
                pipe = self.pipelines.get(key)
                if pipe is None:
                    if self.device.closed:
                        raise DeviceError("the fuelvk device was closed; create new arrays")
                    pipe = self.pipelines[key] = self._create(variant, spec)
        return pipe

    def over_limits(self, variant, spec=()):
        """[(quantity, value, limit name, limit)] that the variant specialized with `spec` exceeds on
        this device (its limits, with FUELVK_LIMITS applied): workgroup size and invocations, shared
        memory, push constants. Computed from the manifest's reflection; nothing is created."""
        meta, lim = self.meta(variant.id), self.device.limits
        size = [evaluate(e, spec)
                for e in (meta.get("workgroup_size_spec") or meta["workgroup_size"] or (1, 1, 1))]
        checks = [(f"workgroup size {'xyz'[i]}", n, f"maxComputeWorkGroupSize[{i}]", lim.maxComputeWorkGroupSize[i])
                  for i, n in enumerate(size)]
        checks += [("workgroup invocations", size[0] * size[1] * size[2], "maxComputeWorkGroupInvocations",
                    lim.maxComputeWorkGroupInvocations),
                   ("shared memory bytes", evaluate(meta.get("shared_bytes", 0), spec), "maxComputeSharedMemorySize",
                    lim.maxComputeSharedMemorySize),
                   ("push-constant bytes", meta["push_constant_size"], "maxPushConstantsSize", lim.maxPushConstantsSize)]
        return [c for c in checks if c[1] > c[3]]

    def fits(self, variant, spec=()):
        """Whether a pipeline of the variant with `spec` fits the device limits (route pickers ask
        this instead of catching the error get() would raise)."""
        return not self.over_limits(variant, spec)

    def specialization(self, variant, spec=()):
        """spec plus the constants a device property sets where the caller does not: HALF_NATIVE of
        shaders/common/half.glsl from Device.half_native (runtime/halfconv.py). Pipelines are cached
        under the caller's spec: the property is fixed per device (tests that force it start a fresh
        pipeline dict)."""
        half = self.meta(variant.id)["spec_names"].get(HALF_SPEC)
        if half is None or any(cid == half for cid, _ in spec):
            return spec
        return tuple(sorted(spec + ((half, int(self.device.half_native)),)))

    def _create(self, variant, spec):
        self.device.require(variant.features, f"kernel {variant.id} ({variant.name})")
        spec = self.specialization(variant, spec)
        over = self.over_limits(variant, spec)
        if over:
            profile = f" (limits profile {self.device.limits_profile!r})" if self.device.limits_profile else ""
            raise UnsupportedError(f"kernel {variant.id} ({variant.name}) specialized {dict(spec)}: " + "; ".join(
                f"{q} {v} exceeds {n} = {lim}" for q, v, n, lim in over) + f" on {self.device.name}{profile}")
        meta = self.meta(variant.id)
        dev = self.device.handle
        keep = []
        kinds, texel = self._binding_kinds(variant, meta)
        n = len(kinds)
        types = tuple(DESCRIPTOR_TYPES[k] for k in kinds)
        set_layout = ffi.new("VkDescriptorSetLayout[1]", [self._set_layout(types)])
        push_size = meta["push_constant_size"]
        rng = ffi.new("VkPushConstantRange*", {"stageFlags": consts.VK_SHADER_STAGE_COMPUTE_BIT, "offset": 0,
                                               "size": push_size})
        li = ffi.new("VkPipelineLayoutCreateInfo*", {
            "sType": consts.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, "setLayoutCount": 1,
            "pSetLayouts": set_layout, "pushConstantRangeCount": 1 if push_size else 0,
            "pPushConstantRanges": rng if push_size else ffi.NULL})
        lo = ffi.new("VkPipelineLayout*")
        check(lib.vkCreatePipelineLayout(dev, li, ffi.NULL, lo), "vkCreatePipelineLayout")
        spec_info = ffi.NULL
        if spec:
            entries = ffi.new("VkSpecializationMapEntry[]", [
                {"constantID": cid, "offset": 4 * i, "size": 4} for i, (cid, _) in enumerate(spec)])
            data = ffi.new("char[]", struct.pack(f"<{len(spec)}I", *(v & 0xFFFFFFFF for _, v in spec)))
            spec_info = ffi.new("VkSpecializationInfo*", {"mapEntryCount": len(spec), "pMapEntries": entries,
                                                          "dataSize": 4 * len(spec), "pData": data})
            keep += [entries, data, spec_info]
        entry = ffi.new("char[]", meta["entry_point"].encode())
        stage = {"sType": consts.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                 "stage": consts.VK_SHADER_STAGE_COMPUTE_BIT, "module": self._module(variant.id), "pName": entry,
                 "pSpecializationInfo": spec_info}
        ci = ffi.new("VkComputePipelineCreateInfo*", {"sType": consts.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                                                      "stage": stage, "layout": lo[0]})
        out = ffi.new("VkPipeline*")
        check(lib.vkCreateComputePipelines(dev, self._vk_cache, 1, ci, ffi.NULL, out),
              f"vkCreateComputePipelines({variant.id})")
        p = Pipeline()
        p.handle, p.layout, p.n_bindings, p.push_size, p.variant = out[0], lo[0], n, push_size, variant
        p.infos = ffi.new("VkDescriptorBufferInfo[]", [{"offset": 0, "range": WHOLE_SIZE} for _ in range(n)])
        # The bytes of the infos array: a dispatch copies its buffers' packed descriptors (Buffer.descriptor)
        # in with one slice assignment.
        p.infos_bytes = ffi.buffer(p.infos)
        p.views = ffi.new("VkBufferView[]", max(n, 1))
        p.texel = texel
        p.writes = ffi.new("VkWriteDescriptorSet[]", [
            {"sType": consts.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, "dstBinding": i, "descriptorCount": 1,
             "descriptorType": t, "pBufferInfo": p.infos + i, "pTexelBufferView": p.views + i}
            for i, t in enumerate(types)])
        p.writes_list = [p.writes[i] for i in range(n)]
        p.set_layout = set_layout           # pSetLayouts of a descriptor-set allocation
        p.counts = tuple((t, types.count(t)) for t in sorted(set(types)))   # descriptors per type
        p._keep = keep + [entry, ci, set_layout]
        return p

    def _binding_kinds(self, variant, meta):
        """Descriptor kind per binding 0..n-1, and (binding, format, kind, what) for texel bindings."""
        by_binding = {}
        for b in meta["bindings"]:   # aliased variables (several views of one binding) must agree
            if by_binding.setdefault(b["binding"], b).get("type") != b.get("type"):
                raise BuildError(f"kernel {variant.id}: binding {b['binding']} is declared with two descriptor types")
        if sorted(by_binding) != list(range(len(by_binding))):
            raise BuildError(f"kernel {variant.id}: bindings {sorted(by_binding)} are not 0..n-1")
        formats = dict(variant.texel_formats)
        kinds, texel = [], []
        for i in range(len(by_binding)):
            b = by_binding[i]
            kind = b.get("type", "storage_buffer")
            if kind not in DESCRIPTOR_TYPES:
                raise UnsupportedError(f"kernel {variant.id}: binding {i} is a {kind}; fuelvk binds "
                                       f"{sorted(DESCRIPTOR_TYPES)}")
            if kind != "storage_buffer":
                fmt = formats.get(i) or b.get("format")
                if fmt is None:
                    raise BuildError(f"kernel {variant.id}: texel buffer binding {i} has no format (give it "
                                     "in the registry's tag_texel_formats, or a format qualifier in the shader)")
                texel.append((i, fmt, kind, f"kernel {variant.id} binding {i}"))
            kinds.append(kind)
        return kinds, tuple(texel)

    def destroy(self):
        with self.lock:
            self._destroy()

    def _destroy(self):
        dev = self.device.handle
        self.save()
        for p in self.pipelines.values():
            lib.vkDestroyPipeline(dev, p.handle, ffi.NULL)
            lib.vkDestroyPipelineLayout(dev, p.layout, ffi.NULL)
        for m in self._modules.values():
            lib.vkDestroyShaderModule(dev, m, ffi.NULL)
        for lay in self._set_layouts.values():
            lib.vkDestroyDescriptorSetLayout(dev, lay, ffi.NULL)
        lib.vkDestroyPipelineCache(dev, self._vk_cache, ffi.NULL)
        self.pipelines.clear()
