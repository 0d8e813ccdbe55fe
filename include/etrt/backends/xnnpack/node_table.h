// The XNNPACK node kinds: one entry per XNode union member, in the schema's order (an entry's position is the union's
// type code, so a new kind goes where schema.fbs appends it). Each entry names the functions that read the kind's
// fields (node_fields.h), check what its run function relies on (graph_checks.h), size its scratch, derive its
// output shape each call (shape_inference.h), run it (node_run.h), for the kinds with packed filters prepare them at
// load (packed_filters.h), and for the elementwise kinds compute their function on any float tensor (the activation
// chains' tables, executor.h). The payload parser, the load-time checks and the executor read only this table.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "etrt/backends/xnnpack/byte_values.h"
#include "etrt/backends/xnnpack/graph_checks.h"
#include "etrt/backends/xnnpack/node_fields.h"
#include "etrt/backends/xnnpack/node_run.h"
#include "etrt/backends/xnnpack/packed_filters.h"
#include "etrt/backends/xnnpack/shape_inference.h"

namespace etrt::xnnpack {

struct NodeKind {
  std::string_view name;  // the union member's name in schema.fbs
  FieldsFn fields = nullptr;
  ShapeFn shape = nullptr;
  CheckFn check = nullptr;      // nullptr: only checks::common
  ScratchFn scratch = nullptr;  // nullptr: no scratch
  RunFn run = nullptr;
  bool reads_weights_in_blocks = false;  // a quantized 2-D filter (input 1) may stay quantized (executor.h)
  PrepareFn prepare = nullptr;           // load-time preparation (packed_filters.h); nullptr: none
  ByteForm bytes = ByteForm::None;       // Note [byte activations] (byte_values.h)
  run::ElementwiseFn elementwise = nullptr;  // an elementwise kind's function (Note [xnnpack activation chain])
};

// clang-format off
inline constexpr NodeKind kNodeKinds[] = {
    {"NONE"},
    {"XNNAdd",                       fields::node2x1,         shape::broadcast,       nullptr,                 nullptr,                run::binary<run::add, fast::Add>, false, nullptr, ByteForm::Binary},
    {"XNNFullyConnected",            fields::fully_connected, shape::fully_connected, nullptr,                 nullptr,                run::fully_connected, true, prepare::fully_connected, ByteForm::Gemm},
    {"XNNSoftmax",                   fields::node1x1,         shape::same,            nullptr,                 nullptr,                run::unary<run::softmax_last_dim>},
    {"XNNSigmoid",                   fields::node1x1,         shape::same,            checks::same_size,       nullptr,                run::sigmoid, false, nullptr, ByteForm::None, run::sigmoid_elements},
    {"XNNStaticTranspose",           fields::transpose,       shape::transpose,       checks::transpose,       nullptr,                run::transpose, false, nullptr, ByteForm::Joint},
    {"XNNClamp",                     fields::node1x1,         shape::same,            checks::same_size,       nullptr,                run::copy},
    {"XNNConv2d",                    fields::conv,            shape::spatial,         checks::conv,            packed::conv_scratch,   run::convolution<run::ConvFilter::Ohwi>,      false, prepare::conv,           ByteForm::Gemm},
    {"XNNDiv",                       fields::node2x1,         shape::broadcast,       nullptr,                 nullptr,                run::binary<kernels::div_out<detail::F>, fast::Div>},
    {"XNNStaticResizeBilinear2D",    fields::resize,          shape::spatial,         checks::nhwc,            nullptr,                run::resize_bilinear},
    {"XNNStaticConstantPad",         fields::constant_pad,    shape::constant_pad,    checks::constant_pad,    nullptr,                run::constant_pad},
    {"XNNAvgPooling2d",              fields::pooling,         shape::spatial,         checks::avg_pooling,     nullptr,                run::avg_pooling},
    {"XNNMinimum",                   fields::node2x1,         shape::broadcast,       nullptr,                 nullptr,                run::binary<kernels::minimum_out<detail::F>, fast::Min>},
    {"XNNDepthwiseConv2d",           fields::conv,            shape::spatial,         checks::conv,            scratch::padded_input,  run::convolution<run::ConvFilter::Depthwise>, false, prepare::depthwise_conv, ByteForm::Joint},
    {"XNNMaxPooling2d",              fields::pooling,         shape::spatial,         checks::nhwc,            scratch::max_pooling,   run::max_pooling, false, nullptr, ByteForm::Joint},
    {"XNNMultiply",                  fields::node2x1,         shape::broadcast,       nullptr,                 nullptr,                run::binary<kernels::mul_out<detail::F>, fast::Mul>, false, nullptr, ByteForm::Binary},
    {"XNNSubtract",                  fields::node2x1,         shape::broadcast,       nullptr,                 nullptr,                run::binary<run::subtract, fast::Sub>, false, nullptr, ByteForm::Binary},
    {"XNNFloor",                     fields::node1x1,         shape::same,            nullptr,                 nullptr,                run::unary<kernels::floor_out<detail::F>>, false, nullptr, ByteForm::None, run::unary_elements<kernels::floor_out<detail::F>>},
    {"XNNConvert",                   fields::node1x1,         shape::same,            checks::same_size,       nullptr,                run::copy, false, nullptr, ByteForm::Writes},
    {"XNNGlobalAvgPooling2d",        fields::node1x1,         shape::global_pooling,  checks::nhwc,            nullptr,                run::global_avg_pooling, false, nullptr, ByteForm::Reads},
    {"XNNStaticReshape",             fields::reshape,         shape::reshape,         checks::same_size,       nullptr,                run::copy},
    {"XNNArgMaxPooling2d",           fields::argmax_pooling,  shape::spatial,         checks::argmax_pooling,  nullptr,                run::argmax_pooling},
    {"XNNSquareRoot",                fields::node1x1,         shape::same,            nullptr,                 nullptr,                run::unary<kernels::sqrt_out<detail::F>>, false, nullptr, ByteForm::None, run::unary_elements<kernels::sqrt_out<detail::F>>},
    {"XNNCeiling",                   fields::node1x1,         shape::same,            nullptr,                 nullptr,                run::unary<kernels::ceil_out<detail::F>>, false, nullptr, ByteForm::None, run::unary_elements<kernels::ceil_out<detail::F>>},
    {"XNNHardswish",                 fields::node1x1,         shape::same,            nullptr,                 nullptr,                run::unary<kernels::hardswish_out<detail::F>>, false, nullptr, ByteForm::None, run::unary_elements<kernels::hardswish_out<detail::F>>},
    {"XNNLeakyReLU",                 fields::scalar_then_1x1, shape::same,            nullptr,                 nullptr,                run::leaky_relu, false, nullptr, ByteForm::None, run::leaky_relu_elements},
    {"XNNMaximum",                   fields::node2x1,         shape::broadcast,       nullptr,                 nullptr,                run::binary<kernels::maximum_out<detail::F>, fast::Max>},
    {"XNNNegate",                    fields::node1x1,         shape::same,            nullptr,                 nullptr,                run::unary<kernels::neg_out<detail::F>>, false, nullptr, ByteForm::None, run::unary_elements<kernels::neg_out<detail::F>>},
    {"XNNSquare",                    fields::node1x1,         shape::same,            nullptr,                 nullptr,                run::unary<run::square>, false, nullptr, ByteForm::None, run::unary_elements<run::square>},
    {"XNNELU",                       fields::scalar_then_1x1, shape::same,            nullptr,                 nullptr,                run::elu, false, nullptr, ByteForm::None, run::elu_elements},
    {"XNNAbs",                       fields::node1x1,         shape::same,            nullptr,                 nullptr,                run::unary<kernels::abs_out<detail::F>>, false, nullptr, ByteForm::None, run::unary_elements<kernels::abs_out<detail::F>>},
    {"XNNPReLU",                     fields::node2x1,         shape::same,            nullptr,                 scratch::input_size,    run::prelu},
    {"XNNConcatenate2",              fields::concatenate<2>,  shape::concatenate,     checks::concatenate,     nullptr,                run::concatenate},
    {"XNNConcatenate3",              fields::concatenate<3>,  shape::concatenate,     checks::concatenate,     nullptr,                run::concatenate},
    {"XNNConcatenate4",              fields::concatenate<4>,  shape::concatenate,     checks::concatenate,     nullptr,                run::concatenate},
    {"XNNStaticSlice",               fields::slice,           shape::slice,           checks::slice,           scratch::two_inputs,    run::slice},
    {"XNNScaledDotProductAttention", fields::sdpa,            shape::last_dim_from<2>, checks::sdpa,            scratch::key_size,      run::sdpa},
    {"XNNBatchMatrixMultiply",       fields::node2x1,         shape::last_dim_from<1>, checks::batch_matmul,    nullptr,                run::batch_matmul},
    {"XNNConcatenate5",              fields::concatenate<5>,  shape::concatenate,     checks::concatenate,     nullptr,                run::concatenate},
    {"XNNConvTranspose2d",           fields::conv,            shape::spatial,         checks::transposed_conv, nullptr,                run::convolution<run::ConvFilter::Transposed>},
    {"XNNReciprocalSquareRoot",      fields::node1x1,         shape::same,            nullptr,                 nullptr,                run::unary<kernels::rsqrt_out<detail::F>>, false, nullptr, ByteForm::None, run::unary_elements<kernels::rsqrt_out<detail::F>>},
    {"XNNLog",                       fields::node1x1,         shape::same,            nullptr,                 nullptr,                run::unary<kernels::log_out<detail::F>>, false, nullptr, ByteForm::None, run::unary_elements<kernels::log_out<detail::F>>},
    {"XNNGelu",                      fields::node1x1,         shape::same,            nullptr,                 nullptr,                run::unary<run::gelu_exact>, false, nullptr, ByteForm::None, run::unary_elements<run::gelu_exact>},
    {"XNNTanh",                      fields::node1x1,         shape::same,            nullptr,                 nullptr,                run::unary<kernels::tanh_out<detail::F>>, false, nullptr, ByteForm::None, run::unary_elements<kernels::tanh_out<detail::F>>},
    {"XNNExp",                       fields::node1x1,         shape::same,            nullptr,                 nullptr,                run::unary<kernels::exp_out<detail::F>>, false, nullptr, ByteForm::None, run::unary_elements<kernels::exp_out<detail::F>>},
    {"XNNSin",                       fields::node1x1,         shape::same,            nullptr,                 nullptr,                run::unary<kernels::sin_out<detail::F>>, false, nullptr, ByteForm::None, run::unary_elements<kernels::sin_out<detail::F>>},
    {"XNNCopy",                      fields::node1x1,         shape::same,            checks::same_size,       nullptr,                run::copy},
    {"XNNCos",                       fields::node1x1,         shape::same,            nullptr,                 nullptr,                run::unary<kernels::cos_out<detail::F>>, false, nullptr, ByteForm::None, run::unary_elements<kernels::cos_out<detail::F>>},
};
// clang-format on

/// The entry for union type code `code`, or nullptr for NONE and codes past the table.
inline const NodeKind* node_kind(uint8_t code) {
  return code > 0 && code < std::size(kNodeKinds) ? &kNodeKinds[code] : nullptr;
}

/// The union type code of the kind named `name` (0 when none is): for tests and tools.
constexpr uint8_t node_kind_code(std::string_view name) {
  for (size_t i = 1; i < std::size(kNodeKinds); ++i)
    if (kNodeKinds[i].name == name) return static_cast<uint8_t>(i);
  return 0;
}

}  // namespace etrt::xnnpack
