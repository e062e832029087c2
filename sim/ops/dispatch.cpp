// opFuncName -> operation (formats.md C.2).
#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "sim/ops/detail.h"
#include "sim/ops/ops.h"

namespace vspyre::ops {

using namespace detail;

namespace {

using In = std::span<const TensorView>;
using Handler = std::function<void(In, const TensorView&, const Attrs&)>;

void need(In in, size_t lo, size_t hi, std::string_view name) {
  if (in.size() < lo || in.size() > hi)
    fail(std::string(name) + ": expected " + std::to_string(lo) +
         (hi != lo ? "-" + std::to_string(hi) : std::string()) + " inputs, got " +
         std::to_string(in.size()));
}

struct Table {
  std::unordered_map<std::string_view, Handler> handlers;
  // The ops whose output element depends only on the inputs' elements at the same coordinate,
  // when every input has the output's shape (is_elementwise).
  std::unordered_set<std::string_view> elementwise;
};

const Table& tables() {
  // Never destroyed (see sim/exec/layout.cpp, reductions()): kernels may still run on a shim
  // stream worker while the process exits.
  static const auto& t = *new const Table([] {
    Table tab;
    auto& m = tab.handlers;
    auto& ew = tab.elementwise;
    auto bin = [&](std::string_view n, Binary op) {
      ew.insert(n);
      m[n] = [op, n](In in, const TensorView& o, const Attrs& a) {
        need(in, 2, 2, n);
        binary(op, in[0], in[1], o, a);
      };
    };
    bin("add", Binary::add);
    bin("sub", Binary::sub);
    bin("revsub", Binary::revsub);
    bin("mul", Binary::mul);
    bin("realdiv", Binary::div);
    bin("div", Binary::div);
    bin("maximum", Binary::maximum);
    bin("minimum", Binary::minimum);
    bin("pow", Binary::pow);
    bin("equal", Binary::equal);
    bin("notequal", Binary::notequal);
    bin("greaterequal", Binary::greaterequal);
    bin("lesserequal", Binary::lesserequal);
    bin("greaterthan", Binary::greaterthan);
    bin("lesserthan", Binary::lesserthan);
    bin("biasadd", Binary::biasadd);
    ew.insert("where3");
    ew.insert("fnms");
    m["where3"] = [](In in, const TensorView& o, const Attrs&) {
      need(in, 3, 3, "where3");
      where3(in[0], in[1], in[2], o);
    };
    m["fnms"] = [](In in, const TensorView& o, const Attrs&) {
      need(in, 3, 3, "fnms");
      fnms(in[0], in[1], in[2], o);
    };
    // x, the statistics (lanes on attrs.dim, or the mean), rstd, [weight], [bias].
    m["layernormnorm"] = [](In in, const TensorView& o, const Attrs& a) {
      need(in, 3, 5, "layernormnorm");
      layernormnorm(in[0], in[1], in[2], in.size() > 3 ? &in[3] : nullptr, in.size() > 4 ? &in[4] : nullptr, o, a.dim, a);
    };
    // EXX2 statistics with their lanes on attrs.dim; one value per row without it (1/sqrt(v + eps)).
    m["layernormscale"] = [](In in, const TensorView& o, const Attrs& a) {
      need(in, 1, 1, "layernormscale");
      if (a.dim) return layernorm_scale(in[0], o, *a.dim, a);
      unary(Unary::layernormscale, in[0], o, a);
    };

    auto un = [&](std::string_view n, Unary op, bool tanh_gelu = false) {
      ew.insert(n);
      m[n] = [op, n, tanh_gelu](In in, const TensorView& o, const Attrs& a) {
        need(in, 1, 1, n);
        if (tanh_gelu) {
          Attrs b = a;
          b.gelu_tanh = true;
          return unary(op, in[0], o, b);
        }
        unary(op, in[0], o, a);
      };
    };
    un("abs", Unary::abs);
    un("exp", Unary::exp);
    un("fastexp", Unary::exp);
    un("fastsigmoid", Unary::sigmoid);
    un("gelufwd", Unary::gelu);
    un("gelu", Unary::gelu);
    un("gelutanh", Unary::gelu, true);
    un("identity", Unary::identity);
    un("leakyrelufwd", Unary::leakyrelu);
    un("log", Unary::log);
    un("mish", Unary::mish);
    un("neg", Unary::neg);
    un("reciprocal", Unary::reciprocal);
    un("relufwd", Unary::relu);
    un("relu", Unary::relu);
    un("relu6fwd", Unary::relu6);
    un("rsqrt", Unary::rsqrt);
    un("sigmoid", Unary::sigmoid);
    un("silu", Unary::silu);
    un("sqrt", Unary::sqrt);
    un("tanh", Unary::tanh);
    un("clip", Unary::clip);
    un("softplus", Unary::softplus);
    un("floor", Unary::floor);
    // Value-preserving moves: in logical (host-order) terms a copy; the stick relayout itself
    // is the caller's (fmt::StickLayout) business.
    un("ReStickifyOpHBM", Unary::identity);
    un("shuffle", Unary::identity);

    auto red = [&](std::string_view n, Reduce op) {
      m[n] = [op, n](In in, const TensorView& o, const Attrs& a) {
        need(in, 1, 2, n);  // the output may be listed as an input too
        reduce(op, in[0], o, infer_reduce_dim(in[0], o, a.dim), a);
      };
    };
    red("sum", Reduce::sum);
    red("max", Reduce::max);
    red("min", Reduce::min);
    red("mean", Reduce::mean);
    red("absmax", Reduce::absmax);
    red("exx2", Reduce::exx2);
    red("exx2_zeromean", Reduce::exx2_zeromean);
    red("sumnonstick", Reduce::sum);
    red("maxnonstick", Reduce::max);
    red("minnonstick", Reduce::min);
    red("meannonstick", Reduce::mean);
    red("absmaxnonstick", Reduce::absmax);
    red("prodnonstick", Reduce::prod);
    for (bool fp8 : {false, true}) {
      std::string_view n = fp8 ? "quantscalepertokenfp8" : "quantscalepertoken";
      m[n] = [fp8, n](In in, const TensorView& o, const Attrs& a) {
        need(in, 1, 2, n);
        quant_scale_per_token(in[0], o, infer_reduce_dim(in[0], o, a.dim), fp8, a);
      };
    }

    // The scaled quantisations and casts take one scale for the whole tensor: elementwise.
    for (std::string_view n : {"csqint4wt", "csqint4", "csqint8ch", "csqint8mb", "csqint8wt"}) {
      ew.insert(n);
      m[n] = [n](In in, const TensorView& o, const Attrs& a) {
        need(in, 1, 1, n);
        quantize_scaled(in[0], o, a.get("scaleact", 1.0), a.get("shiftact", 0.0), a);
      };
    }
    for (std::string_view n : {"qfp8ch", "qfp8mb", "qfp8wt"}) {
      ew.insert(n);
      m[n] = [n](In in, const TensorView& o, const Attrs& a) {
        need(in, 1, 1, n);
        quantize_scaled(in[0], o, a.get("scaleact", 1.0), 0.0, a);
      };
    }
    ew.insert("quantize");
    m["quantize"] = [](In in, const TensorView& o, const Attrs& a) {
      need(in, 1, 1, "quantize");
      quantize(in[0], o, a.get("scale", 1.0), a.get("zero_point", 0.0), a);
    };
    ew.insert("dequantize");
    m["dequantize"] = [](In in, const TensorView& o, const Attrs& a) {
      need(in, 1, 1, "dequantize");
      dequantize(in[0], o, a.get("scale", 1.0), a.get("zero_point", 0.0), a);
    };
    for (std::string_view n : {"fp32todl16", "dl16tofp32", "fp8todl16", "cast"}) {
      ew.insert(n);
      m[n] = [n](In in, const TensorView& o, const Attrs& a) {
        need(in, 1, 1, n);
        cast(in[0], o, a);
      };
    }

    for (std::string_view n :
         {"batchmatmul", "batchmatmulfp8", "batchmatmulint8", "batchmatmulint4", "matmul"})
      m[n] = [n](In in, const TensorView& o, const Attrs&) {
        need(in, 2, 2, n);
        matmul(in[0], in[1], o);
      };
    for (std::string_view n : {"conv2d", "conv2dfp8", "conv2dint8", "conv2dint4"})
      m[n] = [n](In in, const TensorView& o, const Attrs& a) {
        need(in, 2, 2, n);
        conv2d(in[0], in[1], o, a);
      };
    m["depthwiseconv2dnative"] = [](In in, const TensorView& o, const Attrs& a) {
      need(in, 2, 2, "depthwiseconv2dnative");
      if (in[0].rank() != 4) fail("depthwiseconv2dnative: input must be NCHW");
      Attrs b = a;
      b.groups = in[0].size[1];
      conv2d(in[0], in[1], o, b);
    };

    m["avgpoolfwd"] = [](In in, const TensorView& o, const Attrs& a) {
      need(in, 1, 1, "avgpoolfwd");
      pool2d(Pool::avg, in[0], o, a);
    };
    m["avgpoolnmapfwd"] = [](In in, const TensorView& o, const Attrs& a) {
      need(in, 1, 1, "avgpoolnmapfwd");
      pool2d(Pool::avg_nmap, in[0], o, a);
    };
    m["maxpoolfwd"] = [](In in, const TensorView& o, const Attrs& a) {
      need(in, 1, 1, "maxpoolfwd");
      pool2d(Pool::max, in[0], o, a);
    };
    for (bool idx : {false, true}) {
      std::string_view n = idx ? "topkindex" : "topkvalue";
      m[n] = [idx, n](In in, const TensorView& o, const Attrs& a) {
        need(in, 1, 1, n);
        int d;
        if (a.dim) {
          d = norm_dim(*a.dim, in[0].rank());
        } else {
          d = -1;
          for (int i = 0; i < std::min(in[0].rank(), o.rank()); ++i)
            if (in[0].size[size_t(i)] != o.size[size_t(i)]) d = i;
          if (d < 0) d = in[0].rank() - 1;
        }
        topk(in[0], o, d, idx);
      };
    }
    // Indirect access: inputs (src, index) / (self, index, src); attrs.dim defaults to 0.
    m["gather"] = [](In in, const TensorView& o, const Attrs& a) {
      need(in, 2, 2, "gather");
      gather(in[0], in[1], o, a.dim.value_or(0));
    };
    m["scatter"] = [](In in, const TensorView& o, const Attrs& a) {
      need(in, 3, 3, "scatter");
      scatter(in[0], in[1], in[2], o, a.dim.value_or(0), false);
    };
    m["scatter_add"] = [](In in, const TensorView& o, const Attrs& a) {
      need(in, 3, 3, "scatter_add");
      scatter(in[0], in[1], in[2], o, a.dim.value_or(0), true);
    };
    return tab;
  }());
  return t;
}

const std::unordered_map<std::string_view, Handler>& table() { return tables().handlers; }

}  // namespace

bool is_supported(std::string_view op_func_name) { return table().count(op_func_name) != 0; }

bool is_elementwise(std::string_view op_func_name) {
  return tables().elementwise.count(op_func_name) != 0;
}

std::vector<std::string_view> supported_ops() {
  std::vector<std::string_view> v;
  for (const auto& [k, _] : table()) v.push_back(k);
  std::sort(v.begin(), v.end());
  return v;
}

void run(std::string_view op_func_name, std::span<const TensorView> inputs,
         std::span<const TensorView> outputs, const Attrs& attrs) {
  auto it = table().find(op_func_name);
  if (it == table().end()) fail("unsupported opFuncName '" + std::string(op_func_name) + "'");
  if (outputs.size() != 1)
    fail(std::string(op_func_name) + ": expected 1 output, got " + std::to_string(outputs.size()));
  it->second(inputs, outputs[0], attrs);
}

}  // namespace vspyre::ops
