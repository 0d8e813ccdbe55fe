// Where the XNNPACK executor keeps a graph's intermediate values: one arena, placed by liveness.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "etrt/backends/xnnpack/graph.h"

namespace etrt::xnnpack {

struct IntermediatePlan {
  std::vector<int64_t> offset;  // floats into the arena, -1 for constants, externals and unused values
  uint64_t arena_floats = 0;
};

/// Liveness-planned placement of the intermediates in one arena: a value lives from the node that writes it to
/// the last node that reads it, and values whose lives overlap never share bytes (so a node's output never
/// aliases its inputs). `written_early` lists (value, node) pairs whose value an earlier node writes too (Note
/// [xnnpack block finish]): its life starts there. `in_place` lists (value, source) pairs whose value is computed
/// element by element over its source, which nothing reads after (Note [xnnpack silu]), or is the source's bytes
/// unchanged (Note [xnnpack reshape alias]): the value takes the source's bytes, and the source's life runs on to
/// the value's last reader. A source lends its bytes once, and a value that took another's lends none, so no
/// in-place writer overwrites bytes that another value still stands for. `read_late` lists (value, node) pairs whose
/// value a later node reads in place of another (Note [xnnpack gated filter]): its life runs on to that node.
/// `borrowed` values take a graph input's bytes (Note [xnnpack borrowed input]): no place in the arena. Also rejects
/// a graph that reads an intermediate no earlier node wrote.
inline Result<IntermediatePlan> plan_intermediates(const Graph& g,
                                                   std::span<const std::pair<uint32_t, size_t>> written_early = {},
                                                   std::span<const std::pair<uint32_t, uint32_t>> in_place = {},
                                                   std::span<const std::pair<uint32_t, size_t>> read_late = {},
                                                   std::span<const uint32_t> borrowed = {}) {
  const size_t nv = g.values.size();
  std::vector<bool> is_borrowed(nv, false);
  for (uint32_t id : borrowed)
    if (id < nv) is_borrowed[id] = true;
  const auto internal = [&](uint32_t id) {
    const Value& v = g.values[id];
    return v.constant.empty() && !(v.flags & (kValueExternalInput | kValueExternalOutput)) && !is_borrowed[id];
  };
  std::vector<int64_t> def(nv, -1), last(nv, -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    for (uint32_t id : n.inputs) {
      if (id == kNoValue || !internal(id)) continue;
      if (def[id] < 0)
        return fail(Error::InvalidProgram, n.where(), ": reads value ", id, ", which no earlier node writes");
      last[id] = static_cast<int64_t>(i);
    }
    for (const uint32_t out : {n.output, n.index_output}) {
      if (out == kNoValue || !internal(out)) continue;
      if (def[out] >= 0) return fail(Error::InvalidProgram, n.where(), ": value ", out, " is written by two nodes");
      def[out] = last[out] = static_cast<int64_t>(i);
    }
  }
  for (const auto& [id, node] : written_early)
    if (def[id] >= 0) def[id] = std::min(def[id], static_cast<int64_t>(node));
  for (const auto& [id, node] : read_late)
    if (def[id] >= 0) last[id] = std::max(last[id], static_cast<int64_t>(node));
  std::vector<uint32_t> source(nv, UINT32_MAX);  // in_place: the value whose bytes this one takes
  std::vector<bool> lent(nv, false);             // a source's bytes go to one value at most
  for (const auto& [id, src] : in_place) {
    if (def[id] < 0 || def[src] < 0 || source[src] != UINT32_MAX || source[id] != UINT32_MAX || lent[src] ||
        lent[id] || g.values[id].numel > g.values[src].numel)
      continue;
    source[id] = src;
    lent[src] = true;
    last[src] = std::max(last[src], last[id]);
  }
  std::vector<uint32_t> order;
  for (uint32_t id = 0; id < nv; ++id)
    if (def[id] >= 0 && source[id] == UINT32_MAX) order.push_back(id);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return g.values[a].numel > g.values[b].numel; });
  constexpr int64_t kAlignFloats = 16;  // 64-byte blocks
  IntermediatePlan p;
  p.offset.assign(nv, -1);
  std::vector<uint32_t> placed;
  for (uint32_t id : order) {
    const int64_t size = (std::max<int64_t>(g.values[id].numel, 1) + kAlignFloats - 1) / kAlignFloats * kAlignFloats;
    // First fit below the blocks of every placed value whose life overlaps this one's.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (uint32_t o : placed)
      if (def[o] <= last[id] && def[id] <= last[o])
        busy.emplace_back(p.offset[o], p.offset[o] + (std::max<int64_t>(g.values[o].numel, 1) + kAlignFloats - 1) /
                                                        kAlignFloats * kAlignFloats);
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (const auto& [lo, hi] : busy) {
      if (at + size <= lo) break;
      at = std::max(at, hi);
    }
    p.offset[id] = at;
    p.arena_floats = std::max<uint64_t>(p.arena_floats, static_cast<uint64_t>(at + size));
    placed.push_back(id);
  }
  for (uint32_t id = 0; id < nv; ++id)
    if (source[id] != UINT32_MAX) p.offset[id] = p.offset[source[id]];
  return p;
}

}  // namespace etrt::xnnpack
