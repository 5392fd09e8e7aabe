"""Minimal SPIR-V reflection: push-constant block layout, bindings, workgroup size, spec ids, shared memory.

Pure Python over the word stream; used by build_shaders.py to write spv/manifest.json and by the
tests that check each family's Params packing against what the compiler actually laid out.

Workgroup sizes and shared-memory array lengths may depend on specialization constants, so they are
recorded as expressions (`workgroup_size_spec`, `shared_bytes`) that evaluate() computes for the
values a pipeline is specialized with: an int, ["spec", id, default], or [op, *operands] with op one
of EXPR_OPS. The runtime checks them against the device limits before creating a pipeline.
"""
import re
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
DEC_NON_WRITABLE, DEC_NON_READABLE = 24, 25
SC_UNIFORM_CONSTANT, SC_UNIFORM, SC_PUSH, SC_STORAGE = 0, 2, 9, 12
DIM_BUFFER = 5
# SPIR-V ImageFormat -> VkFormat name (VK_FORMAT_<name>) for storage texel buffers' format qualifiers.
IMAGE_FORMATS = {1: "R32G32B32A32_SFLOAT", 2: "R16G16B16A16_SFLOAT", 3: "R32_SFLOAT", 6: "R32G32_SFLOAT",
                 9: "R16_SFLOAT", 21: "R32G32B32A32_SINT", 24: "R32_SINT", 25: "R32G32_SINT",
                 30: "R32G32B32A32_UINT", 31: "R16G16B16A16_UINT", 33: "R32_UINT", 35: "R32G32_UINT",
                 36: "R16G16_UINT", 38: "R16_UINT"}
EXEC_LOCAL_SIZE, EXEC_LOCAL_SIZE_ID = 17, 38
OP_EXEC_MODE_ID = 331
OP_TYPE_BOOL, OP_TYPE_MATRIX = 20, 24
OP_CONSTANT_TRUE, OP_CONSTANT_FALSE, OP_CONSTANT_COMPOSITE = 41, 42, 44
OP_SPEC_TRUE, OP_SPEC_FALSE, OP_SPEC_COMPOSITE, OP_SPEC_OP = 48, 49, 51, 52
DEC_BUILTIN, BUILTIN_WORKGROUP_SIZE, SC_WORKGROUP = 11, 25, 4
# OpSpecConstantOp opcodes that array lengths / workgroup sizes use -> expression op (32-bit unsigned)
SPEC_OPS = {128: "add", 130: "sub", 132: "mul", 134: "div", 135: "div", 137: "mod", 138: "mod", 139: "mod",
            194: "shr", 195: "shr", 196: "shl", 197: "or", 198: "xor", 199: "and", 169: "select",
            170: "eq", 171: "ne", 172: "gt", 173: "gt", 174: "ge", 175: "ge", 176: "lt", 177: "lt",
            178: "le", 179: "le", 166: "or", 167: "and", 164: "eq", 165: "ne", 168: "not", 113: "id", 114: "id"}
_M32 = 0xFFFFFFFF
EXPR_OPS = {
    "add": lambda a, b: (a + b) & _M32, "sub": lambda a, b: (a - b) & _M32, "mul": lambda a, b: (a * b) & _M32,
    "div": lambda a, b: a // b if b else 0, "mod": lambda a, b: a % b if b else 0,
    "shl": lambda a, b: (a << (b & 31)) & _M32, "shr": lambda a, b: a >> (b & 31),
    "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b, "and": lambda a, b: a & b,
    "select": lambda c, a, b: a if c else b, "eq": lambda a, b: int(a == b), "ne": lambda a, b: int(a != b),
    "gt": lambda a, b: int(a > b), "ge": lambda a, b: int(a >= b), "lt": lambda a, b: int(a < b),
    "le": lambda a, b: int(a <= b), "not": lambda a: int(not a), "id": lambda a: a,
    "sum": lambda *a: sum(a),
}


def evaluate(expr, spec=()):
    """The value of a reflected expression under specialization constants `spec` ({id: value} or
    ((id, value), ...), as PipelineCache.get takes them); unspecialized ids take their defaults."""
    values = dict(spec)
    if isinstance(expr, int):
        return expr
    if expr[0] == "spec":
        return values.get(expr[1], expr[2]) & _M32
    return EXPR_OPS[expr[0]](*(evaluate(e, values) for e in expr[1:]))


