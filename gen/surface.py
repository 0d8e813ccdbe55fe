"""Writes the Python surface of the compiled module from gen/surface.toml: the pybind11 registrations (a C++ header
compiled into the module) and the type stubs (.pyi), so that what Python sees at run time and what type checkers
read come from one description.

    python gen/surface.py --header OUT.h           # the registrations: etrt::python::define_surface(module)
    python gen/surface.py --stub-file STUB OUT     # one stub ([stubs.STUB], e.g. portable_lib) to OUT
"""
from __future__ import annotations

import argparse
import ast
import pathlib
import sys

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

HERE = pathlib.Path(__file__).resolve().parent
KINDS = ("method", "static", "property")


class SurfaceError(Exception):
    pass


def parse_sig(sig: str, where: str) -> ast.FunctionDef:
    try:
        tree = ast.parse(sig.strip() + ": ...")
    except SyntaxError as e:
        raise SurfaceError(f"{where}: `sig` is not a Python signature: {e}") from e
    fn = tree.body[0]
    if not isinstance(fn, ast.FunctionDef):
        raise SurfaceError(f"{where}: `sig` must be `def name(...) -> type`")
    if fn.returns is None:
        raise SurfaceError(f"{where}: `sig` has no return annotation")
    a = fn.args
    if a.vararg or a.kwarg or a.posonlyargs:
        raise SurfaceError(f"{where}: *args, **kwargs and positional-only arguments are not supported")
    for arg in a.args + a.kwonlyargs:
        if arg.arg != "self" and arg.annotation is None:
            raise SurfaceError(f"{where}: argument '{arg.arg}' has no annotation")
    return fn


def cpp_default(node: ast.expr, where: str) -> str:
    """The C++ value of a Python default (the subset the surface uses)."""
    if isinstance(node, ast.Constant):
        v = node.value
        if v is None:
            return "py::none()"
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return f'py::str("{v}")'
    if isinstance(node, ast.List) and not node.elts:
        return "py::list()"
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}::{node.attr}"
    raise SurfaceError(f"{where}: no C++ form for the default `{ast.unparse(node)}`")


def arguments(fn: ast.FunctionDef, entry: dict, where: str) -> list[str]:
    """The py::arg annotations of a signature (self excluded), with py::kw_only() where `*` is."""
    a = fn.args
    positional = [x for x in a.args if x.arg != "self"]
    defaults: list[ast.expr | None] = [None] * (len(a.args) - len(a.defaults)) + list(a.defaults)
    defaults = defaults[len(a.args) - len(positional):]
    not_none = set(entry.get("not_none", []))
    out = []

    def one(name: str, default: ast.expr | None) -> str:
        s = f'py::arg("{name}")'
        if name in not_none:
            s += ".none(false)"
        if default is not None:
            s += " = " + cpp_default(default, f"{where}, argument '{name}'")
        return s

    out += [one(x.arg, d) for x, d in zip(positional, defaults)]
    if a.kwonlyargs:
        out.append("py::kw_only()")
        out += [one(x.arg, d) for x, d in zip(a.kwonlyargs, a.kw_defaults)]
    unknown = not_none - {x.arg for x in positional + a.kwonlyargs}
    if unknown:
        raise SurfaceError(f"{where}: not_none names no argument: {sorted(unknown)}")
    return out


def cpp_str(text: str) -> str:
    if ')etrt"' in text:
        raise SurfaceError("a docstring holds the raw-string delimiter )etrt\"")
    return f'R"etrt({text})etrt"'


def doc_of(entry: dict) -> str:
    return entry.get("doc", "").strip()


