"""Instance, physical-device choice, optional features, logical device and queue."""
import threading

from .. import config
from ..errors import DeviceError, UnsupportedError
from .vk import consts, ffi, lib, check, new, cstrs, enumerate_, proc, instance_proc

DEVICE_TYPE_RANK = {consts.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: 0, consts.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: 1,
                    consts.VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: 2, consts.VK_PHYSICAL_DEVICE_TYPE_CPU: 3,
                    consts.VK_PHYSICAL_DEVICE_TYPE_OTHER: 4}
DEVICE_TYPE_NAME = {consts.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: "discrete", consts.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
                    "integrated", consts.VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: "virtual",
                    consts.VK_PHYSICAL_DEVICE_TYPE_CPU: "cpu", consts.VK_PHYSICAL_DEVICE_TYPE_OTHER: "other"}
VALIDATION_LAYER = "VK_LAYER_KHRONOS_validation"

# feature name -> (struct key, field); the registry's `features` use these names.
FEATURE_FIELDS = {
    "float64": ("core", "shaderFloat64"), "int64": ("core", "shaderInt64"), "int16": ("core", "shaderInt16"),
    "storage16": ("v11", "storageBuffer16BitAccess"), "storage8": ("v12", "storageBuffer8BitAccess"),
    "float16": ("v12", "shaderFloat16"), "int8": ("v12", "shaderInt8"),
    "int64_atomics": ("v12", "shaderBufferInt64Atomics"),
    "subgroup_size_control": ("v13", "subgroupSizeControl"), "full_subgroups": ("v13", "computeFullSubgroups"),
    "float32_atomic_add": ("atomic_float", "shaderBufferFloat32AtomicAdd"),
    "float64_atomic_add": ("atomic_float", "shaderBufferFloat64AtomicAdd"),
    "cooperative_matrix": ("coop", "cooperativeMatrix"),
    # what the Slang cooperative-matrix SPIR-V declares besides CooperativeMatrixKHR
    "uniform_storage16": ("v11", "uniformAndStorageBuffer16BitAccess"),
    "memory_model": ("v12", "vulkanMemoryModel"), "memory_model_device_scope": ("v12", "vulkanMemoryModelDeviceScope"),
}
# plus subgroup_basic / subgroup_arithmetic / subgroup_ballot / subgroup_shuffle (compute stage), read
# from VkPhysicalDeviceSubgroupProperties: kernels using subgroupAdd etc. declare them.
OPTIONAL_EXTENSIONS = ("VK_KHR_push_descriptor", "VK_EXT_shader_atomic_float", "VK_KHR_cooperative_matrix")


_UNPROBED = object()

# FUELVK_LIMITS=<name>: run as if the device had these tighter limits (VkPhysicalDeviceLimits field
# names; subgroupSize is what the kernels that pick tiles from the subgroup width see), so the
# route/tile pickers and the pipeline-limits check (runtime/pipelines.py) of smaller GPUs run in CI.
LIMITS_ENV = "FUELVK_LIMITS"
LIMIT_PROFILES = {
    "small": {"maxComputeSharedMemorySize": 16384, "maxComputeWorkGroupInvocations": 256,
              "maxComputeWorkGroupSize": (256, 256, 64), "maxPushConstantsSize": 128,
              "maxStorageBufferRange": 64 << 20, "subgroupSize": 32},
}


class Limits:
    """VkPhysicalDeviceLimits as fuelvk sees them: the device's, with a profile's values where they
    are tighter (the minimum of both, per component for the 3-vectors). `overrides` holds those."""

    def __init__(self, real, profile):
        self._real = real
        self.overrides = {}
        for name, want in profile.items():
            if name == "subgroupSize":
                continue
            have = getattr(real, name)
            if isinstance(want, tuple):
                got = tuple(min(int(h), w) for h, w in zip(have, want))
                if got != tuple(have):
                    self.overrides[name] = got
            elif want < have:
                self.overrides[name] = want

        # Every field a plain attribute (hot paths read limits per call; a __getattr__ costs ~1.4 us):
        # arrays as tuples, a profile's tighter value where it has one.
        for name, _ in ffi.typeof(real).fields if isinstance(real, ffi.CData) else ():
            value = getattr(real, name)
            if isinstance(value, ffi.CData):
                value = tuple(value)
            setattr(self, name, self.overrides.get(name, value))

    def __getattr__(self, name):
        """What is not a plain attribute (subgroupSize, set into overrides later; any field of a
        non-cffi `real`)."""
        over = self.__dict__.get("overrides", {})
        return over[name] if name in over else getattr(self._real, name)


