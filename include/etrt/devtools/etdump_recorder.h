// ETDumpRecorder: records a program's loads and executions in ETDump's shape, for write_etdump_result_to_file.
//
//   etdump::ETDumpRecorder rec(*etdump::DebugBuffer::allocate(1 << 20));  // no DebugBuffer: profiling only
//   method->set_observer(&rec);
//   rec.begin_execute(method->name());
//   auto run = method->execute();
//   auto recorded = rec.end_execute();        // a failure here: the debug buffer was too small (see below)
//   rec.take([](std::span<const uint8_t> etdp, std::span<const uint8_t> debug_buffer) { ...write both... });
//
// Blocks, as upstream's ETDumpGen makes them: "Default" per method load (Method::init, Program::load_method) and
// "Execute" per execution (per kernel instruction native_call_<op> then OPERATOR_CALL; per delegate, move, jump or
// free instruction one DELEGATE_CALL, MOVE_CALL, JF_CALL or FREE_CALL; then Method::execute), all with chain 0 and
// the instruction index. Events are appended when they end. Ticks are nanoseconds of the steady clock.
//
// Intermediate outputs (only with a debug buffer; Note [debug events] in etdump.h): after each kernel or delegate
// instruction, one DebugEvent per value it wrote (Note [logged values] in method_execute.h), with chain 0 and the
// instruction index, just before that instruction's profile events; after a successful execution, one per program
// output (Value.output = true, chain all ones and instruction 0: upstream's unset values), after Method::execute.
// Tensor bytes are copied into the debug buffer at 64-byte-aligned offsets (device tensors through the device
// layer); ints, doubles and bools are stored inline. Values of other kinds (None, lists of scalars, strings) are
// not logged, where upstream aborts. DebugEvent.name stays absent, as upstream leaves it for kernel outputs:
// upstream's Inspector would otherwise rename the instruction's profile events after it.
//
// Note [debug buffer overflow]: the debug buffer holds the executions since the last take(). An execution whose
// tensors do not fit keeps running (its results are right), but nothing of it is recorded: end_execute() drops
// its "Execute" block and returns an OutOfResources failure naming the buffer size and the size the execution
// needed, which the bindings raise as RuntimeError from the call that overflowed. take() empties the buffer.
// Upstream aborts the process instead (ETDumpGen::log_evalue's ET_CHECK_MSG).
//
// Thread safety: one recorder serves every method of a program, and methods may execute concurrently on different
// threads, so each thread's open execution is its own block and a mutex guards everything.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "etrt/devtools/etdump.h"
#include "etrt/method/method.h"

namespace etrt::etdump {

inline uint64_t now_ticks() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

/// Upstream's unset chain id (-1) as DebugEvent.chain_index (uint64) holds it.
inline constexpr uint64_t kUnsetDebugChain = ~uint64_t{0};

/// The debug buffer: `capacity()` bytes, 64-byte aligned, filled from offset 0 in 64-byte-aligned blobs.
class DebugBuffer {
 public:
  static constexpr size_t kAlignment = 64;

  DebugBuffer() = default;
  /// A zero-filled buffer of `size_bytes` (0: no buffer).
  /// @retval MemoryAllocationFailed when the memory is not available.
  static Result<DebugBuffer> allocate(size_t size_bytes) {
    DebugBuffer b;
    if (size_bytes == 0) return Result<DebugBuffer>(std::move(b));  // explicit moves: see DeviceBuffer::allocate
    b.data_ = allocate_aligned(size_bytes);
    if (!b.data_)
      return fail(Error::MemoryAllocationFailed, "cannot allocate a debug buffer of ", size_bytes,
                  " bytes (debug_buffer_size)");
    b.capacity_ = size_bytes;
    return Result<DebugBuffer>(std::move(b));
  }

  size_t capacity() const { return capacity_; }
  size_t used() const { return used_; }
  /// Every byte of the buffer, used or not (upstream writes all debug_buffer_size bytes).
  std::span<const uint8_t> bytes() const { return {data_.get(), capacity_}; }

