// The CUDA delegate's ops (PAYLOAD.md's op table): one entry per op code. An entry gives the op's name, arity,
// attribute layout and dtypes, and names the functions that decode and check its attributes and shapes
// (op_checks.h) and plan its device step (op_steps.h). The payload parser, the graph executor and the export side
// (tools/export/etrt_cuda/payload.py, which reads this file) all take the op set from here.
//
// Columns, one entry per line (the export side parses them): code, name, inputs, outputs, attributes (one letter
// each: f a float64, i an int64; * one int64 per dimension of input 0), dtypes (one letter per input, ':', one per
// output: f float32, b bool, ? either, = input 0's dtype), optional inputs (bit k: input k may be absent), then the
// functions.
#pragma once

#include <cstdint>
#include <iterator>
#include <string_view>

#include "etrt/backends/cuda/op_checks.h"
#include "etrt/backends/cuda/op_steps.h"
#include "etrt/backends/cuda/payload_format.h"
#include "etrt/kernels/util/functors.h"

namespace etrt::cuda {

struct OpKind {
  uint16_t code;
  std::string_view name;
  uint8_t num_in, num_out;
  std::string_view attrs;
  std::string_view dtypes;
  uint8_t optional_inputs;
  AttrFn decode;  // nullptr: no attributes
  ShapeFn shape;
  PlanFn plan;
};

namespace op_table_detail {
using U = fn::UnaryKind;
using B = fn::BinaryKind;
}  // namespace op_table_detail

// clang-format off
inline constexpr OpKind kOps[] = {
    {1,  "ADD",         2, 1, "f",  "ff:f",    0, attrs::one<&NodeDesc::alpha>,  shape::broadcast,        plan::binary<op_table_detail::B::Add>},
    {2,  "SUB",         2, 1, "f",  "ff:f",    0, attrs::one<&NodeDesc::alpha>,  shape::broadcast,        plan::binary<op_table_detail::B::Sub>},
    {3,  "MUL",         2, 1, "",   "ff:f",    0, nullptr,           shape::broadcast,        plan::binary<op_table_detail::B::Mul>},
    {4,  "DIV",         2, 1, "",   "ff:f",    0, nullptr,           shape::broadcast,        plan::binary<op_table_detail::B::Div>},
    {5,  "ADD_SCALAR",  1, 1, "f",  "f:f",     0, attrs::one<&NodeDesc::scalar>, shape::same,             plan::unary<op_table_detail::U::AddScalar>},
    {6,  "MUL_SCALAR",  1, 1, "f",  "f:f",     0, attrs::one<&NodeDesc::scalar>, shape::same,             plan::unary<op_table_detail::U::MulScalar>},
    {10, "RELU",        1, 1, "",   "f:f",     0, nullptr,           shape::same,             plan::unary<op_table_detail::U::Relu>},
    {11, "GELU",        1, 1, "i",  "f:f",     0, attrs::gelu,       shape::same,             plan::gelu},
    {12, "SIGMOID",     1, 1, "",   "f:f",     0, nullptr,           shape::same,             plan::unary<op_table_detail::U::Sigmoid>},
    {13, "TANH",        1, 1, "",   "f:f",     0, nullptr,           shape::same,             plan::unary<op_table_detail::U::Tanh>},
    {14, "EXP",         1, 1, "",   "f:f",     0, nullptr,           shape::same,             plan::unary<op_table_detail::U::Exp>},
    {15, "NEG",         1, 1, "",   "f:f",     0, nullptr,           shape::same,             plan::unary<op_table_detail::U::Neg>},
    {16, "SQRT",        1, 1, "",   "f:f",     0, nullptr,           shape::same,             plan::unary<op_table_detail::U::Sqrt>},
    {17, "RSQRT",       1, 1, "",   "f:f",     0, nullptr,           shape::same,             plan::unary<op_table_detail::U::Rsqrt>},
    {20, "MM",          2, 1, "",   "ff:f",    0, nullptr,           shape::matmul<false, 0>, plan::gemm<0>},
    {21, "ADDMM",       3, 1, "ff", "fff:f",   0, attrs::addmm,      shape::matmul<false, 1>, plan::gemm<1>},
    {22, "BMM",         2, 1, "",   "ff:f",    0, nullptr,           shape::matmul<true, 0>,  plan::gemm<0>},
    {30, "SOFTMAX",     1, 1, "i",  "f:f",     0, attrs::one<&NodeDesc::dim>,    shape::softmax,          plan::softmax},
    {31, "LAYER_NORM",  3, 3, "fi", "fff:fff", 6, attrs::layer_norm, shape::layer_norm,       plan::layer_norm},
    {40, "COPY",        1, 1, "",   "?:=",     0, nullptr,           shape::same_numel,       plan::copy},
    {41, "PERMUTE",     1, 1, "*",  "f:f",     0, attrs::permute,    shape::permute,          plan::permute},
    {42, "EXPAND",      1, 1, "",   "f:f",     0, nullptr,           shape::expand,           plan::expand},
    {43, "SELECT",      1, 1, "ii", "f:f",     0, attrs::select,     shape::select,           plan::select},
    {50, "EQ_SCALAR",   1, 1, "f",  "f:b",     0, attrs::one<&NodeDesc::scalar>, shape::same,             plan::eq_scalar},
    {51, "LOGICAL_NOT", 1, 1, "",   "b:b",     0, nullptr,           shape::same,             plan::logical_not},
    {52, "ANY",         1, 1, "ii", "b:b",     0, attrs::any,        shape::any,              plan::any},
    {53, "FULL",        0, 1, "f",  ":?",      0, attrs::full,       shape::any_output,       plan::fill},
    {54, "WHERE",       3, 1, "",   "bff:f",   0, nullptr,           shape::where,            plan::where},
};
// clang-format on

/// What the parser relies on of an entry: the dtypes column matches the arity, attributes are f, i or *, every
/// attribute has a decoder, and the codes are distinct.
constexpr bool well_formed(const OpKind& k) {
  const bool attrs_ok = k.attrs == "*" || k.attrs.find_first_not_of("fi") == std::string_view::npos;
  return k.num_in <= kMaxNodeInputs && k.num_out >= 1 && k.num_out <= kMaxNodeOutputs &&
         k.dtypes.size() == k.num_in + 1u + k.num_out && k.dtypes[k.num_in] == ':' && attrs_ok &&
         k.attrs.empty() == (k.decode == nullptr) && k.shape != nullptr && k.plan != nullptr;
}
constexpr bool well_formed_table() {
  for (size_t i = 0; i < std::size(kOps); ++i) {
    if (!well_formed(kOps[i]) || kOps[i].code == 0) return false;
    for (size_t j = 0; j < i; ++j)
      if (kOps[j].code == kOps[i].code || kOps[j].name == kOps[i].name) return false;
  }
  return true;
}
static_assert(well_formed_table(), "an entry of kOps is malformed (see well_formed)");

/// The entry for op `code`, or nullptr for a code this version does not define.
constexpr const OpKind* find_op(uint16_t code) {
  for (const OpKind& k : kOps)
    if (k.code == code) return &k;
  return nullptr;
}

/// The name of op `code`, or "" for a code this version does not define.
constexpr std::string_view op_name(uint16_t code) {
  const OpKind* k = find_op(code);
  return k ? k->name : std::string_view();
}

/// The code of the op named `name` (0 when none is): for tests and tools.
constexpr uint16_t op_code(std::string_view name) {
  for (const OpKind& k : kOps)
    if (k.name == name) return k.code;
  return 0;
}

}  // namespace etrt::cuda
