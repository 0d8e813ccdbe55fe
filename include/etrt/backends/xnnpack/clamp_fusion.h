// The rewrite XNNPACK makes to every graph before it runs it, which decides what a quantized graph computes.
//
// Note [xnnpack clamp fusion]: when a Clamp node is the only reader of an intermediate that an Add, AvgPooling2d,
// Clamp, Conv2d, ConvTranspose2d, DepthwiseConv2d, Div, FullyConnected, MaxPooling2d, Multiply or Subtract node
// writes, XNNPACK's subgraph optimizer folds the Clamp into that node: the node writes the Clamp's output value
// directly, clamped to the intersection of both ranges, and the intermediate is never formed. For floats that is
// the same result; for quantized values it is not: the intermediate's own grid is skipped, so the node's result is
// rounded once, onto the Clamp's output grid, not onto its own grid first (PT2E's ReLU6 after a convolution has a
// coarser grid before the clamp than after it: rounding twice moved a quarter of mobilenet's values by a step). The
// executor makes the same rewrite at load, so its results are upstream's; the Clamp then runs nowhere.
#pragma once

#include <algorithm>
#include <span>
#include <string_view>
#include <vector>

#include "etrt/backends/xnnpack/graph.h"

namespace etrt::xnnpack {

/// The node kinds XNNPACK folds a reading Clamp into (Note [xnnpack clamp fusion]).
inline bool absorbs_clamp(std::string_view kind) {
  static constexpr std::string_view kKinds[] = {"XNNAdd",         "XNNAvgPooling2d",    "XNNClamp",
                                                "XNNConv2d",      "XNNConvTranspose2d", "XNNDepthwiseConv2d",
                                                "XNNDiv",         "XNNFullyConnected",  "XNNMaxPooling2d",
                                                "XNNMultiply",    "XNNSubtract"};
  return std::ranges::find(kKinds, kind) != std::end(kKinds);
}

/// Rewrites g as Note [xnnpack clamp fusion] says; returns, by node position, the Clamp nodes folded away (left in
/// place with no input and no output, so positions and messages stay the payload's).
inline std::vector<bool> fold_clamps(Graph& g) {
  std::vector<bool> folded(g.nodes.size(), false);
  std::vector<uint32_t> readers(g.values.size(), 0);
  std::vector<size_t> writer(g.values.size(), SIZE_MAX);
  for (const Node& n : g.nodes) {
    for (uint32_t id : n.inputs)
      if (id < g.values.size()) ++readers[id];
    if (n.output < g.values.size()) writer[n.output] = n.index;
  }
  for (Node& c : g.nodes) {
    if (c.kind_name != "XNNClamp" || c.inputs.size() != 1 || c.output >= g.values.size()) continue;
    const uint32_t v = c.inputs[0];
    if (v >= g.values.size() || readers[v] != 1 || writer[v] == SIZE_MAX || writer[v] >= c.index) continue;
    const Value& val = g.values[v];
    if (!val.constant.empty() || (val.flags & (kValueExternalInput | kValueExternalOutput)) ||
        g.values[c.output].dims != val.dims)
      continue;
    Node& w = g.nodes[writer[v]];
    if (!absorbs_clamp(w.kind_name) || w.index_output != kNoValue || w.output != v) continue;
    w.output = c.output;
    writer[c.output] = w.index;
    w.out_min = std::max(w.out_min, c.out_min);  // an absent range is (-inf, inf)
    w.out_max = std::min(w.out_max, c.out_max);
    w.has_min_max = w.has_min_max || c.has_min_max;
    readers[v] = 0;
    c.inputs.clear();
    c.output = kNoValue;
    folded[c.index] = true;
  }
  return folded;
}

}  // namespace etrt::xnnpack