  static constexpr size_t align(size_t offset) { return (offset + kAlignment - 1) & ~(kAlignment - 1); }
  /// Where `nbytes` go, or nullopt when they do not fit. The caller fills [offset, offset + nbytes).
  std::optional<size_t> reserve(size_t nbytes) {
    const size_t at = align(used_);
    if (at > capacity_ || nbytes > capacity_ - at) return std::nullopt;
    used_ = at + nbytes;
    return at;
  }
  uint8_t* at(size_t offset) { return data_.get() + offset; }
  /// Forgets everything from `offset` on (a dropped execution's bytes).
  void rewind(size_t offset) { used_ = std::min(used_, offset); }

 private:
  ArenaPtr data_;
  size_t capacity_ = 0;
  size_t used_ = 0;
};

class ETDumpRecorder final : public InstructionObserver {
 public:
  explicit ETDumpRecorder(DebugBuffer debug_buffer = {}) : debug_(std::move(debug_buffer)) {}

  /// The debug buffer's size in bytes (0: profiling only).
  size_t debug_buffer_size() const { return debug_.capacity(); }

  // ---- InstructionObserver ----

  void on_instruction(size_t index, InstructionKind kind, std::string_view name, uint64_t start_ns,
                      uint64_t end_ns) override {
    std::lock_guard<std::mutex> g(mu_);
    Open* o = open_block();
    if (!o) return;
    const auto instr = static_cast<int32_t>(index);
    auto& events = data_.runs[o->run].events;
    if (kind == InstructionKind::Kernel) {
      // Upstream's generated kernel wrapper opens native_call_<op> inside the interpreter's OPERATOR_CALL scope;
      // the inner scope ends first.
      std::string_view op = name;
      if (const auto p = op.find("::"); p != std::string_view::npos) op.remove_prefix(p + 2);
      events.emplace_back(make_event(cat("native_call_", op), 0, instr, start_ns, end_ns));
    }
    events.emplace_back(make_event(std::string(profile_event_name(kind)), 0, instr, start_ns, end_ns));
  }

  /// The interpreter's event for an instruction kind, as upstream's Method::execute_instruction names it. Upstream's
  /// Inspector keys on these names (a DELEGATE_CALL event gets its delegate's backend name from the ETRecord).
  static constexpr std::string_view profile_event_name(InstructionKind kind) {
    switch (kind) {
      case InstructionKind::Kernel: return "OPERATOR_CALL";
      case InstructionKind::Delegate: return "DELEGATE_CALL";
      case InstructionKind::Move: return "MOVE_CALL";
      case InstructionKind::JumpFalse: return "JF_CALL";
      case InstructionKind::Free: return "FREE_CALL";
    }
    return "UNKNOWN_CALL";
  }

  bool wants_values() const override { return debug_.capacity() > 0; }

  void on_values(size_t index, std::span<EValue* const> values, const DeviceInterface* device) override {
    std::lock_guard<std::mutex> g(mu_);
    Open* o = open_block();
    if (!o) return;
    for (const EValue* v : values) {
      auto e = capture(*o, *v, device);
      if (!e) continue;
      e->chain_index = 0;
      e->instruction_id = static_cast<int32_t>(index);
      if (!o->failure) data_.runs[o->run].events.emplace_back(std::move(*e));
    }
  }

  void on_outputs(std::span<EValue* const> outputs, const DeviceInterface* device) override {
    std::lock_guard<std::mutex> g(mu_);
    Open* o = open_block();
    if (!o) return;
    for (const EValue* v : outputs) {
      auto e = capture(*o, *v, device);
      if (!e) continue;
      e->chain_index = kUnsetDebugChain;
      e->instruction_id = 0;
      e->value.output = true;
      if (!o->failure) o->outputs.push_back(std::move(*e));
    }
  }

  // ---- blocks ----

  /// A "Default" block for one method load.
  void record_load(uint64_t init_start, uint64_t init_end, uint64_t load_start, uint64_t load_end) {
    std::lock_guard<std::mutex> g(mu_);
    RunData run;
    run.name = "Default";
    run.events.emplace_back(make_event("Method::init", -1, 0, init_start, init_end));
    run.events.emplace_back(make_event("Program::load_method", -1, 0, load_start, load_end));
    data_.runs.push_back(std::move(run));
  }

