"""Minimal SPIR-V reflection: push-constant block layout, bindings, workgroup size, spec ids.

Pure Python over the word stream; used by build_shaders.py to write spv/manifest.json and by the
tests that check each family's Params packing against what the compiler actually laid out.
"""
import struct

MAGIC = 0x07230203
OP_NAME, OP_MEMBER_NAME, OP_ENTRY, OP_EXEC_MODE = 5, 6, 15, 16
OP_TYPE_INT, OP_TYPE_FLOAT, OP_TYPE_VECTOR, OP_TYPE_ARRAY = 21, 22, 23, 28
OP_TYPE_IMAGE, OP_TYPE_SAMPLED_IMAGE = 25, 27
OP_TYPE_STRUCT, OP_TYPE_POINTER, OP_CONSTANT, OP_VARIABLE = 30, 32, 43, 59
OP_SPEC_CONSTANT = 50
OP_DECORATE, OP_MEMBER_DECORATE, OP_CAPABILITY = 71, 72, 17
DEC_SPEC_ID, DEC_BLOCK, DEC_BUFFER_BLOCK, DEC_ARRAY_STRIDE = 1, 2, 3, 6
DEC_BINDING, DEC_SET, DEC_OFFSET = 33, 34, 35
SC_UNIFORM_CONSTANT, SC_UNIFORM, SC_PUSH, SC_STORAGE = 0, 2, 9, 12
DIM_BUFFER = 5
# SPIR-V ImageFormat -> VkFormat name (VK_FORMAT_<name>) for storage texel buffers' format qualifiers.
IMAGE_FORMATS = {1: "R32G32B32A32_SFLOAT", 2: "R16G16B16A16_SFLOAT", 3: "R32_SFLOAT", 6: "R32G32_SFLOAT",
                 9: "R16_SFLOAT", 21: "R32G32B32A32_SINT", 24: "R32_SINT", 25: "R32G32_SINT",
                 30: "R32G32B32A32_UINT", 31: "R16G16B16A16_UINT", 33: "R32_UINT", 35: "R32G32_UINT",
                 36: "R16G16_UINT", 38: "R16_UINT"}
EXEC_LOCAL_SIZE, EXEC_LOCAL_SIZE_ID = 17, 38


def _string(words):
    raw = struct.pack(f"<{len(words)}I", *words)
    return raw.split(b"\0", 1)[0].decode()