def _node(op, *args):
    """An expression node, folded to an int when every operand is one."""
    return EXPR_OPS[op](*args) if all(isinstance(a, int) for a in args) else [op, *args]


def _string(words):
    raw = struct.pack(f"<{len(words)}I", *words)
    return raw.split(b"\0", 1)[0].decode()


def reflect(code: bytes) -> dict:
    words = struct.unpack(f"<{len(code) // 4}I", code)
    if words[0] != MAGIC:
        raise ValueError("not a SPIR-V module")
    names, member_names, member_offsets, decorations, member_access = {}, {}, {}, {}, {}
    types, pointers, variables, consts, caps = {}, {}, [], {}, []
    local_size, local_size_ids = None, None
    raw_consts = {}   # id -> (opcode, operands) of every constant, for expressions over spec constants
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
        elif op == OP_MEMBER_DECORATE and a[2] in (DEC_NON_WRITABLE, DEC_NON_READABLE):
            member_access.setdefault(a[0], set()).add(a[2])
        elif op == OP_EXEC_MODE and a[1] == EXEC_LOCAL_SIZE:
            local_size = tuple(a[2:5])
        elif op in (OP_EXEC_MODE, OP_EXEC_MODE_ID) and a[1] == EXEC_LOCAL_SIZE_ID:
            local_size_ids = tuple(a[2:5])
        elif op == OP_CAPABILITY:
            caps.append(a[0])
        elif op == OP_TYPE_INT:
            types[a[0]] = ("scalar", a[1] // 8, "i" if a[2] else "u")
        elif op == OP_TYPE_FLOAT:
            types[a[0]] = ("scalar", a[1] // 8, "f")
        elif op == OP_TYPE_BOOL:
            types[a[0]] = ("scalar", 4, "b")
        elif op in (OP_TYPE_VECTOR, OP_TYPE_MATRIX):   # a matrix: columns like a vector's components
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
            raw_consts[a[1]] = (op, a[2:])
        elif op in (OP_CONSTANT_TRUE, OP_CONSTANT_FALSE, OP_SPEC_TRUE, OP_SPEC_FALSE, OP_CONSTANT_COMPOSITE,
                    OP_SPEC_COMPOSITE, OP_SPEC_OP):
            raw_consts[a[1]] = (op, a[2:])
        elif op == OP_VARIABLE:
            variables.append((a[1], a[0], a[2]))
        i += n

    def expr_of(cid):
        """The expression of constant `cid` over spec constants (an int when it has none)."""
        op, ops = raw_consts[cid]
        spec_id = decorations.get(cid, {}).get(DEC_SPEC_ID)
        if op in (OP_CONSTANT, OP_CONSTANT_TRUE, OP_CONSTANT_FALSE):
            return ops[0] if op == OP_CONSTANT else int(op == OP_CONSTANT_TRUE)
        if op in (OP_SPEC_CONSTANT, OP_SPEC_TRUE, OP_SPEC_FALSE):
            default = ops[0] if op == OP_SPEC_CONSTANT else int(op == OP_SPEC_TRUE)
            return default if spec_id is None else ["spec", spec_id, default]
        if op == OP_SPEC_OP and ops[0] in SPEC_OPS:
            return _node(SPEC_OPS[ops[0]], *(expr_of(x) for x in ops[1:]))
        raise ValueError(f"constant %{cid}: opcode {op} {list(ops[:1])} is not reflected (spirv.SPEC_OPS)")

    def bytes_of(t):
        """Size of a Workgroup-storage type (no explicit layout: elements packed) as an expression."""
        kind = types[t]
        if kind[0] == "scalar":
            return kind[1]
        if kind[0] == "vector":
            return _node("mul", bytes_of(kind[1]), kind[2])
        if kind[0] == "array":
            elem = decorations.get(t, {}).get(DEC_ARRAY_STRIDE) or bytes_of(kind[1])
            return _node("mul", elem, expr_of(kind[2]))
        if kind[0] == "struct":
            return _node("sum", *(bytes_of(m) for m in kind[1])) if kind[1] else 0
        raise ValueError(f"type %{t} ({kind[0]}) in shared memory is not reflected")

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

    def type_name(t):
        """'u32', 'i32', 'f32' (scalars), 'u32[4]' (arrays of them); vectors/structs by their size."""
        kind = types[t]
        if kind[0] == "scalar":
            return f"{kind[2]}{8 * kind[1]}"
        if kind[0] == "array" and types[kind[1]][0] == "scalar":
            return f"{type_name(kind[1])}[{consts[kind[2]]}]"
        if kind[0] == "struct" and len(kind[1]) == 1:   # Slang wraps a uniform array in a struct
            return type_name(kind[1][0])
        return f"bytes[{size_of(t)}]"

    def binding_name(var, t):
        """The name ops bind a resource by: the variable's name, else (an anonymous GLSL block) its block
        type's name in snake_case (`buffer Out { ... }` -> "out", `buffer WeightGrad` -> "weight_grad")."""
        name = names.get(var, "")
        if not name or name.startswith("_"):   # Slang names anonymous globals "_..."
            name = names.get(t, "")
        return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower().rstrip("_")

    def access(var, t):
        """"read", "write" or "read_write" from NonWritable / NonReadable on the variable or on every
        member of its block (GLSL readonly / writeonly)."""
        dec = set(k for k in decorations.get(var, {}) if k in (DEC_NON_WRITABLE, DEC_NON_READABLE))
        kind = types.get(t, ("other",))
        if kind[0] == "struct" and kind[1]:
            dec |= member_access.get(t, set())
        if kind[0] == "image" and kind[2] == 1 or kind[0] == "sampled_image":
            dec.add(DEC_NON_WRITABLE)                # uniform texel buffers are read-only
        return "read" if DEC_NON_WRITABLE in dec else "write" if DEC_NON_READABLE in dec else "read_write"

    push, bindings = None, []
    for var, ptr, sc in variables:
        struct_t = pointers.get(ptr, (None, None))[1]
        if sc == SC_PUSH and struct_t in types:
            members = types[struct_t][1]
            push = {
                "size": size_of(struct_t),
                "members": [{"name": member_names.get((struct_t, k), f"m{k}"),
                             "offset": member_offsets.get((struct_t, k)),
                             "size": size_of(m), "type": type_name(m)} for k, m in enumerate(members)],
            }
        elif sc in (SC_STORAGE, SC_UNIFORM, SC_UNIFORM_CONSTANT) and DEC_BINDING in decorations.get(var, {}):
            b = {"set": decorations[var].get(DEC_SET, 0), "binding": decorations[var][DEC_BINDING],
                 "name": binding_name(var, struct_t), "access": access(var, struct_t)}
            b.update(descriptor_type(sc, struct_t))
            bindings.append(b)

    spec_ids = sorted(d[DEC_SPEC_ID] for d in decorations.values() if DEC_SPEC_ID in d)
    # Spec constants by name (OpName); an id only an unnamed constant carries (GLSL's local_size_x_id
    # without a named constant) is "SPEC<id>".
    spec_names = {names[cid]: d[DEC_SPEC_ID] for cid, d in decorations.items()
                  if DEC_SPEC_ID in d and names.get(cid)}
    for i in spec_ids:
        if i not in spec_names.values():
            spec_names[f"SPEC{i}"] = i
    # sampled images of Dim Buffer: invalid from SPIR-V 1.6 (Mesa 25 rejects them at any version)
    sampled_buffers = sum(1 for k in types.values() if k[0] == "sampled_image"
                          and types.get(k[1], ("other",))[:2] == ("image", DIM_BUFFER))
    # Workgroup size: a WorkgroupSize built-in constant overrides the execution mode (LocalSizeId or
    # LocalSize); its components may be spec constants (local_size_x_id in GLSL).
    wg_ids = next((cid for cid, d in decorations.items() if d.get(DEC_BUILTIN) == BUILTIN_WORKGROUP_SIZE
                   and cid in raw_consts), None)
    wg_ids = tuple(raw_consts[wg_ids][1]) if wg_ids is not None else local_size_ids
    wg_spec = [expr_of(x) for x in wg_ids] if wg_ids else None
    if wg_spec is not None:
        local_size = tuple(evaluate(e) for e in wg_spec)
        if all(isinstance(e, int) for e in wg_spec):
            wg_spec = None
    shared = [bytes_of(pointers[ptr][1]) for _, ptr, sc in variables if sc == SC_WORKGROUP]
    return {"push_constants": push, "bindings": sorted(bindings, key=lambda b: (b["set"], b["binding"])),
            "local_size": list(local_size) if local_size else None, "spec_ids": spec_ids,
            "spec_names": spec_names,
            "capabilities": sorted(set(caps)), "workgroup_size_spec": wg_spec,
            "shared_bytes": _node("sum", *shared) if shared else 0,
            "sampled_buffer_images": sampled_buffers}