  /// Opens an "Execute" block for `method`'s execution on this thread; its instructions report into it until
  /// end_execute on the same thread.
  void begin_execute(std::string_view method) {
    std::lock_guard<std::mutex> g(mu_);
    close_block(std::this_thread::get_id());  // a block left open by a caller that never ended it
    data_.runs.push_back(RunData{"Execute", -1, {}});
    open_.push_back(Open{std::this_thread::get_id(), data_.runs.size() - 1, std::string(method), now_ticks(),
                         debug_.used(), true, 0, {}, std::nullopt});
  }

  /// Closes this thread's block. On a recording failure (Note [debug buffer overflow]) the block is dropped and
  /// the failure returned.
  /// @retval OutOfResources when the execution's tensors did not fit in the debug buffer.
  /// @retval the device layer's error when a device tensor could not be read.
  Status end_execute() {
    std::lock_guard<std::mutex> g(mu_);
    Open* o = open_block();
    if (!o) return {};
    if (o->failure) {
      Failure f = std::move(*o->failure);
      if (f.code == Error::OutOfResources)
        f.what = cat("ETDump debug buffer overflow in method '", o->method, "': the intermediate outputs of this "
                     "execution need ", o->needed, " bytes (each tensor 64-byte aligned), the debug buffer has ",
                     debug_.capacity(), " bytes (debug_buffer_size) of which ", o->buffer_start,
                     " hold earlier executions not yet written; pass a larger debug_buffer_size (at least ",
                     o->buffer_start + o->needed, ") or write the ETDump more often. The execution itself "
                     "completed, but nothing of it was recorded");
      drop_block(*o);
      return f;
    }
    auto& events = data_.runs[o->run].events;
    events.emplace_back(make_event("Method::execute", -1, 0, o->start, now_ticks()));
    for (DebugEvent& e : o->outputs) events.emplace_back(std::move(e));
    close_block(o->thread);
    return {};
  }

  /// Hands `sink(etdump_bytes, debug_buffer_bytes)` the serialized ETDump of the blocks since the previous take and
  /// the whole debug buffer (empty without one), then starts over: the buffer is reused from offset 0, so the
  /// offsets in each ETDump refer to the debug buffer handed with it. Blocks still open (executions running on
  /// other threads) stay. Returns what `sink` returns.
  template <class Sink>
  auto take(Sink&& sink) {
    std::lock_guard<std::mutex> g(mu_);
    ETDumpData done;
    std::vector<RunData> still_open;
    for (size_t i = 0; i < data_.runs.size(); ++i) {
      const bool open = std::any_of(open_.begin(), open_.end(), [&](const Open& o) { return o.run == i; });
      (open ? still_open : done.runs).push_back(std::move(data_.runs[i]));
    }
    const auto bytes = write_etdump(done);
    auto result = sink(std::span<const uint8_t>(bytes), debug_.bytes());
    data_.runs = std::move(still_open);
    std::sort(open_.begin(), open_.end(), [](const Open& a, const Open& b) { return a.run < b.run; });
    for (size_t k = 0; k < open_.size(); ++k) {
      open_[k].run = k;             // still_open kept the open blocks in that order
      open_[k].exclusive = false;   // their bytes were handed over too: a drop must not rewind below them
    }
    if (open_.empty()) debug_.rewind(0);
    return result;
  }
  /// The serialized ETDump (take without the debug buffer).
  std::vector<uint8_t> take() {
    return take([](std::span<const uint8_t> etdp, std::span<const uint8_t>) {
      return std::vector<uint8_t>(etdp.begin(), etdp.end());
    });
  }

  size_t num_blocks() const {
    std::lock_guard<std::mutex> g(mu_);
    return data_.runs.size();
  }

