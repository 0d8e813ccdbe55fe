// The interpreter: runs a loaded Method's instructions (kernel calls, delegate calls, moves, jumps, frees) with
// the per-instruction storage check and the observer hooks ETDump uses.
#pragma once

#include "etrt/method/method.h"

namespace etrt {

// Note [logged values]: the values ETDump records as an instruction's intermediate outputs, the ones upstream's
// generated kernel wrappers and Method log. A kernel logs its out arguments: the trailing run of written slots
// before the return slot (`*, Tensor(a!) out` or `Tensor(a!) values, Tensor(b!) indices`). An in-place kernel
// without out arguments (copy_) logs the run starting at its first written slot instead. A delegate call logs
// every argument, inputs included, because a DelegateCall does not say which of its arguments are outputs.
inline void Method::set_logged_slots(Instruction& ins, uint64_t mutable_slots) {
  const size_t ret = ins.args.size() - 1;  // the return slot (the slot count was checked: at least 1)
  size_t first = ret;
  while (first > 0 && first - 1 < 64 && ((mutable_slots >> (first - 1)) & 1u)) --first;
  if (first == ret && mutable_slots != 0) {
    first = static_cast<size_t>(std::countr_zero(mutable_slots));
    size_t end = first;
    while (end < 64 && end < ret && ((mutable_slots >> end) & 1u)) ++end;
    ins.log_first = static_cast<uint16_t>(first);
    ins.log_count = static_cast<uint16_t>(end - first);
    return;
  }
  ins.log_first = static_cast<uint16_t>(first);
  ins.log_count = static_cast<uint16_t>(ret - first);
}

/// Every tensor a kernel touches needs storage: a program can leave an intermediate unplanned, or free it, and a
/// kernel must then fail instead of dereferencing null. Only the slots load could not prove backed are looked at
/// (Note [storage checked]), and slots past the 64 the mask covers.
inline Status Method::check_storage(size_t pc, const Instruction& ins) const {
  const auto missing = [&](const Tensor& t) { return t.data() == nullptr && t.capacity_nbytes() > 0; };
  // A kernel that computes its return value (a view such as et_view) gives the return slot its storage itself.
  const size_t ret = ins.args.size() - 1;
  const bool sets_return = ret < 64 && ((ins.mutable_slots >> ret) & 1u);
  const auto check = [&](size_t j) -> Status {
    if (sets_return && j == ret) return {};
    const EValue* v = ins.args[j];
    if (v->is_tensor()) {
      if (missing(v->tensor_unchecked()))
        return fail(Error::InvalidProgram, where(), " instruction ", pc, " (", ins.op_name, "): value ",
                    v - values_.data(), " is a tensor without storage (not planned, not a constant, not bound)");
    } else if (const auto* l = std::get_if<TensorList>(&v->storage())) {
      for (const Tensor* t : l->items)
        if (missing(*t))
          return fail(Error::InvalidProgram, where(), " instruction ", pc, " (", ins.op_name,
                      "): a listed tensor has no storage");
    } else if (const auto* ol = std::get_if<OptionalTensorList>(&v->storage())) {
      for (const Tensor* t : ol->items)
        if (t && missing(*t))
          return fail(Error::InvalidProgram, where(), " instruction ", pc, " (", ins.op_name,
                      "): a listed tensor has no storage");
    }
    return {};
  };
  for (uint64_t m = ins.storage_slots; m != 0; m &= m - 1) {
    const size_t j = static_cast<size_t>(std::countr_zero(m));
    if (j >= ins.args.size()) break;
    ETRT_CHECK_OK(check(j));
  }
  for (size_t j = 64; j < ins.args.size(); ++j) ETRT_CHECK_OK(check(j));
  return {};
}

/// Note [bool bytes]: the bool tensors a kernel only reads hold 0s and 1s, or the call fails naming the value.
inline Status Method::check_bool_bytes(size_t pc, const Instruction& ins) const {
  Status bad;
  const auto holds_other_bytes = [&](const Tensor& t, size_t vi) {
    if (t.dtype() != ScalarType::Bool || t.data() == nullptr || !t.device().is_cpu()) return false;
    const auto* p = static_cast<const uint8_t*>(t.data());  // bytes: reading them as bytes is always defined
    const size_t n = static_cast<size_t>(t.numel());
    const size_t k = first_non_bool_byte(p, n);
    if (k == n) return false;
    bad = fail(Error::InvalidProgram, where(), " instruction ", pc, " (", ins.op_name, "): bool value ", vi,
               " holds the byte ", int(p[k]), " at element ", k,
               " (a bool is 0 or 1; the program's memory plan lets other bytes reach it)");
    return true;
  };
  for (uint64_t m = ins.bool_read_slots; m != 0; m &= m - 1) {
    const EValue* v = ins.args[static_cast<size_t>(std::countr_zero(m))];
    const size_t vi = static_cast<size_t>(v - values_.data());
    if (any_tensor(*v, [&](const Tensor& t) { return holds_other_bytes(t, vi); })) return bad;
  }
  return {};
}

inline Status Method::run_instruction(size_t& pc, const Instruction& ins, KernelContext& ctx) {
  // Note [checked at load]: every index, operator and slot count below was validated by Method::load.
  switch (ins.kind) {
    case Kind::Kernel: {
      ETRT_CHECK_OK(check_storage(pc, ins));
      if (ins.bool_read_slots != 0) ETRT_CHECK_OK(check_bool_bytes(pc, ins));
      if (auto s = ins.fn(ctx, ins.args); !s)
        return fail(s.error().code, where(), " instruction ", pc, " (", ins.op_name, "): ", s.error().what);
      ++pc;
      return {};
    }
    case Kind::Delegate: {
      const Delegate& d = delegates_[ins.a];
      if (auto s = d.backend->execute(d.handle.get(), ins.args); !s)
        return fail(s.error().code, where(), " instruction ", pc, " (delegate '", d.id, "'): ", s.error().what);
      ++pc;
      return {};
    }
    case Kind::Move:
      values_[ins.b] = values_[ins.a];
      ++pc;
      return {};
    case Kind::JumpFalse: {
      const EValue& c = values_[ins.a];
      bool cond = false;
      if (c.is_bool()) {
        cond = c.bool_unchecked();
      } else if (c.is_tensor() && c.tensor_unchecked().dtype() == ScalarType::Bool) {
        const Tensor& t = c.tensor_unchecked();
        if (!t.device().is_cpu())
          return fail(Error::InvalidProgram, where(), " instruction ", pc, ": jump condition lives on ",
                      t.device().str());
        const auto* p = static_cast<const uint8_t*>(t.data());  // bytes: any value a plan left there is defined
        cond = true;
        for (int64_t k = 0; k < t.numel(); ++k) cond = cond && p[k] != 0;
      } else {
        return fail(Error::InvalidProgram, where(), " instruction ", pc, ": jump condition is ", tag_name(c.tag()));
      }
      pc = cond ? pc + 1 : ins.b;
      return {};
    }
    case Kind::Free:
      values_[ins.a].tensor_unchecked().set_data(nullptr);
      ++pc;
      return {};
  }
  return fail(Error::Internal, "unreachable");
}

inline Status Method::execute_unguarded() {
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (!input_set_[i]) return fail(Error::InvalidArgument, where(), ": input ", i, " has not been set");
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (!outputs_[i]->is_tensor()) continue;
    const Tensor& t = outputs_[i]->tensor_unchecked();
    if (t.data() || t.capacity_nbytes() == 0) continue;
    if (output_needs_storage(i))
      return fail(Error::InvalidState, where(), ": output ", i,
                  " is not memory planned and has no storage (set_output_data_ptr)");
    return fail(Error::InvalidProgram, where(), ": output ", i, " is a tensor without storage");
  }
  KernelContext ctx;
  ctx.device = device_api_;
  const bool log_values = observer_ && observer_->wants_values();
  size_t pc = 0, steps = 0;
  const size_t n = instructions_.size();
  while (pc < n) {
    if (++steps > kMaxInstructionsPerExecute)
      return fail(Error::InvalidProgram, where(), ": exceeded ", kMaxInstructionsPerExecute,
                  " instructions (a jump loop?)");
    const Instruction& ins = instructions_[pc];
    if (observer_) {
      const size_t at = pc;
      const auto t0 = std::chrono::steady_clock::now();
      ETRT_CHECK_OK(run_instruction(pc, ins, ctx));
      const auto t1 = std::chrono::steady_clock::now();
      const auto ns = [](auto t) {
        return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
      };
      if (log_values && ins.log_count > 0)
        observer_->on_values(at, std::span<EValue* const>(ins.args).subspan(ins.log_first, ins.log_count),
                             device_api_);
      observer_->on_instruction(at, ins.kind, ins.op_name, ns(t0), ns(t1));
    } else {
      ETRT_CHECK_OK(run_instruction(pc, ins, ctx));
    }
  }
  // A program can reassign an output's tensor during execution (MoveCall, FreeCall): never hand out null storage.
  for (size_t i = 0; i < outputs_.size(); ++i)
    if (outputs_[i]->is_tensor() && !outputs_[i]->tensor_unchecked().data() &&
        outputs_[i]->tensor_unchecked().nbytes() > 0)
      return fail(Error::InvalidProgram, where(), ": output ", i, " has no storage after execution");
  if (log_values) observer_->on_outputs(outputs_, device_api_);
  executed_ = true;
  return {};
}

}  // namespace etrt
