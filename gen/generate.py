#!/usr/bin/env python3
"""Generates the kernel registration header and the pybind11 translation unit.

Inputs: gen/ops/*.toml, one [[op]] table per operator:
    name    = "aten::add.out"                       # the kernel key a KernelCall names
    schema  = "(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)"
    header  = "etrt/kernels/ops/arithmetic.h"       # where the kernel template lives
    kernel  = "etrt::kernels::add_out"              # template <class Dtypes> Status f(KernelContext&, args...)
    dtypes  = "real_types"                          # a named list from etrt/core/scalar_type.h, or a list of C++ types
    device_aware = true                             # optional: the kernel may receive device tensors
    return_slot = false                             # optional: the KernelCall holds only the schema's arguments,
                                                    # no return slot (executorch_prim::et_copy_index, whose call the
                                                    # emitter writes by hand)

Outputs:
    --kernels-header: etrt_generated/portable_kernels.h, a header a C++ user includes to get the portable kernel
                      table (etrt::generated::portable_kernels()). With --only-for MODEL.pte (repeatable) the
                      table holds only the operators those programs call, instantiated only for the dtypes of
                      their tensors (a selective build: an embedding TU then compiles only what they need; another
                      dtype at run time is an "unsupported dtype" error).
    --module-tu:      the pybind11 module source; it instantiates the adapters once with that table.
    --backends-tu:    the module's second source: the delegates it registers (XNNPACK, CUDA on host kernels).
    --converters-tu:  the split build's one instantiation of the elementwise engine's dtype converters.
Adding an operator is one toml entry plus a kernel template; the generated files are never edited by hand.
"""
from __future__ import annotations

import argparse
import pathlib
import re
import sys
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

HERE = pathlib.Path(__file__).resolve().parent