 private:
  /// An execution in progress on one thread.
  struct Open {
    std::thread::id thread;
    size_t run;              // index into data_.runs
    std::string method;
    uint64_t start;
    size_t buffer_start;     // debug_.used() when it began
    bool exclusive;          // no other block wrote to the buffer since it began (so a drop may rewind)
    size_t needed = 0;       // bytes its tensors need, each 64-byte aligned
    std::vector<DebugEvent> outputs;  // program outputs, appended after Method::execute
    std::optional<Failure> failure;   // set: nothing more is recorded and the block is dropped at the end
  };

  Open* open_block() {
    const auto id = std::this_thread::get_id();
    for (Open& o : open_)
      if (o.thread == id) return &o;
    return nullptr;
  }
  void close_block(std::thread::id id) {
    std::erase_if(open_, [&](const Open& o) { return o.thread == id; });
  }
  void drop_block(const Open& o) {
    const size_t run = o.run;
    if (o.exclusive) debug_.rewind(o.buffer_start);
    const auto id = o.thread;  // `o` dies in close_block
    close_block(id);
    data_.runs.erase(data_.runs.begin() + static_cast<std::ptrdiff_t>(run));
    for (Open& other : open_)
      if (other.run > run) --other.run;
  }

  /// The DebugEvent of one value, with its tensors' bytes in the debug buffer; nullopt for a value that is not
  /// logged. After a failure the sizes are still counted (for the message) but nothing is copied.
  std::optional<DebugEvent> capture(Open& o, const EValue& v, const DeviceInterface* device) {
    DebugEvent e;
    Value& val = e.value;
    if (v.is_tensor()) {
      val.type = ValueType::Tensor;
      if (!add_tensor(o, val, v.tensor_unchecked(), device)) return std::nullopt;
    } else if (const auto* l = std::get_if<TensorList>(&v.storage())) {
      val.type = ValueType::TensorList;
      for (const Tensor* t : l->items)
        if (!add_tensor(o, val, *t, device)) return std::nullopt;
    } else if (v.is_int()) {
      val.type = ValueType::Int;
      val.int_value = v.int_unchecked();
    } else if (v.is_double()) {
      val.type = ValueType::Double;
      val.double_value = v.double_unchecked();
    } else if (v.is_bool()) {
      val.type = ValueType::Bool;
      val.bool_value = v.bool_unchecked();
    } else {
      return std::nullopt;
    }
    return e;
  }

  /// Appends `t`'s entry to `val`, copying its bytes; false for a tensor without storage (not logged).
  bool add_tensor(Open& o, Value& val, const Tensor& t, const DeviceInterface* device) {
    TensorEntry te;
    te.scalar_type = static_cast<int8_t>(t.dtype());
    te.sizes.assign(t.sizes().begin(), t.sizes().end());
    te.strides.assign(t.strides().begin(), t.strides().end());
    const size_t nbytes = t.nbytes();
    te.offset = kNoDebugData;
    if (nbytes > 0) {
      if (!t.data()) return false;
      o.needed += DebugBuffer::align(nbytes);
      if (o.failure) return true;
      const auto at = debug_.reserve(nbytes);
      if (!at) {
        o.failure = fail(Error::OutOfResources, "");  // the message is written at the end, with the total
        return true;
      }
      for (Open& other : open_)
        if (&other != &o) other.exclusive = false;
      if (t.device().is_cpu()) {
        std::memcpy(debug_.at(*at), t.data(), nbytes);
      } else if (!device) {
        o.failure = fail(Error::NotSupported, "ETDump: method '", o.method, "' has a tensor on ", t.device().str(),
                         " but no device layer to read it");
        return true;
      } else if (auto s = device->copy(debug_.at(*at), t.data(), nbytes, CopyKind::DeviceToHost, t.device().index);
                 !s) {
        o.failure = fail(s.error().code, "ETDump: method '", o.method, "': cannot copy a ", t.device().str(),
                         " tensor into the debug buffer: ", s.error().what);
        return true;
      }
      te.offset = static_cast<int64_t>(*at);
    }
    val.tensors.push_back(std::move(te));
    return true;
  }

  mutable std::mutex mu_;
  DebugBuffer debug_;
  ETDumpData data_;
  std::vector<Open> open_;
};

}  // namespace etrt::etdump