def _limits_profile(name):
    name = (name or "").strip().lower()
    if name in ("", "device", "none"):
        return None, {}
    if name not in LIMIT_PROFILES:
        raise DeviceError(f"{LIMITS_ENV}={name!r} is not a limits profile; accepted: "
                          f"{', '.join(LIMIT_PROFILES)} (or unset / 'device' for the device's own limits)")
    return name, LIMIT_PROFILES[name]


class Messenger:
    """Collects validation-layer messages; tests fail on any that a test caused."""

    def __init__(self):
        self.messages = []
        self._lock = threading.Lock()

        @ffi.callback("VkBool32(VkDebugUtilsMessageSeverityFlagBitsEXT, VkDebugUtilsMessageTypeFlagsEXT,"
                      " const VkDebugUtilsMessengerCallbackDataEXT*, void*)")
        def callback(severity, types, data, user):
            msg = ffi.string(data.pMessage).decode(errors="replace") if data.pMessage else "?"
            with self._lock:
                self.messages.append(msg)
            return 0
        self.callback = callback

    def take(self):
        with self._lock:
            msgs, self.messages = self.messages, []
        return msgs


def _layers_available():
    names, _ = enumerate_(lib.vkEnumerateInstanceLayerProperties, "VkLayerProperties")
    return {ffi.string(p.layerName).decode() for p in names}


def _instance_version():
    """The highest API version up to 1.3 the loader offers (1.3 feature structs need a 1.3 instance)."""
    v = ffi.new("uint32_t*")
    check(lib.vkEnumerateInstanceVersion(v), "vkEnumerateInstanceVersion")
    return min(v[0], consts.VK_MAKE_VERSION(1, 3, 0))


