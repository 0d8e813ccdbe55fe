// A developer's per-node timer for the XNNPACK delegate, compiled in only with -DETRT_NODE_PROFILE (bench/node_profile.py
// builds such a module): each executed node's wall time is summed by (graph, node) and written, when the process
// exits, to the file ETRT_PROF_OUT names, one line a node: graph, node index, kind and shapes, total nanoseconds,
// calls. A node that runs the nodes after it (a block finish, a band pair, an activation chain) counts their time.
// Never built into the product: the table lives for the process and its destructor writes a file.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <utility>

#include "etrt/backends/xnnpack/graph.h"
#include "etrt/backends/xnnpack/shape_inference.h"

namespace etrt::xnnpack::profile {

/// "Kind out=AxBx in=CxDx w=ExFx": the node's kind, its output's and first two inputs' planned shapes.
inline std::string describe(const Node& n, std::span<const ValueShape> shapes) {
  std::string s(n.kind_name);
  const auto dims = [&](const char* name, uint32_t id) {
    if (id == kNoValue || id >= shapes.size()) return;
    s += std::string(" ") + name + "=";
    for (uint32_t d = 0; d < shapes[id].rank; ++d) s += std::to_string(shapes[id].sizes()[d]) + "x";
  };
  dims("out", n.output);
  if (!n.inputs.empty()) dims("in", n.inputs[0]);
  if (n.inputs.size() > 1) dims("w", n.inputs[1]);
  return s;
}

struct Total {
  double ns = 0;
  long calls = 0;
  std::string what;
};

class Table {
 public:
  ~Table() {
    const char* path = std::getenv("ETRT_PROF_OUT");
    if (!path) return;
    if (FILE* f = std::fopen(path, "w")) {
      for (const auto& [key, t] : totals_)
        std::fprintf(f, "%p\t%zu\t%s\t%.1f\t%ld\n", key.first, key.second, t.what.c_str(), t.ns, t.calls);
      std::fclose(f);
    }
  }
  void add(const void* graph, size_t index, double ns, const Node& n, std::span<const ValueShape> shapes) {
    std::lock_guard<std::mutex> lock(mu_);
    Total& t = totals_[{graph, index}];
    t.ns += ns;
    ++t.calls;
    if (t.what.empty()) t.what = describe(n, shapes);
  }

 private:
  std::mutex mu_;
  std::map<std::pair<const void*, size_t>, Total> totals_;
};

inline Table& table() {
  static Table t;
  return t;
}

/// Times one node's turn in Executor::execute, from construction to destruction.
class NodeTimer {
 public:
  NodeTimer(const void* graph, size_t index, const Node& n, std::span<const ValueShape> shapes)
      : graph_(graph), index_(index), node_(n), shapes_(shapes) {}
  ~NodeTimer() {
    table().add(graph_, index_,
                std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start_).count(), node_,
                shapes_);
  }
  NodeTimer(const NodeTimer&) = delete;
  NodeTimer& operator=(const NodeTimer&) = delete;

 private:
  const void* graph_;
  size_t index_;
  const Node& node_;
  std::span<const ValueShape> shapes_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace etrt::xnnpack::profile