def load(path: pathlib.Path) -> dict:
    with open(path, "rb") as f:
        spec = tomllib.load(f)
    stubs = spec.get("stubs", {})
    for section in ("enum", "attribute", "class", "function"):
        for i, e in enumerate(spec.get(section, [])):
            where = f"{path.name}: {section} {e.get('name', i)}"
            if e.get("stub", False) is not False and e["stub"] not in stubs:
                raise SurfaceError(f"{where}: stub '{e['stub']}' is not a [stubs.*] section")
            if "cpp" not in e:
                raise SurfaceError(f"{where}: no `cpp`")
    names: set[tuple[str, str]] = set()
    for c in spec.get("class", []):
        for d in c.get("def", []):
            where = f"{path.name}: {c['name']}.{d.get('sig', '?')[:40]}"
            if d.get("kind", "method") not in KINDS:
                raise SurfaceError(f"{where}: kind must be one of {KINDS}")
            d["_fn"] = parse_sig(d["sig"], where)
            if (c["name"], d["_fn"].name) in names:
                raise SurfaceError(f"{where}: {c['name']}.{d['_fn'].name} is defined twice")
            names.add((c["name"], d["_fn"].name))
    for f in spec.get("function", []):
        f["_fn"] = parse_sig(f["sig"], f"{path.name}: function {f['sig'][:40]}")
    return spec


# ---- C++ --------------------------------------------------------------------------------------------------------------

def header(spec: dict) -> str:
    out = ["// Generated by gen/surface.py from gen/surface.toml. Do not edit.",
           "// The Python surface of the module: every registration, with its argument names, defaults and docs.",
           "#pragma once", "", "#include <pybind11/pybind11.h>", "#include <pybind11/stl.h>", "",
           "namespace etrt::python {", "",
           "/// Registers the surface on `m`. The implementations come from etrt/adapters/module_def.h.",
           "inline void define_surface(pybind11::module_& m) {", "  namespace py = pybind11;"]
    for e in spec.get("enum", []):
        var = f"enum_{e['name']}"
        out.append(f'  py::enum_<{e["cpp"]}> {var}(m, "{e["name"]}", {cpp_str(doc_of(e))});')
        for name, value in e["values"].items():
            out.append(f"  static_assert(static_cast<int>({e['cpp']}::{name}) == {value});")
            out.append(f'  {var}.value("{name}", {e["cpp"]}::{name});')
    # Every class is registered before any method is defined, so that docstring signatures name the classes.
    for c in spec.get("class", []):
        params = ", ".join(x for x in (c["cpp"], c.get("holder")) if x)
        extra = ", py::buffer_protocol()" if "buffer" in c else ""
        out.append(f'  py::class_<{params}> cls_{c["name"]}(m, "{c["name"]}"{extra}, {cpp_str(doc_of(c))});')
    for c in spec.get("class", []):
        var = f"cls_{c['name']}"
        if "buffer" in c:
            out.append(f"  {var}.def_buffer({c['buffer']});")
        for d in c.get("def", []):
            fn = d["_fn"]
            kind = d.get("kind", "method")
            where = f"{c['name']}.{fn.name}"
            if kind == "property":
                doc = f", {cpp_str(doc_of(d))}" if doc_of(d) else ""
                out.append(f'  {var}.def_property_readonly("{fn.name}", {d["cpp"]}{doc});')
                continue
            call = "def_static" if kind == "static" else "def"
            parts = [f'"{fn.name}"', d["cpp"]] + arguments(fn, d, where)
            if doc_of(d):
                parts.append(cpp_str(doc_of(d)))
            out.append(f"  {var}.{call}({', '.join(parts)});")
        if "python_module" in c:
            out.append(f'  {var}.attr("__module__") = "{c["python_module"]}";')
    for a in spec.get("attribute", []):
        out.append(f'  m.attr("{a["name"]}") = {a["cpp"]};')
    for f in spec.get("function", []):
        fn = f["_fn"]
        parts = [f'"{fn.name}"', f["cpp"]] + arguments(fn, f, fn.name)
        if doc_of(f):
            parts.append(cpp_str(doc_of(f)))
        out.append(f"  m.def({', '.join(parts)});")
    out += ["}", "", "}  // namespace etrt::python", ""]
    return "\n".join(out)