class Device:
    """One Vulkan device and its compute queue; everything else hangs off it."""

    def __init__(self, selector=None, validation=None):
        self._keep = []
        # One re-entrant lock per device guards the queue, command recording, the memory pool and the
        # pipeline cache (runtime/__init__.py says why one lock); re-entrant because a pool
        # allocation that fails synchronizes the stream under it.
        self.lock = threading.RLock()
        if validation is None:
            validation = config.get("FUELVK_VALIDATION")
        self.closed = False
        self.messenger = None
        self.limits_profile, self._profile = _limits_profile(config.get(LIMITS_ENV))
        self._create_instance(validation)
        self._choose_physical(selector if selector is not None else config.get("FUELVK_DEVICE"))
        self._create_device()

    # -- instance ---------------------------------------------------------------------------------
    def _create_instance(self, validation):
        keep = self._keep
        layers, exts = [], []
        if validation:
            if VALIDATION_LAYER not in _layers_available():
                raise DeviceError("FUELVK_VALIDATION is set but VK_LAYER_KHRONOS_validation is not installed "
                                  "(Debian: apt-get install vulkan-validationlayers)")
            layers.append(VALIDATION_LAYER)
            exts.append("VK_EXT_debug_utils")
            self.messenger = Messenger()
        app = new("VkApplicationInfo*", {"sType": consts.VK_STRUCTURE_TYPE_APPLICATION_INFO,
                                         "pApplicationName": cstrs(["fuelvk"], keep)[0],
                                         "apiVersion": _instance_version()}, keep)
        info = new("VkInstanceCreateInfo*", {
            "sType": consts.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, "pApplicationInfo": app,
            "enabledLayerCount": len(layers), "ppEnabledLayerNames": cstrs(layers, keep),
            "enabledExtensionCount": len(exts), "ppEnabledExtensionNames": cstrs(exts, keep)}, keep)
        out = ffi.new("VkInstance*")
        res = lib.vkCreateInstance(info, ffi.NULL, out)
        if res == consts.VK_ERROR_INCOMPATIBLE_DRIVER:   # what the loader says when it finds no driver at all
            raise DeviceError("no Vulkan driver found (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER, no driver "
                              "offers Vulkan 1.2): on Debian, apt-get install mesa-vulkan-drivers for lavapipe (the "
                              "CPU driver), or your GPU's driver; VK_ICD_FILENAMES, when set, must name a driver's json")
        check(res, "vkCreateInstance")
        self.instance = out[0]
        if self.messenger:
            sev = (consts.VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | consts.VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)
            typ = (consts.VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT | consts.VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT)
            mi = new("VkDebugUtilsMessengerCreateInfoEXT*", {
                "sType": consts.VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT, "messageSeverity": sev,
                "messageType": typ, "pfnUserCallback": self.messenger.callback}, keep)
            h = ffi.new("VkDebugUtilsMessengerEXT*")
            create = instance_proc(self.instance, "vkCreateDebugUtilsMessengerEXT")
            check(create(self.instance, mi, ffi.NULL, h), "vkCreateDebugUtilsMessengerEXT")
            self._messenger_handle = h[0]

    # -- physical device --------------------------------------------------------------------------
    def _choose_physical(self, selector):
        devs, _ = enumerate_(lib.vkEnumeratePhysicalDevices, "VkPhysicalDevice", self.instance)
        if not devs:
            raise DeviceError("no Vulkan device found (on Debian: apt-get install mesa-vulkan-drivers for lavapipe)")
        cands = []
        for i, d in enumerate(devs):
            props = ffi.new("VkPhysicalDeviceProperties*")
            lib.vkGetPhysicalDeviceProperties(d, props)
            cands.append((i, d, props, ffi.string(props.deviceName).decode()))
        if selector not in (None, ""):
            if str(selector).isdigit():
                pick = [c for c in cands if c[0] == int(selector)]
            else:
                pick = [c for c in cands if str(selector).lower() in c[3].lower()]
            if not pick:
                names = "; ".join(f"{c[0]}: {c[3]}" for c in cands)
                raise DeviceError(f"device selector {selector!r} (FUELVK_DEVICE / FUELVK_DEVICES) matches no device; "
                                  f"available: {names}")
        else:
            pick = sorted(cands, key=lambda c: (DEVICE_TYPE_RANK.get(c[2].deviceType, 9), c[0]))
        self.index, self.physical, self._props, self.name = pick[0]
        if self._props.apiVersion < consts.VK_MAKE_VERSION(1, 2, 0):
            raise DeviceError(f"{self.name} supports Vulkan {self.api_version}; fuelvk needs 1.2")
        self.limits = Limits(self._props.limits, self._profile)
        # Device.loop_budget: probed on first use by runtime/loopcap.py (through the Context, which
        # sets _budget_source), never inferred from the device name.
        self._loop_budget = _UNPROBED
        self.loop_cap = None
        self._budget_source = None
        # Device.texel_loads / texel_stores: probed on first use by runtime/loadpath.py (through the Context).
        self._texel_loads = self._texel_stores = _UNPROBED
        self.load_probe = None
        self._texel_source = None
        # Device.half_native: probed on first use by runtime/halfconv.py (through the Context).
        self._half_native = _UNPROBED
        self.half_probe = None
        self._half_source = None
        self.device_type = DEVICE_TYPE_NAME.get(self._props.deviceType, "other")
        ext_list, _ = enumerate_(lib.vkEnumerateDeviceExtensionProperties, "VkExtensionProperties",
                                 self.physical, ffi.NULL)
        self.available_extensions = {ffi.string(e.extensionName).decode() for e in ext_list}
        # FUELVK_NO_PUSH_DESCRIPTOR=1 leaves VK_KHR_push_descriptor disabled, as on a device without it:
        # dispatches then bind pooled descriptor sets (runtime/commands.py), so CI runs that path too.
        no_push = config.get("FUELVK_NO_PUSH_DESCRIPTOR")
        self.extensions = [e for e in OPTIONAL_EXTENSIONS if e in self.available_extensions
                           and not (no_push and e == "VK_KHR_push_descriptor")]
        if no_push:
            self.descriptor_path = ("descriptor sets", "forced (FUELVK_NO_PUSH_DESCRIPTOR=1)")
        elif "VK_KHR_push_descriptor" in self.extensions:
            self.descriptor_path = ("push descriptors", "auto (VK_KHR_push_descriptor present)")
        else:
            self.descriptor_path = ("descriptor sets", "auto (no VK_KHR_push_descriptor)")
        subgroup = ffi.new("VkPhysicalDeviceSubgroupProperties*",
                           {"sType": consts.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES})
        driver = ffi.new("VkPhysicalDeviceDriverProperties*",
                         {"sType": consts.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES, "pNext": subgroup})
        p2 = ffi.new("VkPhysicalDeviceProperties2*",
                     {"sType": consts.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, "pNext": driver})
        lib.vkGetPhysicalDeviceProperties2(self.physical, p2)
        self.subgroup_size = subgroup.subgroupSize
        # A profile's subgroup width applies where the kernels' assumption holds (a multiple of 8:
        # their SG8 paths shuffle within 8-lane groups, correct for any such width).
        want = self._profile.get("subgroupSize")
        if want and want != self.subgroup_size and self.subgroup_size % 8 == 0:
            self.limits.overrides["subgroupSize"] = self.subgroup_size = want
        ops = subgroup.supportedOperations if subgroup.supportedStages & consts.VK_SHADER_STAGE_COMPUTE_BIT else 0
        self._subgroup_features = {name for name, bit in (
            ("subgroup_basic", consts.VK_SUBGROUP_FEATURE_BASIC_BIT),
            ("subgroup_arithmetic", consts.VK_SUBGROUP_FEATURE_ARITHMETIC_BIT),
            ("subgroup_ballot", consts.VK_SUBGROUP_FEATURE_BALLOT_BIT),
            ("subgroup_shuffle", consts.VK_SUBGROUP_FEATURE_SHUFFLE_BIT)) if ops & bit}
        self.driver = f"{ffi.string(driver.driverName).decode()} {ffi.string(driver.driverInfo).decode()}".strip()
        self.uuid = bytes(ffi.buffer(self._props.pipelineCacheUUID, 16)).hex()
        self._query_features()
        fams, _ = enumerate_(lib.vkGetPhysicalDeviceQueueFamilyProperties, "VkQueueFamilyProperties",
                             self.physical)
        compute = [i for i, f in enumerate(fams) if f.queueFlags & consts.VK_QUEUE_COMPUTE_BIT]
        if not compute:
            raise DeviceError(f"{self.name} has no compute queue")
        # Prefer a queue family that also does graphics? No: a compute one is what we need; first is fine.
        self.queue_family = compute[0]
        self.timestamp_bits = fams[self.queue_family].timestampValidBits
        self.timestamp_period_ns = self.limits.timestampPeriod

    def _query_features(self):
        keep = self._keep
        chain = []
        def link(ctype, stype):
            s = new(ctype, {"sType": stype, "pNext": chain[-1] if chain else ffi.NULL}, keep)
            chain.append(s)
            return s
        self._feat = {"v11": link("VkPhysicalDeviceVulkan11Features*", consts.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES),
                      "v12": link("VkPhysicalDeviceVulkan12Features*", consts.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES)}
        if min(self._props.apiVersion, _instance_version()) >= consts.VK_MAKE_VERSION(1, 3, 0):
            self._feat["v13"] = link("VkPhysicalDeviceVulkan13Features*",
                                     consts.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES)
        if "VK_EXT_shader_atomic_float" in self.extensions:
            self._feat["atomic_float"] = link("VkPhysicalDeviceShaderAtomicFloatFeaturesEXT*",
                                              consts.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT)
        if "VK_KHR_cooperative_matrix" in self.extensions:
            self._feat["coop"] = link("VkPhysicalDeviceCooperativeMatrixFeaturesKHR*",
                                      consts.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR)
        f2 = new("VkPhysicalDeviceFeatures2*", {"sType": consts.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                                "pNext": chain[-1]}, keep)
        lib.vkGetPhysicalDeviceFeatures2(self.physical, f2)
        self._feat["core"] = f2.features
        self._features2 = f2
        self.features = {name for name, (key, field) in FEATURE_FIELDS.items()
                         if key in self._feat and getattr(self._feat[key], field)} | self._subgroup_features
        # Enable only what fuelvk uses; turn off the rest to keep the create-info honest.
        for key in ("v11", "v12", "v13", "atomic_float", "coop"):
            if key not in self._feat:
                continue
            used = {f for n, (k, f) in FEATURE_FIELDS.items() if k == key}
            s = self._feat[key]
            for field in dir(s):
                if field not in ("sType", "pNext") and field not in used and isinstance(getattr(s, field), int):
                    setattr(s, field, 0)
        core = f2.features
        for field in dir(core):
            if field not in ("shaderFloat64", "shaderInt64", "shaderInt16"):
                setattr(core, field, 0)
        if "v12" in self._feat:
            self._feat["v12"].hostQueryReset = 0
        self.coop_matrix_shapes = self._coop_shapes() if "cooperative_matrix" in self.features else []

    def _coop_shapes(self):
        fn = instance_proc(self.instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR")
        if fn is None:
            return []
        n = ffi.new("uint32_t*")
        fn(self.physical, n, ffi.NULL)
        arr = ffi.new("VkCooperativeMatrixPropertiesKHR[]", n[0])
        for i in range(n[0]):
            arr[i].sType = consts.VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR
        fn(self.physical, n, arr)
        comp = {consts.VK_COMPONENT_TYPE_FLOAT16_KHR: "f16", consts.VK_COMPONENT_TYPE_FLOAT32_KHR: "f32"}
        return [dict(M=a.MSize, N=a.NSize, K=a.KSize, A=comp.get(a.AType, str(a.AType)),
                     B=comp.get(a.BType, str(a.BType)), C=comp.get(a.CType, str(a.CType)),
                     R=comp.get(a.ResultType, str(a.ResultType)), scope=a.scope) for a in arr]

    # -- logical device ---------------------------------------------------------------------------
    def _create_device(self):
        keep = self._keep
        prio = new("float*", 1.0, keep)
        qi = new("VkDeviceQueueCreateInfo*", {"sType": consts.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                              "queueFamilyIndex": self.queue_family, "queueCount": 1,
                                              "pQueuePriorities": prio}, keep)
        info = new("VkDeviceCreateInfo*", {
            "sType": consts.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, "pNext": self._features2,
            "queueCreateInfoCount": 1, "pQueueCreateInfos": qi,
            "enabledExtensionCount": len(self.extensions),
            "ppEnabledExtensionNames": cstrs(self.extensions, keep)}, keep)
        out = ffi.new("VkDevice*")
        check(lib.vkCreateDevice(self.physical, info, ffi.NULL, out), "vkCreateDevice")
        self.handle = out[0]
        q = ffi.new("VkQueue*")
        lib.vkGetDeviceQueue(self.handle, self.queue_family, 0, q)
        self.queue = q[0]
        self.push_descriptor = proc(self.handle, "vkCmdPushDescriptorSetKHR") \
            if "VK_KHR_push_descriptor" in self.extensions else None

    @property
    def loop_budget(self):
        """Loop iterations (summed over its loops) one invocation may run; None: no cap, nothing is
        split. Kernels whose trip count grows with an input split their work on the host to stay
        under it. Probed on first use (runtime/loopcap.py); `loop_cap` then holds the probe's record."""
        if self._loop_budget is _UNPROBED:
            with self.lock:   # the device lock (re-entrant): the probe records and waits under it too
                if self._loop_budget is _UNPROBED:
                    if self._budget_source is None:
                        raise DeviceError(f"{self.name}: the loop budget is probed through a fuelvk Context")
                    self._loop_budget, self.loop_cap = self._budget_source()
        return self._loop_budget

    @property
    def texel_loads(self):
        """Whether memory-bound kernels read through 16-byte texel views (measured faster than storage
        buffers here) rather than storage buffers. Probed on first use (runtime/loadpath.py);
        `load_probe` then holds the probe's timings."""
        if self._texel_loads is _UNPROBED:
            with self.lock:
                if self._texel_loads is _UNPROBED:
                    if self._texel_source is None:
                        raise DeviceError(f"{self.name}: the load path is probed through a fuelvk Context")
                    (self._texel_loads, self._texel_stores), self.load_probe = self._texel_source()
        return self._texel_loads

    @property
    def texel_stores(self):
        """Whether memory-bound kernels write through 16-byte texel views (measured faster here)."""
        self.texel_loads     # probes both
        return self._texel_stores

    @property
    def half_native(self):
        """HALF_NATIVE of shaders/common/half.glsl: which f16 <-> f32 conversions float16 kernels do
        with the device's own instructions (bit 1: widening, bit 2: narrowing; checked exact and not
        slower here) rather than integer arithmetic on the bits (same bits for every non-NaN). Probed
        on first use (runtime/halfconv.py); `half_probe` then holds the record."""
        if self._half_native is _UNPROBED:
            with self.lock:
                if self._half_native is _UNPROBED:
                    if self._half_source is None:
                        raise DeviceError(f"{self.name}: the f16 conversion is probed through a fuelvk Context")
                    self._half_native, self.half_probe = self._half_source()
        return self._half_native

    @loop_budget.setter
    def loop_budget(self, value):
        self._loop_budget = value

    @property
    def api_version(self):
        v = self._props.apiVersion
        return f"{consts.VK_VERSION_MAJOR(v)}.{consts.VK_VERSION_MINOR(v)}.{consts.VK_VERSION_PATCH(v)}"

    def require(self, features, what):
        missing = [f for f in features if f not in self.features]
        if missing:
            raise UnsupportedError(f"{what} needs device features {missing}, which {self.name} does not have")

    def destroy(self):
        if self.closed:
            return
        self.closed = True
        lib.vkDeviceWaitIdle(self.handle)
        lib.vkDestroyDevice(self.handle, ffi.NULL)
        if self.messenger:
            instance_proc(self.instance, "vkDestroyDebugUtilsMessengerEXT")(
                self.instance, self._messenger_handle, ffi.NULL)
        lib.vkDestroyInstance(self.instance, ffi.NULL)
