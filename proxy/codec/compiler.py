"""Compiling a schema segment into a reader and a writer for one version.

Each (API, direction, version) is compiled once into nested closures specialised for its fields, so decoding
costs a few function calls per field and never interprets the schema table per message.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from proxy.codec import primitives as P
from proxy.codec.errors import ProtocolError
from proxy.codec.schema import Message, _fresh, _Segment, _StructDefault, is_default, segment

# --------------------------------------------------------------------------------------------
# Variable-length values: small closures chosen per (kind, flexible, nullable).


def _var_reader(kind: str, flex: bool, nullable: bool, what: str) -> Callable[..., Any]:
    uv, i16, i32, PE = P.read_uvarint, P.INT16.unpack_from, P.INT32.unpack_from, ProtocolError

    def length(buf: memoryview, pos: int) -> tuple[int, int]:
        if flex:
            n, pos = uv(buf, pos)
            return n - 1, pos
        if kind == "string":
            return i16(buf, pos)[0], pos + 2
        return i32(buf, pos)[0], pos + 4

    def read(buf: memoryview, pos: int) -> tuple[Any, int]:
        n, pos = length(buf, pos)
        if n < 0:
            if n == -1 and nullable:
                return None, pos
            raise PE(f"{what}: invalid length {n} at offset {pos}")
        end = pos + n
        if end > len(buf):
            raise PE(f"{what}: {n} bytes at offset {pos} run past the end ({len(buf)})")
        if kind == "string":
            return str(buf[pos:end], "utf-8"), end
        if kind == "bytes":
            return bytes(buf[pos:end]), end
        return buf[pos:end], end  # records: a view, never a copy

    return read


def _var_writer(kind: str, flex: bool, nullable: bool, what: str) -> Callable[..., Any]:
    uv = P.write_uvarint
    null = b"\x00" if flex else (b"\xff\xff" if kind == "string" else b"\xff\xff\xff\xff")
    plen = P.INT16.pack if kind == "string" else P.INT32.pack

    def write(out: list[Any], value: Any) -> None:
        if value is None:
            if not nullable:
                raise ValueError(f"{what} is not nullable in this version")
            out.append(null)
            return
        data = value.encode() if kind == "string" else value
        n = len(data) if kind == "string" else memoryview(data).nbytes
        out.append(uv(n + 1) if flex else plen(n))
        out.append(data)

    return write


# --------------------------------------------------------------------------------------------
# Source generation.

_NO_VALUE = object()


def _fixed_runs(present: list[Any]) -> list[Any]:
    """Group fields into (run of fixed-size fields, None) — read or written with one struct — and ([], field)
    for each variable-size field, in order."""
    out: list[Any] = []
    run: list[Any] = []
    for field in present:
        if field[1] in P.FIXED:
            run.append(field)
            continue
        if run:
            out.append((run, None))
            run = []
        out.append(([], field))
    if run:
        out.append((run, None))
    return out


class _Gen:
    """Generates the reader/writer source for one (segment, version) and compiles it."""

    def __init__(self, seg: _Segment, version: int) -> None:
        self.seg, self.v = seg, version
        self.flex = seg.flexible is not None and version >= seg.flexible
        self.src: list[str] = []
        self.ns: dict[str, Any] = {
            "_PE": ProtocolError,
            "_uv": P.read_uvarint,
            "_wuv": P.write_uvarint,
            "_i8": P.INT8.unpack_from,
            "_i32": P.INT32.unpack_from,
            "_p32": P.INT32.pack,
            "_cc": P.check_count,
            "_tagh": P.read_tag_header,
            "_wtag": P.write_tagged,
            "_ruuid": P.read_uuid,
            "_unpack": struct.unpack_from,
            "_pack": struct.pack,
            "_isdef": is_default,
            "_fresh": _fresh,
        }
        self.n = 0
        self.done: dict[int, tuple[str, str]] = {}

    def name(self, prefix: str, value: Any = _NO_VALUE) -> str:
        self.n += 1
        name = f"{prefix}{self.n}"
        if value is not _NO_VALUE:
            self.ns[name] = value
        return name

    def _layout(self, fields: tuple[Any, ...]) -> tuple[list[Any], list[Any], list[Any]]:
        v = self.v
        present: list[Any] = []
        tagged: list[Any] = []
        absent: list[Any] = []
        for f in fields:
            vers, tag, tv = f[2], f[4], f[5]
            if not vers[0] <= v <= vers[1]:
                absent.append(f)
            elif tag is not None:
                (tagged if self.flex and tv and tv[0] <= v <= tv[1] else absent).append(f)
            else:
                present.append(f)
        return present, sorted(tagged, key=lambda f: f[4]), absent

    def nullable(self, f: tuple[Any, ...]) -> bool:
        return f[3] is not None and f[3][0] <= self.v <= f[3][1]

    # ---- readers -------------------------------------------------------------------------
    def struct_codec(self, fields: tuple[Any, ...], cls: type[Message]) -> tuple[str, str]:
        """Names of the generated reader and writer for a struct (generated once per struct)."""
        if id(fields) in self.done:
            return self.done[id(fields)]
        rname, wname = self.name("r_"), self.name("w_")
        self.done[id(fields)] = (rname, wname)
        present, tagged, absent = self._layout(fields)
        c = self.name("C", cls)
        L = [f"def {rname}(buf, pos):", f"    o = {c}.__new__({c})"]
        for run, field in _fixed_runs(present):
            if run:
                fmt = ">" + "".join(P.FIXED[f[1]][0] for f in run)
                s = self.name("S", struct.Struct(fmt))
                L.append(f"    {', '.join('o.' + f[0] for f in run)}, = {s}.unpack_from(buf, pos)")
                L.append(f"    pos += {struct.calcsize(fmt)}")
            else:
                L += self.read_value(field, f"o.{field[0]}", "    ")
        for f in absent + tagged:
            d = cls._defaults[f[0]]
            if d == () or isinstance(d, _StructDefault):
                L.append(f"    o.{f[0]} = _fresh({self.name('D', d)})")
            else:
                L.append(f"    o.{f[0]} = {self.name('D', d)}")
        if self.flex:  # the common case, no tagged fields, is one byte: 0
            L += [
                "    if buf[pos] == 0:",
                "        pos += 1",
                "        o._unknown_tags = {}",
                "    else:",
                "        nt, pos = _uv(buf, pos)",
                "        _cc(buf, pos, nt, 'tagged fields')",
                "        u = {}",
                "        for _ in range(nt):",
                "            tag, ds, pos = _tagh(buf, pos)",
            ]
            kw = "if"
            for f in tagged:
                tv = self.tagged_value_reader(f)
                L += [f"            {kw} tag == {f[4]}:", f"                o.{f[0]} = {tv}(buf[ds:pos])"]
                kw = "elif"
            L += [
                f"            {'else:' if tagged else 'if True:'}",
                "                u[tag] = bytes(buf[ds:pos])",
                "        o._unknown_tags = u",
            ]
        else:
            L.append("    o._unknown_tags = {}")
        L.append("    return o, pos")
        self.src += L
        self.struct_writer(wname, present, tagged, absent, cls)
        return rname, wname

    def tagged_value_reader(self, f: tuple[Any, ...]) -> str:
        name = self.name("tv_")
        L = [
            f"def {name}(buf):",
            "    pos = 0",
            *self.read_value(f, "v", "    "),
            "    if pos != len(buf):",
            f"        raise _PE('tagged field {f[0]}: trailing bytes')",
            "    return v",
        ]
        self.src += L
        return name

    def read_value(self, f: tuple[Any, ...], target: str, ind: str) -> list[str]:
        fname, kind, nullable = f[0], f[1], self.nullable(f)
        if kind in P.FIXED:
            s = self.name("S", struct.Struct(">" + P.FIXED[kind][0]))
            return [f"{ind}{target}, = {s}.unpack_from(buf, pos)", f"{ind}pos += {P.FIXED[kind][1]}"]
        if kind == "uuid":
            return [f"{ind}{target}, pos = _ruuid(buf, pos)"]
        if kind == "records":  # the hot path of Produce and Fetch: inlined, a view of the input
            n = self.name("n")
            L = (
                [f"{ind}{n}, pos = _uv(buf, pos)", f"{ind}{n} -= 1"]
                if self.flex
                else [f"{ind}{n}, = _i32(buf, pos)", f"{ind}pos += 4"]
            )
            bad = f"{ind}    raise _PE('{fname}: invalid length %d' % {n})"
            L += [
                f"{ind}if {n} < 0:",
                *([f"{ind}    if {n} != -1:", "    " + bad] if nullable else [bad]),
                f"{ind}    {target} = None",
                f"{ind}else:",
                f"{ind}    e = pos + {n}",
                f"{ind}    if e > len(buf):",
                f"{ind}        raise _PE('{fname}: %d bytes run past the end' % {n})",
                f"{ind}    {target} = buf[pos:e]",
                f"{ind}    pos = e",
            ]
            return L
        if kind in ("string", "bytes"):
            r = self.name("V", _var_reader(kind, self.flex, nullable, fname))
            return [f"{ind}{target}, pos = {r}(buf, pos)"]
        rc = self.struct_codec(f[8], self.seg.classes[id(f[8])])[0] if f[8] is not None else None
        if kind == "struct":
            if not nullable:
                return [f"{ind}{target}, pos = {rc}(buf, pos)"]
            return [
                f"{ind}m, = _i8(buf, pos)",
                f"{ind}pos += 1",
                f"{ind}if m < 0:",
                f"{ind}    {target} = None",
                f"{ind}else:",
                f"{ind}    {target}, pos = {rc}(buf, pos)",
            ]
        return self.read_array(f, target, ind, rc)

    def read_array(self, f: tuple[Any, ...], target: str, ind: str, rc: str | None) -> list[str]:
        n, lst = self.name("n"), self.name("lst")
        L = (
            [f"{ind}{n}, pos = _uv(buf, pos)", f"{ind}{n} -= 1"]
            if self.flex
            else [f"{ind}{n}, = _i32(buf, pos)", f"{ind}pos += 4"]
        )
        L += [f"{ind}if {n} < 0:"]
        if self.nullable(f):
            L += [
                f"{ind}    if {n} != -1:",
                f"{ind}        raise _PE('{f[0]}: invalid array length')",
                f"{ind}    {target} = None",
            ]
        else:
            L += [f"{ind}    raise _PE('{f[0]}: null or negative array length')"]
        L += [f"{ind}else:", f"{ind}    _cc(buf, pos, {n}, '{f[0]}')"]
        elem = f[1][2:]
        if elem in P.FIXED:
            letter, width = P.FIXED[elem]
            L += [f"{ind}    {target} = list(_unpack('>%d{letter}' % {n}, buf, pos))", f"{ind}    pos += {n} * {width}"]
            return L
        if rc is None:
            rc = "_ruuid" if elem == "uuid" else self.name("V", _var_reader(elem, self.flex, False, f[0]))
        x = self.name("x")
        L += [
            f"{ind}    {lst} = []",
            f"{ind}    for _ in range({n}):",
            f"{ind}        {x}, pos = {rc}(buf, pos)",
            f"{ind}        {lst}.append({x})",
            f"{ind}    {target} = {lst}",
        ]
        return L

    # ---- writers -------------------------------------------------------------------------
    def struct_writer(
        self, wname: str, present: list[Any], tagged: list[Any], absent: list[Any], cls: type[Message]
    ) -> None:
        L = [f"def {wname}(o, out):"]
        for f in absent:
            if not f[7]:  # not ignorable: a non-default value cannot be sent in this version
                d = self.name("D", cls._defaults[f[0]])
                L += [
                    f"    if not _isdef(o.{f[0]}, {d}):",
                    f"        raise ValueError('{cls.__name__}.{f[0]} is not supported in version {self.v}')",
                ]
        for run, field in _fixed_runs(present):
            if run:
                s = self.name("S", struct.Struct(">" + "".join(P.FIXED[f[1]][0] for f in run)))
                L.append(f"    out.append({s}.pack({', '.join('o.' + f[0] for f in run)}))")
            else:
                L += self.write_value(field, f"o.{field[0]}", "out", "    ")
        if self.flex:
            L.append("    known = []")
            for f in tagged:
                d = self.name("D", cls._defaults[f[0]])
                L += [
                    f"    v = o.{f[0]}",
                    f"    if not _isdef(v, {d}):",
                    "        sub = []",
                    *self.write_value(f, "v", "sub", "        "),
                    f"        known.append(({f[4]}, b''.join(sub)))",
                ]
            L.append("    _wtag(out, known, o._unknown_tags)")
        else:
            L.append("    pass")
        self.src += L

    def write_value(self, f: tuple[Any, ...], src: str, out: str, ind: str) -> list[str]:
        fname, kind, nullable = f[0], f[1], self.nullable(f)
        if kind in P.FIXED:
            s = self.name("S", struct.Struct(">" + P.FIXED[kind][0]))
            return [f"{ind}{out}.append({s}.pack({src}))"]
        if kind == "uuid":
            return [f"{ind}{out}.append({src}.bytes)"]
        if kind in ("string", "bytes", "records"):
            w = self.name("W", _var_writer(kind, self.flex, nullable, fname))
            return [f"{ind}{w}({out}, {src})"]
        wc = self.struct_codec(f[8], self.seg.classes[id(f[8])])[1] if f[8] is not None else None
        if kind == "struct":
            if not nullable:
                return [f"{ind}{wc}({src}, {out})"]
            return [
                f"{ind}if {src} is None:",
                f"{ind}    {out}.append(b'\\xff')",
                f"{ind}else:",
                f"{ind}    {out}.append(b'\\x01')",
                f"{ind}    {wc}({src}, {out})",
            ]
        a, e = self.name("a"), self.name("e")
        L = [f"{ind}{a} = {src}", f"{ind}if {a} is None:"]
        if nullable:
            null = repr(b"\x00" if self.flex else b"\xff" * 4)
            L.append(f"{ind}    {out}.append({null})")
        else:
            L.append(f"{ind}    raise ValueError('{fname} is not nullable in version {self.v}')")
        L += [f"{ind}else:", f"{ind}    {out}.append(_wuv(len({a}) + 1) if {self.flex} else _p32(len({a})))"]
        elem = kind[2:]
        if elem in P.FIXED:
            L.append(f"{ind}    {out}.append(_pack('>%d{P.FIXED[elem][0]}' % len({a}), *{a}))")
            return L
        L.append(f"{ind}    for {e} in {a}:")
        if kind == "[]struct":
            L.append(f"{ind}        {wc}({e}, {out})")
        elif elem == "uuid":
            L.append(f"{ind}        {out}.append({e}.bytes)")
        else:
            w = self.name("W", _var_writer(elem, self.flex, False, fname))
            L.append(f"{ind}        {w}({out}, {e})")
        return L


def compile_segment(seg: _Segment, version: int) -> tuple[Callable[..., Any], Callable[..., Any]]:
    gen = _Gen(seg, version)
    rname, wname = gen.struct_codec(seg.fields, seg.cls)
    source = "\n".join(gen.src) + "\n"
    exec(compile(source, f"<kafka codec {seg.name} v{version}>", "exec"), gen.ns)  # noqa: S102
    return gen.ns[rname], gen.ns[wname]


# --------------------------------------------------------------------------------------------
# Compiled codecs, cached per (api_key, direction, version).

_CACHE: dict[tuple[int, str, int], tuple[Callable[..., Any], Callable[..., Any], type[Message]]] = {}


def codec(
    api_key: int, direction: str, version: int
) -> tuple[Callable[..., Any], Callable[..., Any], type[Message]] | None:
    """``(reader, writer, message_class)`` for one API version, compiled on first use."""
    key = (api_key, direction, version)
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    seg = segment(api_key, direction, version)
    if seg is None:
        return None
    reader, writer = compile_segment(seg, version)
    _CACHE[key] = (reader, writer, seg.cls)
    return _CACHE[key]
