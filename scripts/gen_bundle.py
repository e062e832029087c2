#!/usr/bin/env python3
"""Generate SuperDSC bundles (bundle.mlir + sdsc_<N>.json) from parameters.

The output follows /work/shared/spyre/formats.md (sections A-D) and the structure of the real
torch-spyre compiler output in /work/shared/spyre/data/spyrecli_*: the same SDSC field names and
order, the same fold managers and coordinate folds, symbols numbered -1, -2, ... in emission
order with one symbol per distinct per-core start address, and per-core start addresses computed
from the stick-tiled layout (formats.md B.5 / D.2).  Standard library only.

    python3 scripts/gen_bundle.py --list
    python3 scripts/gen_bundle.py NAME OUTDIR [-p key=value ...]
    python3 scripts/gen_bundle.py --all OUTROOT

NAME is a preset (see --list) or a workload kind (unary, binary, addn, reduce, softmax, matmul, chain)
started from that kind's defaults; -p overrides single parameters (values are JSON, or a bare
string).  Every generated directory gets a README.md that records the command and parameters.
"""

import argparse
import hashlib
import json
import math
import os
import sys
from collections import OrderedDict

STICK_BYTES = 128
LX_BYTES = 2 << 20
LX_RESERVED = 64 << 10
LX_USABLE = LX_BYTES - LX_RESERVED
# What vspyre's loader takes (a work split's factor_ is at most 1024), so that bundles for what-if
# cards (configs/whatif/cores_64.yaml) can be made; the Spyre card has 32, and `vspyre run` checks
# a bundle's cores against its card.
MAX_CORES = 1024

FORMATS = {  # dtype -> (dataFormat_, wordLength)
    "fp16": ("SEN169_FP16", 2),
    "fp32": ("IEEE_FP32", 4),
}

# opFunc -> (exUnit, torch-ish name used in debug_handle_.ir_chain)
OPS = {
    "identity": ("sfp", "clone"), "neg": ("sfp", "neg"), "exp": ("sfp", "exp"),
    "relufwd": ("sfp", "relu"), "abs": ("sfp", "abs"), "sigmoid": ("sfp", "sigmoid"),
    "tanh": ("sfp", "tanh"), "gelufwd": ("sfp", "gelu"), "sqrt": ("sfp", "sqrt"),
    "rsqrt": ("sfp", "rsqrt"), "reciprocal": ("sfp", "reciprocal"), "log": ("sfp", "log"),
    "silu": ("sfp", "silu"),
    "add": ("sfp", "add"), "sub": ("sfp", "sub"), "mul": ("sfp", "mul"),
    "realdiv": ("sfp", "div"), "maximum": ("sfp", "maximum"), "minimum": ("sfp", "minimum"),
    "max": ("sfp", "amax"), "sum": ("sfp", "sum"), "mean": ("sfp", "mean"), "min": ("sfp", "amin"),
    "maxnonstick": ("sfp", "amax"), "sumnonstick": ("sfp", "sum"),
    "meannonstick": ("sfp", "mean"), "minnonstick": ("sfp", "amin"),
    "batchmatmul": ("pt", "bmm"),
    # formats.md C.5: a backend op; the spec gives no exUnit, torch-spyre sends every non-matmul
    # op to "sfp", so the generator writes "sfp" (the loader accepts any unit for backend ops).
    "shuffle": ("sfp", "shuffle"),
}
UNARY_ATEN = {"neg": "aten.neg.default", "exp": "aten.exp.default", "relufwd": "aten.relu.default",
              "abs": "aten.abs.default", "sigmoid": "aten.sigmoid.default",
              "tanh": "aten.tanh.default", "gelufwd": "aten.gelu.default",
              "sqrt": "aten.sqrt.default", "rsqrt": "aten.rsqrt.default",
              "reciprocal": "aten.reciprocal.default", "log": "aten.log.default",
              "silu": "aten.silu.default"}
BINARY_ATEN = {"add": "aten.add.Tensor", "sub": "aten.sub.Tensor", "mul": "aten.mul.Tensor",
               "realdiv": "aten.div.Tensor", "maximum": "aten.maximum.default",
               "minimum": "aten.minimum.default"}
REDUCE_ATEN = {"max": "aten.amax.default", "sum": "aten.sum.dim_IntList",
               "mean": "aten.mean.dim", "min": "aten.amin.default"}


class GenError(Exception):
    pass


