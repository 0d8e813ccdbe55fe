// Records profiling events in ETDump's shape: a "Default" block per method load (Method::init,
// Program::load_method) and an "Execute" block per execution (native_call_<op> and OPERATOR_CALL per instruction,
// then Method::execute). Events are appended when they end, as the upstream writer does. Ticks are nanoseconds
// of the steady clock. Shared by every method of a program; its own mutex makes it safe across methods.
#pragma once

#include <chrono>
#include <mutex>

#include "etrt/devtools/etdump.h"
#include "etrt/method/method.h"

namespace etrt::python {

inline uint64_t now_ticks() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

class ETDumpRecorder final : public InstructionObserver {
 public:
  void on_instruction(size_t index, std::string_view name, uint64_t start_ns, uint64_t end_ns) override {
    std::lock_guard<std::mutex> g(mu_);
    if (!current_) return;
    std::string_view op = name;
    if (const auto p = op.find("::"); p != std::string_view::npos) op.remove_prefix(p + 2);
    const auto instr = static_cast<int32_t>(index);
    current_->profile_events.push_back(etdump::make_event(cat("native_call_", op), 0, instr, start_ns, end_ns));
    current_->profile_events.push_back(etdump::make_event("OPERATOR_CALL", 0, instr, start_ns, end_ns));
  }

  void record_load(uint64_t init_start, uint64_t init_end, uint64_t load_start, uint64_t load_end) {
    std::lock_guard<std::mutex> g(mu_);
    etdump::RunData run;
    run.name = "Default";
    run.profile_events.push_back(etdump::make_event("Method::init", -1, 0, init_start, init_end));
    run.profile_events.push_back(etdump::make_event("Program::load_method", -1, 0, load_start, load_end));
    data_.runs.push_back(std::move(run));
  }

  /// Opens an "Execute" block; the method's instructions report into it until end_execute.
  void begin_execute() {
    std::lock_guard<std::mutex> g(mu_);
    data_.runs.push_back(etdump::RunData{"Execute", -1, {}});
    current_ = &data_.runs.back();
    start_ = now_ticks();
  }
  void end_execute() {
    std::lock_guard<std::mutex> g(mu_);
    if (current_) current_->profile_events.push_back(etdump::make_event("Method::execute", -1, 0, start_, now_ticks()));
    current_ = nullptr;
  }

  /// The serialized ETDump of the blocks since the previous take; the recorder starts over.
  std::vector<uint8_t> take() {
    std::lock_guard<std::mutex> g(mu_);
    auto bytes = etdump::write_etdump(data_);
    data_ = {};
    current_ = nullptr;
    return bytes;
  }
  size_t num_blocks() const {
    std::lock_guard<std::mutex> g(mu_);
    return data_.runs.size();
  }

 private:
  mutable std::mutex mu_;
  etdump::ETDumpData data_;
  etdump::RunData* current_ = nullptr;  // points into data_.runs (only the last element; no push while set)
  uint64_t start_ = 0;
};

}  // namespace etrt::python