# ---- stubs ------------------------------------------------------------------------------------------------------------

def docstring(text: str, indent: str) -> list[str]:
    if not text:
        return []
    lines = text.split("\n")
    body = [lines[0]] + [(indent + ln) if ln else "" for ln in lines[1:]]
    body[0] = indent + '"""' + body[0]
    body[-1] += '"""'
    return body


def stub_args(a: ast.arguments) -> str:
    """A signature's arguments as PEP 8 writes annotated ones (`name: T = default`)."""
    def one(x: ast.arg, default: ast.expr | None) -> str:
        s = x.arg + (f": {ast.unparse(x.annotation)}" if x.annotation else "")
        return s + (f" = {ast.unparse(default)}" if default is not None else "")

    defaults: list[ast.expr | None] = [None] * (len(a.args) - len(a.defaults)) + list(a.defaults)
    parts = [one(x, d) for x, d in zip(a.args, defaults)]
    if a.kwonlyargs:
        parts.append("*")
        parts += [one(x, d) for x, d in zip(a.kwonlyargs, a.kw_defaults)]
    return ", ".join(parts)


def stub_def(fn: ast.FunctionDef, doc: str, indent: str, decorator: str | None) -> list[str]:
    sig = stub_args(fn.args)
    head = f"{indent}def {fn.name}({sig}) -> {ast.unparse(fn.returns)}:"  # type: ignore[arg-type]
    lines = [f"{indent}{decorator}"] if decorator else []
    if not doc:
        return lines + [head + " ..."]
    return lines + [head] + docstring(doc, indent + "    ") + [indent + "    ..."]


def stub(spec: dict, which: str) -> str:
    s = spec["stubs"][which]
    out = [f"# Generated by gen/surface.py from gen/surface.toml. Do not edit.", s.get("header", "").strip("\n"), ""]
    for e in spec.get("enum", []):
        if e.get("stub") != which:
            continue
        out.append(f"class {e['name']}(enum.Enum):")
        out += docstring(doc_of(e), "    ")
        out += [f"    {n} = {v}" for n, v in e["values"].items()]
        out += ["    def __int__(self) -> int: ...", "    def __index__(self) -> int: ...", ""]
    for a in spec.get("attribute", []):
        if a.get("stub") != which:
            continue
        out.append(a["stub_text"].strip("\n") if "stub_text" in a else f"{a['name']}: {a['type']}")
        out.append("")
    for c in spec.get("class", []):
        if c.get("stub") != which:
            continue
        out.append(f"class {c['name']}:")
        out += docstring(doc_of(c), "    ")
        for d in c.get("def", []):
            if d.get("stub", True) is False:
                continue
            decorator = {"static": "@staticmethod", "property": "@property"}.get(d.get("kind", "method"))
            out += stub_def(d["_fn"], doc_of(d), "    ", decorator)
        out.append("")
    for f in spec.get("function", []):
        if f.get("stub") != which:
            continue
        out += stub_def(f["_fn"], doc_of(f), "", None)
    return "\n".join(out).rstrip("\n") + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--spec", default=str(HERE / "surface.toml"))
    p.add_argument("--header", help="write the pybind11 registrations here")
    p.add_argument("--stub-file", nargs=2, metavar=("STUB", "OUT"), action="append", default=[],
                   help="write one stub ([stubs.STUB]) to OUT")
    a = p.parse_args()
    try:
        spec = load(pathlib.Path(a.spec))
        if a.header:
            pathlib.Path(a.header).write_text(header(spec))
        for name, out in a.stub_file:
            if name not in spec["stubs"]:
                raise SurfaceError(f"no [stubs.{name}] in {a.spec}")
            pathlib.Path(out).write_text(stub(spec, name))
    except (SurfaceError, KeyError, OSError) as e:
        print(f"gen/surface.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