def ceil_div(a, b):
    return -(-a // b)


def round_up(a, b):
    return ceil_div(a, b) * b


# ----------------------------------------------------------------------------------------------
# DLFloat16 (formats.md D.1): 1 sign, 6 exponent (bias 31), 9 fraction; no subnormals; round to
# nearest with ties away from zero; 0x7FFF/0xFFFF is NaN/Inf; saturate to the largest finite.

def dl16_encode(v):
    if v == 0:
        return 0
    sign = 0x8000 if v < 0 else 0
    m, e = math.frexp(abs(v))  # |v| = m * 2^e, m in [0.5, 1)
    exp = e - 1 + 31
    frac = math.floor((m * 2 - 1) * 512 + 0.5)
    if frac == 512:
        frac, exp = 0, exp + 1
    if exp < 0:
        return sign
    if exp > 63 or (exp == 63 and frac >= 511):
        exp, frac = 63, 510
    return sign | (exp << 9) | frac


# ----------------------------------------------------------------------------------------------
# Tensors and layouts

class Tensor:
    """A logical tensor of the kernel.

    dims: dimension names in logical (host) order; sizes: dim -> full size; scale: dim -> 1, -1
    (reduced/broadcast) or -2 (reduced stick); layout: layoutDimOrder_, innermost first; stick:
    the stick dimension.  home: ("arg", i) | ("pool", byte offset) | ("lx", None).
    """

    def __init__(self, name, dims, sizes, layout, stick, scale=None, dtype="fp16"):
        self.name = name
        self.dims = list(dims)
        self.sizes = dict(sizes)
        self.layout = list(layout)
        self.stick = stick
        self.scale = {d: 1 for d in self.layout}
        if scale:
            self.scale.update(scale)
        self.dtype = dtype
        self.home = None
        # backGapCore_ of the tensor's HBM allocation: dim -> trailing gap in elements (the
        # tensor is a tile of a larger one whose extent along the dim is size + gap)
        self.gap = {}
        # an input read whole by every core along its reduced dims (a broadcast operand): those
        # dims may be split across cores, every core starting at index 0
        self.broadcast = False
        if sorted(self.layout) != sorted(self.dims):
            raise GenError(f"{name}: layout {self.layout} is not a permutation of {self.dims}")
        if stick not in self.layout:
            raise GenError(f"{name}: stick dim {stick} not in the layout")

    @property
    def word(self):
        return FORMATS[self.dtype][1]

    @property
    def per_stick(self):
        return STICK_BYTES // self.word

    def count(self, d, size):
        """Layout extent of dim d for `size` elements (sticks for the stick dim)."""
        if self.scale[d] < 0:
            return 1
        return ceil_div(size, self.per_stick) if d == self.stick else size

    def extent(self, d):
        """Elements of the whole (HBM) tensor along d: the size and any trailing gap."""
        return self.sizes[d] + self.gap.get(d, 0)

    def strides(self):
        """dim -> byte stride of one step (one stick along the stick dim), formats.md B.5."""
        out, stride = {}, STICK_BYTES
        for d in self.layout:
            out[d] = stride
            stride *= self.count(d, self.extent(d))
        return out

    def total_bytes(self):
        n = STICK_BYTES
        for d in self.layout:
            n *= self.count(d, self.extent(d))
        return n

    def slice_bytes(self, ss):
        n = STICK_BYTES
        for d in self.layout:
            n *= self.count(d, ss[d])
        return n

    def slice_span(self, ss):
        st = self.strides()
        span = 0
        for d in self.layout:
            span += (self.count(d, ss[d]) - 1) * st[d]
        return span + STICK_BYTES

    def offset(self, start):
        """Byte offset of the element at `start` (dim -> element index) in the stick-tiled layout."""
        st = self.strides()
        off = 0
        for d in self.layout:
            if self.scale[d] < 0:
                continue
            s = start.get(d, 0)
            if d == self.stick:
                if s % self.per_stick:
                    raise GenError(f"{self.name}: slice start {s} of stick dim {d} is not whole sticks")
                s //= self.per_stick
            off += s * st[d]
        return off


class Split:
    """A work division: ordered dim -> number of slices; the first dim varies fastest over cores."""

    def __init__(self, n_dims, slices):
        self.dims = list(n_dims)  # N_ order
        for d in slices:
            if d not in self.dims:
                raise GenError(f"split names dim {d!r}, not one of {self.dims}")
        self.slices = OrderedDict((d, int(slices.get(d, 1))) for d in self.dims)
        self.cores = 1
        for v in self.slices.values():
            self.cores *= v
        if not 1 <= self.cores <= MAX_CORES:
            raise GenError(f"split {dict(self.slices)} uses {self.cores} cores (1..{MAX_CORES})")

    def core_slice(self, c):
        out = OrderedDict()
        for d, n in self.slices.items():
            out[d] = c % n
            c //= n
        return out

    def ss(self, n):
        out = OrderedDict()
        for d in self.dims:
            if n[d] % self.slices[d]:
                raise GenError(f"dim {d}={n[d]} does not divide into {self.slices[d]} slices")
            out[d] = n[d] // self.slices[d]
        return out


def parse_split(text):
    """'mb=4,x=2' -> {'mb': 4, 'x': 2}; '' or '1' -> {}."""
    if isinstance(text, dict):
        return dict(text)
    out = {}
    for part in str(text).split(","):
        part = part.strip()
        if not part or part == "1":
            continue
        k, _, v = part.partition("=")
        out[k.strip()] = int(v)
    return out


def split_text(s):
    return ",".join(f"{d}={n}" for d, n in s.items()) or "1"


# ----------------------------------------------------------------------------------------------
# SDSC JSON

def affine(alpha, beta=0):
    return {"Affine": {"alpha_": alpha, "beta_": beta}}


def attr(factor, label):
    return OrderedDict([("factor_", factor), ("label_", label)])


def coord_info(t, split, ss):
    ci = OrderedDict()
    for d in t.layout:
        # a broadcast dim is not divided: every core reads its one element (as the compiler
        # writes a [1, N] operand: core_fold factor 1)
        slices = 1 if t.broadcast and t.scale[d] < 0 else split.slices.get(d, 1)
        funcs, attrs = [], []
        if t.scale[d] == -2:
            elem_arr = 2
            funcs = [affine(t.per_stick), affine(0), affine(0), affine(t.per_stick), affine(0)]
            attrs = [attr(slices, "core_fold"), attr(1, "corelet_fold"), attr(1, "row_fold"),
                     attr(1, "elem_arr_1"), attr(t.per_stick, "elem_arr_0")]
        elif t.scale[d] == -1:
            elem_arr = 1  # [inf] not observed: one element, index 0 on every core
            funcs = [affine(1), affine(0), affine(0), affine(0)]
            attrs = [attr(slices, "core_fold"), attr(1, "corelet_fold"), attr(1, "row_fold"),
                     attr(1, "elem_arr_0")]
        elif d == t.stick:
            elem_arr = 2
            funcs = [affine(ss[d]), affine(0), affine(0), affine(t.per_stick), affine(1)]
            attrs = [attr(slices, "core_fold"), attr(1, "corelet_fold"), attr(1, "row_fold"),
                     attr(ceil_div(ss[d], t.per_stick), "elem_arr_1"),
                     attr(t.per_stick, "elem_arr_0")]
        else:
            elem_arr = 1
            funcs = [affine(ss[d]), affine(0), affine(0), affine(1)]
            attrs = [attr(slices, "core_fold"), attr(1, "corelet_fold"), attr(1, "row_fold"),
                     attr(ss[d], "elem_arr_0")]
        ci[d] = OrderedDict([("spatial", 3), ("temporal", 0), ("elemArr", elem_arr),
                             ("padding", "nopad"),
                             ("folds", OrderedDict([("dim_prop_func", funcs),
                                                    ("dim_prop_attr", attrs)]))])
    return ci


def stage_param(n_dims, ss):
    p = OrderedDict([("name_", "core")])
    for d in n_dims:
        p[d + "_"] = ss[d]
    for k in ("symbolicDimInfo_", "maxSymbolicVolume_", "coreletSplit_", "rowSplit_",
              "peSfpSplit_", "paddingSizes_"):
        p[k] = {}
    return p


class Operand:
    """One labeled tensor of one SDSC: a tensor, a role, a placement and (for LX) an offset.

    `split` overrides the SDSC's work division for this allocation only (the two states of a
    shuffle, formats.md C.5)."""

    def __init__(self, tensor, placement, lx_offset=None, role="OUTPUT", split=None):
        self.t = tensor
        self.placement = placement
        self.lx_offset = lx_offset
        self.role = role
        self.split = split
        if placement == "lx" and lx_offset is None:
            raise GenError(f"{tensor.name}: LX operand without an offset")
        if placement == "hbm" and tensor.home[0] not in ("arg", "pool"):
            raise GenError(f"{tensor.name}: HBM operand of a tensor with no HBM home")


class BundleBuilder:
    def __init__(self, name):
        self.name = name
        self.sdscs = []   # (filename, json object)
        self.execs = []   # (filename, [(sym, (base, off))])
        self.next_sym = -1
        self.args = []    # tensors, by argument index
        self.pool_bytes = 0
        self.summary = []  # one line per SDSC for the README

    def arg(self, t):
        t.home = ("arg", len(self.args))
        self.args.append(t)
        return t

    def pool(self, t):
        t.home = ("pool", self.pool_bytes)
        self.pool_bytes += round_up(t.total_bytes(), STICK_BYTES)
        return t

    def lx(self, t):
        t.home = ("lx", None)
        return t

    def add_sdsc(self, opfunc, n, split, operands, inputs, outputs, aten_op=None,
                 constants=None):
        """n: OrderedDict dim -> full size (N_); operands: list of Operand; inputs/outputs:
        operand indices for computeOp_."""
        idx = len(self.sdscs)
        fname = f"sdsc_{idx}.json"
        unit, ir_name = OPS[opfunc]
        ncores = split.cores
        cores = list(range(ncores))
        ss = split.ss(n)
        n_dims = list(n.keys())

        primary = OrderedDict()
        for op in operands:
            if op.role not in primary:
                primary[op.role] = OrderedDict([("layoutDimOrder_", list(op.t.layout)),
                                                ("stickDimOrder_", [op.t.stick]),
                                                ("stickSize_", [op.t.per_stick])])

        bindings = []
        tree, lds = [], []
        for i, op in enumerate(operands):
            t = op.t
            for d in t.layout:
                if d not in n:
                    raise GenError(f"{fname}: {t.name} dim {d} not in N_")
                if d == t.stick and t.scale[d] > 0 and ss[d] % t.per_stick:
                    raise GenError(f"{fname}: {t.name}: per-core {d}={ss[d]} is not whole sticks")
            asplit = op.split or split
            ass = asplit.ss(n)
            data = OrderedDict()
            node = OrderedDict([("nodeType_", "allocate"),
                                ("name_", f"allocate-Tensor{i}_{op.placement}"),
                                ("prev_", ""), ("ldsIdx_", i), ("component_", op.placement)])
            if op.placement == "hbm":
                node["isStartAddrSymbolic_"] = 1
                base_kind, base_off = t.home
                seen = OrderedDict()
                for c in cores:
                    sl = asplit.core_slice(c)
                    start = {d: sl[d] * ass[d] for d in t.layout if d in sl}
                    off = t.offset(start)
                    if not t.broadcast and any(t.scale[d] < 0 and sl.get(d, 0) for d in t.layout):
                        raise GenError(f"{fname}: {t.name}: a reduced dim is split across cores")
                    key = off
                    if key not in seen:
                        seen[key] = self.next_sym
                        bindings.append((self.next_sym, (base_kind, t.home[1], off)))
                        self.next_sym -= 1
                    data[f"[{c}, 0, 0]"] = str(seen[key])
                    if off + t.slice_span(ass) > t.total_bytes():
                        raise GenError(f"{fname}: {t.name}: core {c} slice exceeds the tensor")
            else:
                nbytes = t.slice_bytes(ass)
                if op.lx_offset % STICK_BYTES or op.lx_offset + nbytes > LX_USABLE:
                    raise GenError(f"{fname}: {t.name}: LX offset {op.lx_offset} + {nbytes} B "
                                   f"does not fit {LX_USABLE} usable bytes")
                for c in cores:
                    data[f"[{c}, 0, 0]"] = str(op.lx_offset)
            node["layoutDimOrder_"] = list(t.layout)
            node["maxDimSizes_"] = [-1] * len(t.layout)
            node["indirectAllocType_"] = "no_indirection"
            node["startAddressCoreCorelet_"] = OrderedDict([
                ("dim_prop_func", [{"Map": {}}, {"Const": {}}, {"Const": {}}]),
                ("dim_prop_attr", [attr(ncores, "core"), attr(1, "corelet"), attr(1, "time")]),
                ("data_", data)])
            if op.placement == "hbm" and t.gap:
                # torch-spyre's superdsc.py: HBM gaps under core "-1", element counts as strings
                node["backGapCore_"] = OrderedDict((d, {"-1": str(g)}) for d, g in t.gap.items())
            wk = {}
            if op.split is not None:
                wk = OrderedDict((str(c), asplit.core_slice(c)) for c in cores)
            node["coordinates_"] = OrderedDict([("coordInfo", coord_info(t, asplit, ass)),
                                                ("coreIdToWkSlice_", wk)])
            tree.append(node)
            mem = OrderedDict()
            if op.placement == "hbm":
                mem["hbm"] = {"isPresent": 1}
            mem["lx"] = {"isPresent": 1}
            fmt, word = FORMATS[t.dtype]
            lds.append(OrderedDict([("ldsIdx_", i), ("dsName_", f"Tensor{i}"),
                                    ("dsType_", op.role),
                                    ("scale_", [t.scale[d] for d in t.layout]),
                                    ("wordLength", word), ("dataFormat_", fmt),
                                    ("memOrg_", mem)]))

        fmt = FORMATS[operands[outputs[0]].t.dtype][0]
        dsc = OrderedDict([
            ("numCoresUsed_", ncores), ("numCoreletsUsed_", 1), ("coreIdsUsed_", cores),
            ("N_", OrderedDict([("name_", "n")] + [(d + "_", n[d]) for d in n_dims])),
            ("coordinateMasking_", {}), ("maskingConstId_", -1),
            ("dataStageParam_", {"0": OrderedDict([("ss_", stage_param(n_dims, ss)),
                                                   ("el_", stage_param(n_dims, ss))])}),
            ("primaryDsInfo_", primary),
            ("scheduleTree_", tree),
            ("labeledDs_", lds),
            ("constantInfo_", constants if constants else "{}"),
            ("computeOp_", [OrderedDict([
                ("exUnit", unit), ("opFuncName", opfunc),
                ("attributes_", OrderedDict([("dataFormat_", fmt), ("fidelity_", "regular")])),
                ("location", "Inner"),
                ("inputLabeledDs", [f"Tensor{i}-idx{i}" for i in inputs]),
                ("outputLabeledDs", [f"Tensor{i}-idx{i}" for i in outputs])])]),
        ])
        h = hashlib.sha256(f"{self.name}/{idx}/{opfunc}".encode()).hexdigest()
        sdsc = OrderedDict([
            ("debug_handle_", OrderedDict([
                ("id", str(int(h[:16], 16) & ((1 << 63) - 1))), ("source", None),
                ("aten_op", aten_op), ("ir_chain", [ir_name, f"buf{idx}"]),
                ("fused_from", []), ("transform_history", [])])),
            ("sdscFoldProps_", [attr(1, "time")]),
            ("sdscFolds_", OrderedDict([("dim_prop_func", [affine(1)]),
                                        ("dim_prop_attr", [attr(1, "time")]),
                                        ("data_", {"[0]": "0"})])),
            ("coreFoldProp_", attr(ncores, "core")),
            ("coreletFoldProp_", attr(1, "corelet")),
            ("numCoresUsed_", ncores),
            ("coreIdToDsc_", OrderedDict((str(c), 0) for c in cores)),
            ("numWkSlicesPerDim_", OrderedDict(split.slices)),
            ("coreIdToWkSlice_", OrderedDict((str(c), split.core_slice(c)) for c in cores)),
            ("coreIdToDscSchedule", OrderedDict((str(c), [[-1, 0, 0, 0]]) for c in cores)),
            ("dscs_", [{opfunc: dsc}]),
        ])
        self.sdscs.append((fname, {f"{idx}_{opfunc}": sdsc}))
        self.execs.append((fname, bindings))
        desc = []
        for i, op in enumerate(operands):
            where = (f"LX@{op.lx_offset}" if op.placement == "lx"
                     else ("arg_%d" % op.t.home[1] if op.t.home[0] == "arg"
                           else "pool+%d" % op.t.home[1]))
            desc.append(f"{op.t.name}:{where}")
        ins = ", ".join(desc[i] for i in inputs)
        outs = ", ".join(desc[i] for i in outputs)
        self.summary.append(f"`{fname}` `{idx}_{opfunc}` on {ncores} core(s), split "
                            f"{split_text(split.slices)}: {ins} -> {outs}"
                            + (f" ({len(bindings)} symbols)" if bindings else ""))

    # -- bundle.mlir -------------------------------------------------------------------------

    def mlir(self):
        def ssa(base_kind, base_idx, off):
            if base_kind == "arg":
                return (f"%arg_{base_idx}" if off == 0 else f"%arg_{base_idx}_core_{off}",
                        f"%arg_{base_idx}_core_offset_{off}", f"%arg_{base_idx}")
            total = base_idx + off  # pool-relative byte offset
            return ("%pool" if total == 0 else f"%pool_{total}", f"%pool_offset_{total}", "%pool")

        params = ", ".join(f"%arg_{i}_base_addr: !sdscbundle.input_arg<index>"
                           for i in range(len(self.args)))
        lines = ["module {", f"\tfunc.func @sdsc_bundle({params}) {{"]
        if self.pool_bytes:
            lines.append(f"\t\t%pool = sdscbundle.device_mem_allocate {self.pool_bytes} bytes : index")
        for i in range(len(self.args)):
            lines.append(f"\t\t%arg_{i} = sdscbundle.input_arg_extract value from %arg_{i}_base_addr"
                         f" : !sdscbundle.input_arg<index> -> index")
        defined = set()
        body = []
        for fname, binds in self.execs:
            vals = []
            for sym, (kind, bidx, off) in binds:
                name, cname, base = ssa(kind, bidx, off)
                if name not in defined and name != base:
                    defined.add(name)
                    val = off if kind == "arg" else bidx + off
                    lines.append(f"\t\t{cname} = arith.constant {val} : index")
                    lines.append(f"\t\t{name} = arith.addi {base}, {cname} : index")
                vals.append(name)
            syms = ", ".join(str(s) for s, _ in binds)
            body.append(f"\t\tsdscbundle.sdsc_execute ({', '.join(vals)}) "
                        f"{{sdsc_filename=\"{fname}\", \"symbol_ids\"=[{syms}]}}")
        lines += body
        lines += ["\t\treturn", "\t}", "}"]
        return "\n".join(lines) + "\n"

    def write(self, outdir, readme):
        os.makedirs(outdir, exist_ok=True)
        for f in os.listdir(outdir):
            if f == "bundle.mlir" or (f.startswith("sdsc_") and f.endswith(".json")) or f == "README.md":
                os.remove(os.path.join(outdir, f))
        with open(os.path.join(outdir, "bundle.mlir"), "w") as fh:
            fh.write(self.mlir())
        for fname, obj in self.sdscs:
            with open(os.path.join(outdir, fname), "w") as fh:
                fh.write(json.dumps(obj, indent=2))  # real SDSC files end without a newline
        with open(os.path.join(outdir, "README.md"), "w") as fh:
            fh.write(readme)


# ----------------------------------------------------------------------------------------------
# Workload kinds

def pointwise_dims(shape):
    """Dim names and default layout (innermost first) for a pointwise tensor, as torch-spyre
    names them: 2-D [mb, out] (spyrecli softmax/mean); 3-D [mb, x, out] laid out [mb, out, x],
    i.e. device [d1][d2/64][d0][64] (spyrecli add_3d, formats.md D.2)."""
    if len(shape) == 1:
        return ["out"], ["out"]
    if len(shape) == 2:
        return ["mb", "out"], ["mb", "out"]
    if len(shape) == 3:
        return ["mb", "x", "out"], ["mb", "out", "x"]
    raise GenError("pointwise shapes of rank 1-3 are supported")


def shape_of(p):
    s = p["shape"]
    if isinstance(s, str):
        s = [int(v) for v in s.replace("x", ",").split(",")]
    return [int(v) for v in s]


def gen_unary(b, p):
    shape = shape_of(p)
    dims, layout = pointwise_dims(shape)
    n = OrderedDict(zip(dims, shape))
    split = Split(dims, parse_split(p["split"]))
    x = b.arg(Tensor("x", dims, n, layout, dims[-1], dtype=p["dtype"]))
    y = b.arg(Tensor("y", dims, n, layout, dims[-1], dtype=p["dtype"]))
    gap = p.get("back_gap", {})
    if not isinstance(gap, dict):
        raise GenError("back_gap must be a dict {dim: elements}")
    for d, g in gap.items():
        if d not in dims or not isinstance(g, int) or g < 0:
            raise GenError(f"back_gap: {d!r}: expected one of {dims} -> elements >= 0, got {g!r}")
    x.gap = {d: g for d, g in gap.items() if g}
    y.gap = dict(x.gap)
    b.add_sdsc(p["op"], n, split, [Operand(x, "hbm"), Operand(y, "hbm")], [0], [1],
               aten_op=UNARY_ATEN.get(p["op"]))


BROADCASTS = ("none", "row", "col")


def broadcast_operand(name, dims, n, layout, how, dtype):
    """The second operand of a binary: full, or broadcast along one dim of a 2-D shape.

    "row": b[1, N], the same row for every row of a (a reduced, `scale_` -1 non-stick dim: N/64
    sticks in all); "col": b[M, 1], one value per row (a reduced stick dim, `scale_` -2: one
    stick per row, as torch-spyre keeps a [M, 1] tensor)."""
    if how not in BROADCASTS:
        raise GenError(f"broadcast {how!r} is not one of {', '.join(BROADCASTS)}")
    if how == "none":
        return Tensor(name, dims, n, layout, dims[-1], dtype=dtype)
    if len(dims) != 2:
        raise GenError("broadcast operands are generated for 2-D shapes only")
    rdim = dims[0] if how == "row" else dims[-1]
    t = reduced_tensor(name, dims, n, layout, rdim, dtype)
    t.broadcast = True
    return t


def gen_binary(b, p):
    shape = shape_of(p)
    dims, layout = pointwise_dims(shape)
    n = OrderedDict(zip(dims, shape))
    split = Split(dims, parse_split(p["split"]))
    a = b.arg(Tensor("a", dims, n, layout, dims[-1], dtype=p["dtype"]))
    c = b.arg(broadcast_operand("b", dims, n, layout, p.get("broadcast", "none"), p["dtype"]))
    y = b.arg(Tensor("y", dims, n, layout, dims[-1], dtype=p["dtype"]))
    b.add_sdsc(p["op"], n, split, [Operand(a, "hbm"), Operand(c, "hbm"), Operand(y, "hbm")],
               [0, 1], [2], aten_op=BINARY_ATEN.get(p["op"]))


def gen_addn(b, p):
    """Sums of `inputs` tensors as torch-spyre fuses them (tests/fixtures/captured/add3_*, add4_*).

    A chain ((x0 + x1) + x2) + ...: one add SDSC per step. intermediates "lx" (the compiler with
    LX planning): the running sum stays in LX at offset 0, each add writing over its input;
    "hbm" (LX planning off): each partial sum is a fresh tensor in the HBM pool. independent:
    inputs/2 unrelated adds x0 + x1, x2 + x3, ... in one bundle, each with its own output."""
    shape = shape_of(p)
    dims, layout = pointwise_dims(shape)
    n = OrderedDict(zip(dims, shape))
    split = Split(dims, parse_split(p["split"]))
    k = int(p["inputs"])
    inter = p["intermediates"]
    if inter not in ("lx", "hbm"):
        raise GenError("intermediates must be lx or hbm")

    def full(name):
        return Tensor(name, dims, n, layout, dims[-1], dtype=p["dtype"])

    aten = BINARY_ATEN["add"]
    if p["independent"]:
        if k < 2 or k % 2:
            raise GenError("independent adds take an even number of inputs (2 per add)")
        xs = [b.arg(full(f"x{i}")) for i in range(k)]
        for j in range(k // 2):
            y = b.arg(full(f"y{j}"))
            b.add_sdsc("add", n, split, [Operand(xs[2 * j], "hbm"), Operand(xs[2 * j + 1], "hbm"),
                                         Operand(y, "hbm")], [0, 1], [2], aten_op=aten)
        return
    if k < 2:
        raise GenError("a sum takes at least 2 inputs")
    xs = [b.arg(full(f"x{i}")) for i in range(k)]
    y = b.arg(full("y"))
    acc = Operand(xs[0], "hbm")
    for i in range(1, k):
        if i == k - 1:
            out = Operand(y, "hbm")
        elif inter == "lx":
            out = Operand(b.lx(full(f"t{i}")), "lx", 0)
        else:
            out = Operand(b.pool(full(f"t{i}")), "hbm")
        b.add_sdsc("add", n, split, [acc, Operand(xs[i], "hbm"), out], [0, 1], [2], aten_op=aten)
        acc = out


def reduced_tensor(name, dims, n, layout, rdim, dtype):
    """The output of a reduction along rdim: -2 if rdim is the stick dim, else -1 (keepdim)."""
    stick = dims[-1]
    scale = {rdim: -2 if rdim == stick else -1}
    return Tensor(name, dims, n, layout, stick, scale=scale, dtype=dtype)


def reduce_op(op, rdim, stick):
    """formats.md C.2: max/sum/mean/min reduce the stick dim; *nonstick reduce any other dim."""
    return op if rdim == stick else op + "nonstick"


def mean_constant(size, dtype, ncores):
    fmt = FORMATS[dtype][0]
    if dtype != "fp16":
        raise GenError("mean constants are generated for fp16 (DL16) only")
    return {"0": OrderedDict([
        ("dataFormat_", fmt), ("name_", "scaling_factor"),
        ("data_", OrderedDict([
            ("dim_prop_func", [{"Const": {}}, {"Const": {}}, {"Map": {}}]),
            ("dim_prop_attr", [attr(ncores, "core"), attr(1, "corelet"), attr(1, "time")]),
            ("data_", {"[0, 0, 0]": [str(dl16_encode(1.0 / size))]})]))])}


def gen_reduce(b, p):
    shape = shape_of(p)
    dims, layout = pointwise_dims(shape)
    n = OrderedDict(zip(dims, shape))
    split = Split(dims, parse_split(p["split"]))
    rdim = dims[int(p["dim"])]
    if split.slices[rdim] != 1:
        raise GenError(f"the reduced dim {rdim} cannot be split across cores")
    x = b.arg(Tensor("x", dims, n, layout, dims[-1], dtype=p["dtype"]))
    y = b.arg(reduced_tensor("y", dims, n, layout, rdim, p["dtype"]))
    op = reduce_op(p["op"], rdim, dims[-1])
    const = mean_constant(n[rdim], p["dtype"], split.cores) if p["op"] == "mean" else None
    b.add_sdsc(op, n, split, [Operand(x, "hbm"), Operand(y, "hbm")], [0, 1], [1],
               aten_op=REDUCE_ATEN.get(p["op"]), constants=const)


def gen_softmax(b, p):
    """softmax as max -> sub -> exp -> sum -> realdiv (formats.md A.4 / measured.md section 1).

    lx_reductions: max/sum outputs pinned in LX (else pool); intermediates: "hbm" (sub/exp
    outputs in the pool), "inplace" (sub/exp written in place in one LX buffer) or "pingpong"
    (two LX buffers, as the real spyrecli softmax); lx_input: clone the input into LX once with
    an identity SDSC first (then sub writes over the clone when in place)."""
    shape = shape_of(p)
    if len(shape) != 2:
        raise GenError("softmax takes a 2-D shape")
    dims, layout = pointwise_dims(shape)
    n = OrderedDict(zip(dims, shape))
    split = Split(dims, parse_split(p["split"]))
    rdim = dims[int(p["dim"])]
    if split.slices[rdim] != 1:
        raise GenError(f"the softmax dim {rdim} cannot be split across cores")
    dt = p["dtype"]
    inter = p["intermediates"]
    if inter not in ("hbm", "inplace", "pingpong"):
        raise GenError("intermediates must be hbm, inplace or pingpong")
    ss = split.ss(n)
    aten = "aten._softmax.default"

    def full(name):
        return Tensor(name, dims, n, layout, dims[-1], dtype=dt)

    x = b.arg(full("x"))
    y = b.arg(full("y"))
    red_probe = reduced_tensor("r", dims, n, layout, rdim, dt)
    red_bytes = round_up(red_probe.slice_bytes(ss), STICK_BYTES)
    big_bytes = full("probe").slice_bytes(ss)
    slot_a = red_bytes if p["lx_reductions"] else 0
    slot_b = slot_a + big_bytes

    def operand(t, lx_off):
        return Operand(t, "lx", lx_off) if lx_off is not None else Operand(t, "hbm")

    # where each value lives: LX offset or None (HBM)
    x_lx = slot_a if p["lx_input"] else None
    if inter == "hbm":
        t_lx = e_lx = None
    elif inter == "inplace":
        t_lx = e_lx = slot_a
    else:
        t_lx = slot_b if p["lx_input"] else slot_a
        e_lx = slot_a if t_lx == slot_b else slot_b
    r_lx = 0 if p["lx_reductions"] else None

    def place(t, lx_off):
        return b.lx(t) if lx_off is not None else b.pool(t)

    xs = x
    if p["lx_input"]:
        xs = b.lx(full("x_lx"))
        b.add_sdsc("identity", n, split, [Operand(x, "hbm"), Operand(xs, "lx", x_lx)], [0], [1])
    m = place(reduced_tensor("max", dims, n, layout, rdim, dt), r_lx)
    b.add_sdsc(reduce_op("max", rdim, dims[-1]), n, split,
               [operand(xs, x_lx), operand(m, r_lx)], [0, 1], [1], aten_op=aten)
    t = place(full("sub"), t_lx)
    b.add_sdsc("sub", n, split, [operand(xs, x_lx), operand(m, r_lx), operand(t, t_lx)],
               [0, 1], [2], aten_op=aten)
    e = place(full("exp"), e_lx)
    b.add_sdsc("exp", n, split, [operand(t, t_lx), operand(e, e_lx)], [0], [1], aten_op=aten)
    s = place(reduced_tensor("sum", dims, n, layout, rdim, dt), r_lx)
    b.add_sdsc(reduce_op("sum", rdim, dims[-1]), n, split,
               [operand(e, e_lx), operand(s, r_lx)], [0, 1], [1], aten_op=aten)
    b.add_sdsc("realdiv", n, split, [operand(e, e_lx), operand(s, r_lx), Operand(y, "hbm")],
               [0, 1], [2], aten_op=aten)


MATMUL_LAYOUTS = {
    # formats.md D.2 and measured.md section 2: innermost first
    "default": {"act": ["x", "in", "mb"], "out": ["x", "out", "mb"]},
    "batch_outer": {"act": ["mb", "in", "x"], "out": ["mb", "out", "x"]},
    # K (N for the output) right outside the stick: row-major sticks [x][mb][in/64][64]
    "row_major": {"act": ["in", "mb", "x"], "out": ["out", "mb", "x"]},
}
# 2-D (batch 0): the default [K/64][M][64], or row-major [M][K/64][64] (torch-spyre's SDSC for a
# shared-weight projection in 2026-06: INPUT [in, mb], OUTPUT [out, mb]).
MATMUL_LAYOUTS_2D = {
    "default": {"act": ["mb", "in"], "out": ["mb", "out"]},
    "row_major": {"act": ["in", "mb"], "out": ["out", "mb"]},
}


def gen_matmul(b, p):
    """act[B,M,K] @ W[K,N] (B = 0: 2-D mm).  Dims: x batch, mb rows, in K, out N (formats.md B.2)."""
    B, M, K, N = int(p["batch"]), int(p["m"]), int(p["k"]), int(p["n"])
    dt = p["dtype"]

    def pick(table, key, value):
        if value not in table:
            raise GenError(f"matmul: {key} {value!r} is not one of {sorted(table)}")
        return table[value]

    layouts = MATMUL_LAYOUTS if B else MATMUL_LAYOUTS_2D
    act_l = pick(layouts, "layout", p["layout"])["act"]
    # The output's own order when it differs from the activation's (bmm layout cube).
    out_l = pick(layouts, "out_layout", p["out_layout"] or p["layout"])["out"]
    if B:
        n = OrderedDict([("x", B), ("mb", M), ("out", N), ("in", K)])
        act_d, out_d = ["x", "mb", "in"], ["x", "mb", "out"]
    else:
        n = OrderedDict([("mb", M), ("out", N), ("in", K)])
        act_d, out_d = ["mb", "in"], ["mb", "out"]
    if B and p["weight_batched"]:
        # [B,K,N]: row-outer [K][N/64][B][64] as spyrecli bmm, or batch-outer [B][N/64][K][64]
        w_d = ["x", "in", "out"]
        w_l = pick({"row": ["x", "out", "in"], "batch": ["in", "out", "x"]}, "weight_layout", p["weight_layout"])
    else:
        w_d, w_l = ["in", "out"], ["in", "out"]  # weight layout ['in','out'] (measured.md 2)
    split = Split(list(n.keys()), parse_split(p["split"]))
    if split.slices["in"] != 1:
        raise GenError("split-K is not generated")
    a = b.arg(Tensor("act", act_d, {d: n[d] for d in act_d}, act_l, "in", dtype=dt))
    w = b.arg(Tensor("weight", w_d, {d: n[d] for d in w_d}, w_l, "out", dtype=dt))
    y = b.arg(Tensor("out", out_d, {d: n[d] for d in out_d}, out_l, "out", dtype="fp16"))
    aten = ("aten.bmm.default" if p["weight_batched"] else "aten.matmul.default") if B \
        else "aten.mm.default"
    b.add_sdsc("batchmatmul", n, split,
               [Operand(a, "hbm", role="INPUT"), Operand(w, "hbm", role="KERNEL"),
                Operand(y, "hbm", role="OUTPUT")], [0, 1], [2], aten_op=aten)


def gen_chain(b, p):
    """y = op2(op1(x)), two unary ops with (possibly) different work divisions.

    mode "demote": the intermediate goes through HBM (pool); "shuffle": it stays in LX and an
    LX->LX `shuffle` SDSC (formats.md C.5) relays it from the producer's to the consumer's
    split; "lx": it stays in LX (only when the splits are equal)."""
    shape = shape_of(p)
    dims, layout = pointwise_dims(shape)
    n = OrderedDict(zip(dims, shape))
    dt = p["dtype"]
    ps = Split(dims, parse_split(p["producer_split"]))
    cs = Split(dims, parse_split(p["consumer_split"]))
    if ps.cores != cs.cores:
        raise GenError("producer and consumer must use the same number of cores")
    op1, op2 = p["ops"]
    mode = p["mode"]

    def full(name):
        return Tensor(name, dims, n, layout, dims[-1], dtype=dt)

    x = b.arg(full("x"))
    y = b.arg(full("y"))
    if mode == "demote":
        t = b.pool(full("t"))
        b.add_sdsc(op1, n, ps, [Operand(x, "hbm"), Operand(t, "hbm")], [0], [1],
                   aten_op=UNARY_ATEN.get(op1))
        b.add_sdsc(op2, n, cs, [Operand(t, "hbm"), Operand(y, "hbm")], [0], [1],
                   aten_op=UNARY_ATEN.get(op2))
    elif mode == "lx":
        if dict(ps.slices) != dict(cs.slices):
            raise GenError("mode lx needs equal producer and consumer splits")
        t = b.lx(full("t"))
        b.add_sdsc(op1, n, ps, [Operand(x, "hbm"), Operand(t, "lx", 0)], [0], [1],
                   aten_op=UNARY_ATEN.get(op1))
        b.add_sdsc(op2, n, cs, [Operand(t, "lx", 0), Operand(y, "hbm")], [0], [1],
                   aten_op=UNARY_ATEN.get(op2))
    elif mode == "shuffle":
        t1 = b.lx(full("t_s1"))
        t2 = b.lx(full("t_s2"))
        s1_bytes = t1.slice_bytes(ps.ss(n))
        off2 = round_up(s1_bytes, STICK_BYTES)
        b.add_sdsc(op1, n, ps, [Operand(x, "hbm"), Operand(t1, "lx", 0)], [0], [1],
                   aten_op=UNARY_ATEN.get(op1))
        # scheduleTree_[0] = S1 (producer's ownership), [1] = S2 (consumer's ownership); the
        # SDSC's own work division is the consumer's.
        b.add_sdsc("shuffle", n, cs,
                   [Operand(t1, "lx", 0, split=ps), Operand(t2, "lx", off2, split=cs)],
                   [0], [1])
        b.add_sdsc(op2, n, cs, [Operand(t2, "lx", off2), Operand(y, "hbm")], [0], [1],
                   aten_op=UNARY_ATEN.get(op2))
    else:
        raise GenError("mode must be demote, shuffle or lx")


# Parameters a kind takes only when given (so that bundles written before they existed, whose
# debug ids hash the parameters, regenerate byte-identical): kind -> {name: default}.
OPTIONAL = {"binary": {"broadcast": "none"},
            # both tensors are tiles of larger ones: dim -> trailing gap (backGapCore_)
            "unary": {"back_gap": {}}}

NOTES = {
    "softmax": "Reductions along a non-stick dim (dim 0 of the default [mb, out] layout, stick "
               "`out`) use `maxnonstick`/`sumnonstick` with `scale_` -1 on the reduced dim "
               "(formats.md C.2); along the stick dim they use `max`/`sum` with -2. Intermediates "
               "that are not in LX live in the kernel-private HBM pool "
               "(`sdscbundle.device_mem_allocate`, formats.md A.2), each its own full stick-tiled "
               "tensor; LX values are at the same byte offset on every core, reductions at LX 0 "
               "(max and sum share it, as in the real spyrecli softmax) and the big buffer right "
               "after; `inplace` writes sub and exp over their input.",
    "matmul": "Dims x (batch), mb (M), out (N), in (K), N_ order [x, mb, out, in] as spyrecli bmm; "
              "roles INPUT/KERNEL/OUTPUT on exUnit pt. The weight is 2-D ['in','out'] unless "
              "weight_batched: then ['x','out','in'] (row-outer, as spyrecli bmm) or, with "
              "weight_layout=batch, ['in','out','x'] (batch-outer). out_layout gives the output "
              "an order of its own (default: layout's). The core split is a "
              "generator choice: measured.md does not give it.",
    "chain": "`demote`: the intermediate is a full tensor in the HBM pool, written with the "
             "producer's split and read with the consumer's. `shuffle`: formats.md C.5 - a "
             "copy-only SDSC (opFunc `shuffle`, exUnit written as `sfp`) with exactly two LX "
             "allocations, scheduleTree_[0] = S1 (producer ownership) and [1] = S2 (consumer "
             "ownership), each with its own coordInfo folds and coordinates_.coreIdToWkSlice_; "
             "the SDSC's own work division (numWkSlicesPerDim_, dataStageParam_) is the "
             "consumer's. Both states keep the default layoutDimOrder_.",
}

KINDS = {
    "unary": (gen_unary, {"op": "neg", "shape": [2048, 1024], "split": "mb=32", "dtype": "fp16"}),
    "binary": (gen_binary, {"op": "add", "shape": [2048, 1024], "split": "mb=32", "dtype": "fp16"}),
    "addn": (gen_addn, {"inputs": 3, "shape": [2048, 1024], "split": "mb=32", "dtype": "fp16",
                        "intermediates": "lx", "independent": False}),
    "reduce": (gen_reduce, {"op": "sum", "shape": [512, 1024], "dim": 1, "split": "mb=32",
                            "dtype": "fp16"}),
    "softmax": (gen_softmax, {"shape": [512, 1024], "dim": 0, "split": "1", "dtype": "fp16",
                              "lx_reductions": False, "intermediates": "hbm",
                              "lx_input": False}),
    "matmul": (gen_matmul, {"batch": 0, "m": 512, "k": 1024, "n": 256, "layout": "default",
                            "weight_batched": False, "weight_layout": "row", "out_layout": "",
                            "split": "mb=8,out=4",
                            "dtype": "fp16"}),
    "chain": (gen_chain, {"ops": ["neg", "relufwd"], "shape": [8, 256, 512],
                          "producer_split": "mb=4,x=2", "consumer_split": "x=8",
                          "mode": "demote", "dtype": "fp16"}),
}

SH3 = ("measured.md section 3 (PR #3844), row `Same bytes and cores, other slice geometries` "
       "(measured range 2.3 - 24.2 us; which geometries were measured is not published): ")
SH3X = ("measured.md section 3 (PR #3844), row `Equal run length, higher split` (~3.6x slower); "
        "measured.md gives only the ratio and no geometry, so the pair is a generator choice: ")
SM1 = "measured.md section 1 (softmax scratchpad study, torch-spyre scratchpad_planning.md)"
PRESETS = OrderedDict([
    ("softmax_512x1024_baseline", ("softmax", {
        "split": "1", "lx_reductions": False, "intermediates": "hbm", "lx_input": False},
        SM1 + ", row `baseline`: 1 core, every intermediate through HBM (8MN+4N), 32.51 us.")),
    ("softmax_512x1024_lx_reductions", ("softmax", {
        "split": "1", "lx_reductions": True, "intermediates": "hbm", "lx_input": False},
        SM1 + ", row `stage 2`: 1 core, max and sum outputs pinned in LX (8MN), 27.66 us.")),
    ("softmax_512x1024_inplace", ("softmax", {
        "split": "1", "lx_reductions": True, "intermediates": "inplace", "lx_input": False},
        SM1 + ", row `stage 3`: 1 core, + in-place sub and exp in LX (3MN), 23.93 us.")),
    ("softmax_512x1024_lx_input", ("softmax", {
        "split": "1", "lx_reductions": True, "intermediates": "inplace", "lx_input": True},
        SM1 + ", row `stage 4`: 1 core, + input cloned into LX once (2MN), 23.67 us.")),
    ("softmax_512x1024_baseline_4core", ("softmax", {
        "split": "out=4", "lx_reductions": False, "intermediates": "hbm", "lx_input": False},
        SM1 + ": the `baseline` placement on 4 cores. No measured row has exactly this "
        "configuration: the measured `4-core` row (32.17 us) is stage 4 on 4 cores, which is "
        "fixture `softmax_512x1024_lx_input_4core`.")),
    ("softmax_512x1024_lx_input_4core", ("softmax", {
        "split": "out=4", "lx_reductions": True, "intermediates": "inplace", "lx_input": True},
        SM1 + ", row `4-core`: 4 cores, as stage 4, 32.17 us.")),
    ("matmul_b8_default", ("matmul", {
        "batch": 8, "m": 512, "k": 4096, "n": 12800, "layout": "default",
        "split": "mb=4,out=8"},
        "measured.md section 2 (PR #4302 require_layout), row `[8,512,4096] @ [4096,12800]`, "
        "column Baseline (activation/output ['x','in','mb'] / ['x','out','mb']): 26.968 ms. "
        "Split {mb:4,out:8}: the compiler's for this shape (tests/fixtures/captured/"
        "matmul_b8_n12800_default).")),
    ("matmul_b8_batch_outer", ("matmul", {
        "batch": 8, "m": 512, "k": 4096, "n": 12800, "layout": "batch_outer",
        "split": "mb=4,out=8"},
        "measured.md section 2 (PR #4302 require_layout), row `[8,512,4096] @ [4096,12800]`, "
        "column Batch-outer in+out (['mb','in','x'] / ['mb','out','x']): 8.384 ms. "
        "Split {mb:4,out:8}: the compiler's for this shape (tests/fixtures/captured/"
        "matmul_b8_n12800_default).")),
    ("relu_neg_demote", ("chain", {
        "ops": ["neg", "relufwd"], "shape": [8, 256, 512], "producer_split": "mb=4,x=2",
        "consumer_split": "x=8", "mode": "demote"},
        "measured.md section 4 (PR #4024, predictions only): relu(neg(x)) 8x256x512 fp16 on 8 "
        "cores with a producer/consumer split mismatch, the intermediate demoted through HBM "
        "(predicted ~80 us demote, graph 80.0 us). P, not measured.")),
    ("relu_neg_shuffle", ("chain", {
        "ops": ["neg", "relufwd"], "shape": [8, 256, 512], "producer_split": "mb=4,x=2",
        "consumer_split": "x=8", "mode": "shuffle"},
        "measured.md section 4 (PR #4024, predictions only: 1.1 us shuffle, graph 41.1 us) and "
        "section 3 (PR #3844): the shuffle is the canonical case, logical [8,256,512] fp16 laid "
        "out [256,8,8,64], producer view {B:4, M:2} (mb=4,x=2), measured 8.721 us.")),
    ("relu_neg_shuffle_reversed", ("chain", {
        "ops": ["neg", "relufwd"], "shape": [8, 256, 512], "producer_split": "x=8",
        "consumer_split": "mb=4,x=2", "mode": "shuffle"},
        "measured.md section 3 (PR #3844): the canonical shuffle with the direction reversed, "
        "producer x=8, consumer view {B:4, M:2} (mb=4,x=2), measured 8.701 us.")),
    # measured.md section 3, other slice geometries: relu(neg(x)) on 8 cores, the same 2.10 MB
    # tensor as the canonical relu_neg_shuffle, other producer/consumer splits (only the shuffle
    # stage is compared).  [8,256,512] is mb=8, x=256, out=512 laid out [mb, out, x] innermost
    # first, so a producer slice of k mb values gives runs of k x 128 B.
    ("relu_neg_shuffle_mb2x4_to_x8", ("chain", {
        "ops": ["neg", "relufwd"], "shape": [8, 256, 512], "producer_split": "mb=2,x=4",
        "consumer_split": "x=8", "mode": "shuffle"},
        SH3 + "producer {mb:2, x:4} (split 2, 512 B runs) -> consumer {x:8}.")),
    ("relu_neg_shuffle_mb8_to_x8", ("chain", {
        "ops": ["neg", "relufwd"], "shape": [8, 256, 512], "producer_split": "mb=8",
        "consumer_split": "x=8", "mode": "shuffle"},
        SH3 + "producer {mb:8} (split 8, 128 B runs) -> consumer {x:8}.")),
    ("relu_neg_shuffle_out8_to_x8", ("chain", {
        "ops": ["neg", "relufwd"], "shape": [8, 256, 512], "producer_split": "out=8",
        "consumer_split": "x=8", "mode": "shuffle"},
        SH3 + "producer {out:8} (one stick of out per core, 1 KB runs of all 8 mb) -> "
        "consumer {x:8}.")),
    ("relu_neg_shuffle_mb4out2_to_x8", ("chain", {
        "ops": ["neg", "relufwd"], "shape": [8, 256, 512], "producer_split": "mb=4,out=2",
        "consumer_split": "x=8", "mode": "shuffle"},
        SH3 + "producer {mb:4, out:2} (split 4, 256 B runs as in the canonical case, but each "
        "consumer core gathers from 8 producers, not 4) -> consumer {x:8}.")),
    ("relu_neg_shuffle_mb4x2_to_mb2x4", ("chain", {
        "ops": ["neg", "relufwd"], "shape": [8, 256, 512], "producer_split": "mb=4,x=2",
        "consumer_split": "mb=2,x=4", "mode": "shuffle"},
        SH3 + "the canonical producer {mb:4, x:2} (256 B runs) -> consumer {mb:2, x:4} "
        "(512 B runs).")),
    # measured.md section 3, equal run length, higher split: a pair on 32 cores, both 2.10 MB
    # with 256 B runs (2 mb per core) and 256 runs per core; split 4 vs split 32 (the split the
    # PR #3844 fitted law puts nearest 3.6x: 3.9x; split 16 gives 2.6x, and on 8 cores the
    # split cannot exceed 8, 1.7x).
    ("relu_neg_shuffle_c32_split4", ("chain", {
        "ops": ["neg", "relufwd"], "shape": [8, 256, 512], "producer_split": "mb=4,x=8",
        "consumer_split": "x=32", "mode": "shuffle"},
        SH3X + "the denominator, split 4: [8,256,512] producer {mb:4, x:8} -> consumer {x:32}, "
        "32 cores, 256 B runs. PR #3844 fitted law: 2.193 us.")),
    ("relu_neg_shuffle_c32_split32", ("chain", {
        "ops": ["neg", "relufwd"], "shape": [64, 64, 256], "producer_split": "mb=32",
        "consumer_split": "x=32", "mode": "shuffle"},
        SH3X + "the numerator, split 32: [64,64,256] (2.10 MB) producer {mb:32} -> consumer "
        "{x:32}, 32 cores, 256 B runs. PR #3844 fitted law: 8.545 us (3.9x the split-4 pair).")),
    ("mm_2048x512x2048_c1", ("matmul", {
        "batch": 0, "m": 2048, "k": 512, "n": 2048, "split": "1"},
        "measured.md section 6d (mm_family log), row 2048x512x2048, 1 core (1x1): 2066.6 us.")),
    ("mm_2048x512x2048_c32", ("matmul", {
        "batch": 0, "m": 2048, "k": 512, "n": 2048, "split": "mb=4,out=8"},
        "measured.md section 6d (mm_family log), row 2048x512x2048, 32 cores (4x8): 157.5 us.")),
    ("neg_2048x1024_c32", ("unary", {
        "op": "neg", "shape": [2048, 1024], "split": "mb=32"},
        "measured.md section 6a (hbm_ops log), row `neg`, column [2048,1024]: 77.97 us.")),
    ("add_2048x1024_c32", ("binary", {
        "op": "add", "shape": [2048, 1024], "split": "mb=32"},
        "measured.md section 6a (hbm_ops log), row `add`, column [2048,1024]: 106.80 us.")),
    ("mean_1024x2048_c32", ("reduce", {
        "op": "mean", "shape": [1024, 2048], "dim": 1, "split": "mb=32"},
        "No measured.md row; the structure of the real spyrecli mean_keepdim kernel "
        "(a.mean(-1, keepdim=True), 32 cores) at a larger shape, scaling_factor 1/2048.")),
])


def parse_value(v):
    try:
        return json.loads(v)
    except ValueError:
        return v


def resolve_params(name, overrides):
    if name in PRESETS:
        kind, pre, mirror = PRESETS[name]
    elif name in KINDS:
        kind, pre, mirror = name, {}, "custom workload (no measured.md row)"
    else:
        raise GenError(f"unknown preset or kind {name!r}; see --list")
    params = dict(KINDS[kind][1])
    params.update(pre)
    optional = OPTIONAL.get(kind, {})
    for k, v in overrides.items():
        if k not in params and k not in optional:
            raise GenError(f"{kind} has no parameter {k!r} (has {', '.join(list(params) + list(optional))})")
        # a split is text ("mb=4,out=8", "1"): `-p split=1` parses as the number 1, and the
        # debug ids hash the parameters, so it is kept as the text the fixtures record
        if k.endswith("split") and isinstance(v, int):
            v = str(v)
        params[k] = v
    return kind, params, mirror


def generate(name, outdir, overrides=None, command=None):
    overrides = overrides or {}
    kind, params, mirror = resolve_params(name, overrides)
    if overrides:
        mirror += " Parameters were overridden, so the measured row may no longer apply."
    # debug_handle_ ids hash the preset name and parameters, so output is reproducible
    b = BundleBuilder(name + json.dumps(params, sort_keys=True))
    KINDS[kind][0](b, params)
    args_txt = "\n".join(
        f"| `arg_{i}` | {t.name} | {t.dims} = {[t.sizes[d] for d in t.dims]} | {t.layout} | "
        f"{t.stick} | {t.total_bytes()} |" for i, t in enumerate(b.args))
    cmd = command or f"python3 scripts/gen_bundle.py {name} {outdir}"
    nsym = -1 - b.next_sym
    readme = f"""# {os.path.basename(os.path.normpath(outdir))}

Generated by `scripts/gen_bundle.py`; do not edit by hand, regenerate instead.

Command (from the repository root):

```
{cmd}
```

Workload kind `{kind}`, preset `{name}`, parameters:

```json
{json.dumps(params, indent=2, sort_keys=True)}
```

Mirrors: {mirror}

## Kernel arguments (HBM, bound by the runtime)

| Arg | Tensor | Logical dims = sizes | layoutDimOrder_ (innermost first) | Stick | Bytes |
|---|---|---|---|---|---:|
{args_txt}

Kernel-private HBM pool (`sdscbundle.device_mem_allocate`): {b.pool_bytes} bytes.
Symbols: {nsym} (`-1` .. `-{nsym}`), one per distinct per-core start address.

## SDSCs, in program order

{chr(10).join('- ' + s for s in b.summary)}

Tensors are written `name:arg_i` (a kernel argument), `name:pool+off` (the HBM pool) or
`name:LX@off` (the same byte offset in every core's LX).
""" + (f"\n## Format choices\n\n{NOTES[kind]}\n" if kind in NOTES else "")
    b.write(outdir, readme)
    return b


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", action="store_true", help="list presets and kinds")
    ap.add_argument("--all", metavar="OUTROOT", help="generate every preset into OUTROOT/<name>")
    ap.add_argument("-p", "--param", action="append", default=[], metavar="KEY=VALUE",
                    help="override a parameter (value parsed as JSON, else a string)")
    ap.add_argument("name", nargs="?")
    ap.add_argument("outdir", nargs="?")
    a = ap.parse_args(argv)
    try:
        if a.list:
            print("presets:")
            for k, (kind, pre, mirror) in PRESETS.items():
                print(f"  {k:34s} {kind:8s} {json.dumps(pre, sort_keys=True)}")
            print("kinds (defaults; override with -p key=value):")
            for k, (_, d) in KINDS.items():
                opt = (f"  optional: {json.dumps(OPTIONAL[k], sort_keys=True)}" if k in OPTIONAL else "")
                print(f"  {k:8s} {json.dumps(d, sort_keys=True)}{opt}")
            return 0
        if a.all:
            for k in PRESETS:
                out = os.path.join(a.all, k)
                generate(k, out, command=f"python3 scripts/gen_bundle.py {k} {out}"
                         f"  # or: python3 scripts/gen_bundle.py --all {a.all}")
                print(out)
            return 0
        if not a.name or not a.outdir:
            ap.error("give NAME OUTDIR, --list or --all OUTROOT")
        overrides = {}
        for kv in a.param:
            k, _, v = kv.partition("=")
            overrides[k] = parse_value(v)
        cmd = "python3 scripts/gen_bundle.py " + " ".join(
            [a.name, a.outdir] + [f"-p '{kv}'" for kv in a.param])
        generate(a.name, a.outdir, overrides, command=cmd)
        print(a.outdir)
        return 0
    except GenError as e:
        print(f"gen_bundle: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