def reflect(code: bytes) -> dict:
    words = struct.unpack(f"<{len(code) // 4}I", code)
    if words[0] != MAGIC:
        raise ValueError("not a SPIR-V module")
    names, member_names, member_offsets, decorations = {}, {}, {}, {}
    types, pointers, variables, consts, caps = {}, {}, [], {}, []
    local_size, local_size_ids = None, None
    i = 5
    while i < len(words):
        op, n = words[i] & 0xFFFF, words[i] >> 16
        a = words[i + 1:i + n]
        if op == OP_NAME:
            names[a[0]] = _string(a[1:])
        elif op == OP_MEMBER_NAME:
            member_names[(a[0], a[1])] = _string(a[2:])
        elif op == OP_DECORATE:
            decorations.setdefault(a[0], {})[a[1]] = a[2] if len(a) > 2 else True
        elif op == OP_MEMBER_DECORATE and a[2] == DEC_OFFSET:
            member_offsets[(a[0], a[1])] = a[3]
        elif op == OP_EXEC_MODE and a[1] == EXEC_LOCAL_SIZE:
            local_size = tuple(a[2:5])
        elif op == OP_EXEC_MODE and a[1] == EXEC_LOCAL_SIZE_ID:
            local_size_ids = tuple(a[2:5])
        elif op == OP_CAPABILITY:
            caps.append(a[0])
        elif op in (OP_TYPE_INT, OP_TYPE_FLOAT):
            types[a[0]] = ("scalar", a[1] // 8)
        elif op == OP_TYPE_VECTOR:
            types[a[0]] = ("vector", a[1], a[2])
        elif op == OP_TYPE_ARRAY:
            types[a[0]] = ("array", a[1], a[2])
        elif op == OP_TYPE_IMAGE:
            types[a[0]] = ("image", a[2], a[6], a[7])          # dim, sampled (1 sampled, 2 storage), format
        elif op == OP_TYPE_SAMPLED_IMAGE:
            types[a[0]] = ("sampled_image", a[1])
        elif op == OP_TYPE_STRUCT:
            types[a[0]] = ("struct", list(a[1:]))
        elif op == OP_TYPE_POINTER:
            pointers[a[0]] = (a[1], a[2])
        elif op in (OP_CONSTANT, OP_SPEC_CONSTANT) and len(a) >= 3:
            consts[a[1]] = a[2]
        elif op == OP_VARIABLE:
            variables.append((a[1], a[0], a[2]))
        i += n

    def size_of(t):
        kind = types[t]
        if kind[0] == "scalar":
            return kind[1]
        if kind[0] == "vector":
            return size_of(kind[1]) * kind[2]
        if kind[0] == "array":
            return decorations.get(t, {}).get(DEC_ARRAY_STRIDE, size_of(kind[1])) * consts[kind[2]]
        last = len(kind[1]) - 1
        return member_offsets.get((t, last), 0) + size_of(kind[1][last])

    def descriptor_type(sc, t):
        """{} for a storage buffer (the default, so manifests written before this key read the same),
        else {"type": ...} and, for storage texel buffers, the format qualifier's VkFormat name."""
        if sc == SC_STORAGE or (sc == SC_UNIFORM and DEC_BUFFER_BLOCK in decorations.get(t, {})):
            return {}
        if sc == SC_UNIFORM:
            return {"type": "uniform_buffer"}
        kind = types.get(t, ("other",))
        if kind[0] == "sampled_image":   # GLSL samplerBuffer (valid SPIR-V only before 1.6)
            kind = types.get(kind[1], ("other",))
            if kind[0] == "image" and kind[1] == DIM_BUFFER:
                return {"type": "uniform_texel_buffer"}
        elif kind[0] == "image" and kind[1] == DIM_BUFFER and kind[2] == 1:   # samplerless textureBuffer
            return {"type": "uniform_texel_buffer"}
        elif kind[0] == "image" and kind[1] == DIM_BUFFER and kind[2] == 2:
            out = {"type": "storage_texel_buffer"}
            if kind[3] in IMAGE_FORMATS:
                out["format"] = IMAGE_FORMATS[kind[3]]
            return out
        return {"type": "unsupported"}

    push, bindings = None, []
    for var, ptr, sc in variables:
        struct_t = pointers.get(ptr, (None, None))[1]
        if sc == SC_PUSH and struct_t in types:
            members = types[struct_t][1]
            push = {
                "size": size_of(struct_t),
                "members": [{"name": member_names.get((struct_t, k), f"m{k}"),
                             "offset": member_offsets.get((struct_t, k)),
                             "size": size_of(m)} for k, m in enumerate(members)],
            }
        elif sc in (SC_STORAGE, SC_UNIFORM, SC_UNIFORM_CONSTANT) and DEC_BINDING in decorations.get(var, {}):
            b = {"set": decorations[var].get(DEC_SET, 0), "binding": decorations[var][DEC_BINDING],
                 "name": names.get(var, "")}
            b.update(descriptor_type(sc, struct_t))
            bindings.append(b)

    spec_ids = sorted(d[DEC_SPEC_ID] for d in decorations.values() if DEC_SPEC_ID in d)
    if local_size_ids:
        local_size = tuple(consts.get(x, 0) for x in local_size_ids)
    # sampled images of Dim Buffer: invalid from SPIR-V 1.6 (Mesa 25 rejects them at any version)
    sampled_buffers = sum(1 for k in types.values() if k[0] == "sampled_image"
                          and types.get(k[1], ("other",))[:2] == ("image", DIM_BUFFER))
    return {"push_constants": push, "bindings": sorted(bindings, key=lambda b: (b["set"], b["binding"])),
            "local_size": list(local_size) if local_size else None, "spec_ids": spec_ids,
            "capabilities": sorted(set(caps)), "sampled_buffer_images": sampled_buffers}