def split_top_level(text: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def parse_schema(schema: str) -> tuple[list[tuple[str, str, bool]], int]:
    """Returns ([(type, name, mutable)], number of return slots) for "(args) -> returns"."""
    m = re.match(r"^\s*(?:[\w:.]+)?\((.*)\)\s*->\s*(.*)$", schema.strip())
    if not m:
        raise SystemExit(f"cannot parse schema: {schema}")
    args = []
    for part in split_top_level(m.group(1)):
        if part == "*":
            continue
        part = part.split("=")[0].strip()
        typ, name = part.rsplit(" ", 1)
        mutable = "!" in typ
        typ = re.sub(r"\([^)]*\)", "", typ).replace(" ", "")
        args.append((typ, name, mutable))
    return args, 1  # one return slot, whatever the returns (several returns share a TensorList slot)


# Plain returns (no alias annotation): the kernel computes a new value into the return slot itself, so the wrapper
# passes that slot. Scalars (shape arithmetic: aten::sym_size.int, executorch_prim::*) and views (et_view).
VALUE_RETURNS = {"Scalar", "int", "SymInt", "float", "SymFloat", "bool", "SymBool", "Tensor"}


def slots(op: dict) -> tuple[list[tuple[str, str, bool]], int]:
    """(arguments, number of return slots) of a toml entry: one return slot unless `return_slot = false`."""
    args, nret = parse_schema(op["schema"])
    return args, (nret if op.get("return_slot", True) else 0)


def value_return(schema: str) -> bool:
    ret = re.match(r"^.*\)\s*->\s*(.*)$", schema.strip()).group(1).strip()
    return ret in VALUE_RETURNS


CPP_KEYWORDS = {"default", "int", "float", "bool", "char", "template", "class", "out_"}


def unpack(i: int, typ: str, name: str, mutable: bool) -> tuple[str, str]:
    """(statement binding a local, the expression passed to the kernel)."""
    var = f"a{i}"
    ev = f"(*args[{i}])"
    n = f'"{name}"'
    base = re.sub(r"\[\d*\]", "[]", typ)
    if base == "Tensor":
        return f"ETRT_TRY(::etrt::Tensor* {var}, {ev}.to_tensor({n}));", f"*{var}"
    if base == "Tensor?":
        return f"ETRT_TRY(const ::etrt::Tensor* {var}, {ev}.to_optional_tensor({n}));", var
    if base == "Tensor[]":
        return f"ETRT_TRY(auto {var}, {ev}.to_tensor_list({n}));", var
    if base == "Tensor?[]":
        return f"ETRT_TRY(auto {var}, {ev}.to_optional_tensor_list({n}));", var
    if base == "Scalar":
        return f"ETRT_TRY(::etrt::Scalar {var}, {ev}.to_scalar({n}));", var
    if base == "Scalar?":
        return f"ETRT_TRY(auto {var}, ::etrt::args::opt_scalar({ev}, {n}));", var
    if base in ("int", "SymInt"):
        return f"ETRT_TRY(int64_t {var}, {ev}.to_int({n}));", var
    if base in ("int?", "SymInt?"):
        return f"ETRT_TRY(auto {var}, ::etrt::args::opt_int({ev}, {n}));", var
    if base in ("int[]", "SymInt[]"):
        return f"ETRT_TRY(auto {var}, {ev}.to_int_list({n}));", var
    if base in ("int[]?", "SymInt[]?"):
        return f"ETRT_TRY(auto {var}, ::etrt::args::opt_int_list({ev}, {n}));", var
    if base == "float":
        return f"ETRT_TRY(double {var}, {ev}.to_double({n}));", var
    if base == "float?":
        return f"ETRT_TRY(auto {var}, ::etrt::args::opt_double({ev}, {n}));", var
    if base == "float[]":
        return f"ETRT_TRY(auto {var}, {ev}.to_double_list({n}));", var
    if base == "float[]?":
        return f"ETRT_TRY(auto {var}, ::etrt::args::opt_double_list({ev}, {n}));", var
    if base == "bool":
        return f"ETRT_TRY(bool {var}, {ev}.to_bool({n}));", var
    if base == "bool?":
        return f"ETRT_TRY(auto {var}, ::etrt::args::opt_bool({ev}, {n}));", var
    if base == "bool[]":
        return f"ETRT_TRY(auto {var}, {ev}.to_bool_list({n}));", f"*{var}"
    if base == "ScalarType":
        return f"ETRT_TRY(::etrt::ScalarType {var}, ::etrt::args::scalar_type({ev}, {n}));", var
    if base == "ScalarType?":
        return f"ETRT_TRY(auto {var}, ::etrt::args::opt_scalar_type({ev}, {n}));", var
    if base == "str":
        return f"ETRT_TRY(std::string_view {var}, {ev}.to_string({n}));", var
    if base == "str?":
        return f"ETRT_TRY(auto {var}, ::etrt::args::opt_string({ev}, {n}));", var
    if base in ("MemoryFormat?", "MemoryFormat", "Layout?", "Device?", "Generator?", "bool?[]"):
        return f"const ::etrt::EValue& {var} = {ev};", var
    raise SystemExit(f"unsupported schema type '{typ}' for argument '{name}'")


def load_ops() -> list[dict]:
    ops = []
    for path in sorted((HERE / "ops").glob("*.toml")):
        with path.open("rb") as f:
            data = tomllib.load(f)
        for op in data.get("op", []):
            op["_file"] = path.name
            ops.append(op)
    names = [o["name"] for o in ops]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise SystemExit(f"operators registered twice: {sorted(dup)}")
    return sorted(ops, key=lambda o: o["name"])


def dtypes_expr(d, only_dtypes: list[int] | None = None) -> str:
    """The op's dtype list; narrowed to `only_dtypes` (ScalarType codes, a selective build) when given."""
    expr = f"::etrt::{d}" if isinstance(d, str) else "::etrt::types<" + ", ".join(d) + ">"
    if only_dtypes is None:
        return expr
    return f"::etrt::selective::keep_t<{expr}, {', '.join(str(c) for c in only_dtypes)}>"


def ident(name: str) -> str:
    return "k_" + re.sub(r"[^0-9A-Za-z]", "_", name)


def wrapper(op: dict, storage: str, only_dtypes: list[int] | None = None) -> list[str]:
    """The wrapper that unpacks a KernelCall's EValues and calls the kernel template."""
    args, nret = slots(op)
    out = [f"// {op['name']}{op['schema']}",
           f"{storage}::etrt::Status {ident(op['name'])}(::etrt::KernelContext& ctx, "
           f"std::span<::etrt::EValue* const> args) {{",
           f"  // The slot count ({len(args) + nret}) was checked when the method was loaded."]
    call_args = []
    for i, (typ, name, mutable) in enumerate(args):
        stmt, expr = unpack(i, typ, name, mutable)
        out.append("  " + stmt)
        call_args.append(expr)
    if value_return(op["schema"]):
        call_args.append(f"*args[{len(args)}]")  # the return slot, written by the kernel
    out.append(f"  return {op['kernel']}<{dtypes_expr(op['dtypes'], only_dtypes)}>(ctx{''.join(', ' + a for a in call_args)});")
    out += ["}", ""]
    return out


PRELUDE = ["#include <array>", "#include <span>", "", '#include "etrt/kernels/arg_unpack.h"',
           '#include "etrt/kernels/kernel.h"']


def kernels_header(ops: list[dict], only_dtypes: list[int] | None = None) -> str:
    """Header-only by default; with ETRT_GENERATED_KERNELS_SPLIT defined it only declares the wrappers, which the
    generated part files define (the project's own builds compile the kernels once, in parallel)."""
    headers = sorted({o["header"] for o in ops})
    out = ["// Generated by gen/generate.py from gen/ops/*.toml. Do not edit.", "#pragma once", ""] + PRELUDE
    if only_dtypes is not None:
        out += [f"// Selective: only the operators and dtypes (ScalarType codes {only_dtypes}) of the given programs.",
                '#include "etrt/kernels/selective_types.h"']
    out += ["", "#ifndef ETRT_GENERATED_KERNELS_SPLIT"]
    out += [f'#include "{h}"' for h in headers]
    out += ["#endif", "", "namespace etrt::generated {", "", "#ifdef ETRT_GENERATED_KERNELS_SPLIT"]
    for op in ops:
        out.append(f"::etrt::Status {ident(op['name'])}(::etrt::KernelContext&, std::span<::etrt::EValue* const>);")
    out += ["#else", ""]
    for op in ops:
        out += wrapper(op, "inline ", only_dtypes)
    out += ["#endif", ""]
    out.append("/// Every portable kernel, sorted by name (the order _get_operator_names() reports).")
    out.append("inline std::span<const ::etrt::KernelEntry> portable_kernels() {")
    out.append(f"  static constexpr std::array<::etrt::KernelEntry, {len(ops)}> kTable{{{{")
    for op in ops:
        args, nret = slots(op)
        mask = sum(1 << i for i, (_, _, mutable) in enumerate(args) if mutable)
        if value_return(op["schema"]):
            mask |= 1 << len(args)  # the kernel writes its return slot
        device_aware = "true" if op.get("device_aware", False) else "false"
        out.append(f"      {{\"{op['name']}\", {len(args) + nret}, &{ident(op['name'])}, {mask:#x}ull, {device_aware}}},")
    out += ["  }};", "  return kTable;", "}", "", "}  // namespace etrt::generated"]
    return "\n".join(out) + "\n"


def kernels_part(ops: list[dict], family: str) -> str:
    """One translation unit defining the wrappers of one operator family (split builds)."""
    mine = [o for o in ops if o["_file"] == f"{family}.toml"]
    out = [f"// Generated by gen/generate.py from gen/ops/{family}.toml. Do not edit.",
           "#define ETRT_GENERATED_KERNELS_SPLIT 1", '#include "etrt_generated/portable_kernels.h"']
    out += [f'#include "{h}"' for h in sorted({o["header"] for o in mine})]
    out += ['#include "etrt/kernels/float_kernels.h"', "", "namespace etrt::generated {", ""]
    for op in mine:
        out += wrapper(op, "")
    out.append("}  // namespace etrt::generated")
    # The float instantiations the delegates call (etrt/kernels/float_kernels.h), when this family has a list.
    out += ["", f"#ifdef ETRT_FLOAT_KERNELS_{family}", "namespace etrt::kernels {",
            f"ETRT_FLOAT_KERNELS_{family}(ETRT_FLOAT_KERNEL_INSTANTIATE)", "}  // namespace etrt::kernels", "#endif"]
    return "\n".join(out) + "\n"


def module_tu(module_name: str) -> str:
    return f"""// Generated by gen/generate.py. Do not edit.
// The one translation unit that instantiates the Python adapters with the portable kernel table and registers the
// surface gen/surface.py wrote from gen/surface.toml.
#define ETRT_GENERATED_KERNELS_SPLIT 1
#include "etrt_generated/portable_kernels.h"
#include "etrt/adapters/module_def.h"
#include "etrt_generated/portable_lib_surface.h"

PYBIND11_MODULE({module_name}, m) {{
  ::etrt::python::init_module(m, ::etrt::generated::portable_kernels());
  ::etrt::python::define_surface(m);
}}
"""


def converters_tu() -> str:
    return """// Generated by gen/generate.py. Do not edit.
// The elementwise engine's dtype converters, compiled once for every kernel family (Note [converters compiled once]
// in etrt/kernels/util/elementwise.h).
#define ETRT_INSTANTIATE_CONVERTERS 1
#include "etrt/kernels/util/elementwise.h"
"""


def backends_tu() -> str:
    return """// Generated by gen/generate.py. Do not edit.
// The delegates the module registers (XNNPACK, the CUDA delegate on host kernels), compiled beside the bindings'
// translation unit instead of inside it (etrt/adapters/module_backends.h). The portable kernels they call come
// instantiated from the kernel library (etrt/kernels/float_kernels.h).
#define ETRT_GENERATED_KERNELS_SPLIT 1
#include "etrt/adapters/module_backends.h"
"""


def selected(ops: list[dict], ptes: list[str]) -> tuple[list[dict], list[int] | None]:
    """The operators the given programs call and the ScalarType codes of their tensors (None when they have no
    tensor); a name missing from the table stops the generator, naming it."""
    sys.path.insert(0, str(HERE))
    from pte_operators import operator_names, tensor_dtypes

    wanted: set[str] = set()
    dtypes: set[int] = set()
    for pte in ptes:
        try:
            data = pathlib.Path(pte).read_bytes()
            wanted.update(operator_names(data, pte))
            dtypes.update(tensor_dtypes(data, pte))
        except (OSError, ValueError) as e:
            raise SystemExit(f"--only-for {pte}: {e}")
    by_name = {o["name"]: o for o in ops}
    missing = sorted(wanted - by_name.keys())
    if missing:
        raise SystemExit(f"--only-for: operators not in the kernel table: {', '.join(missing)}")
    return [by_name[n] for n in sorted(wanted)], (sorted(dtypes) if dtypes else None)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--kernels-header")
    p.add_argument("--module-tu")
    p.add_argument("--module-name", default="_C")
    p.add_argument("--backends-tu", help="write the source that compiles the module's delegates")
    p.add_argument("--converters-tu", help="write the source that compiles the elementwise converters (split builds)")
    p.add_argument("--list", action="store_true", help="print the operator names")
    p.add_argument("--part", nargs=2, metavar=("FAMILY", "OUT"), action="append", default=[],
                   help="write the wrappers of gen/ops/FAMILY.toml to OUT (split builds)")
    p.add_argument("--only-for", metavar="PTE", action="append", default=[],
                   help="selective build: the kernel header holds only the operators these .pte files call")
    a = p.parse_args()
    ops = load_ops()
    only_dtypes = None
    if a.only_for:
        ops, only_dtypes = selected(ops, a.only_for)
    if a.list:
        print("\n".join(o["name"] for o in ops))
    if a.kernels_header:
        path = pathlib.Path(a.kernels_header)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(kernels_header(ops, only_dtypes))
    for family, out in a.part:
        pathlib.Path(out).write_text(kernels_part(ops, family))
    if a.module_tu:
        pathlib.Path(a.module_tu).write_text(module_tu(a.module_name))
    if a.backends_tu:
        pathlib.Path(a.backends_tu).write_text(backends_tu())
    if a.converters_tu:
        pathlib.Path(a.converters_tu).write_text(converters_tu())
    return 0


if __name__ == "__main__":
    sys.exit(main())
