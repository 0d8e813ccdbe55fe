// BundledProgram: a .bpte (identifier "BP08"): an embedded .pte plus test cases (inputs, expected outputs).
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "etrt/method/method.h"

namespace etrt {

struct BundledTensor {
  ScalarType dtype = ScalarType::Byte;
  std::vector<int64_t> sizes;
  std::vector<uint8_t> dim_order;
  std::span<const uint8_t> data;
};

/// One bundled value: a tensor, or an Int / Bool / Double.
struct BundledValue {
  std::optional<BundledTensor> tensor;
  EValue scalar;
};

struct BundledTestCase {
  std::vector<BundledValue> inputs;
  std::vector<BundledValue> expected_outputs;
};

struct BundledSuite {
  std::string method_name;
  std::vector<BundledTestCase> cases;
};

class BundledProgram {
 public:
  static bool is_bundled(std::span<const uint8_t> bytes) {
    return bytes.size() >= 8 && std::memcmp(bytes.data() + 4, "BP08", 4) == 0;
  }

  static Result<std::shared_ptr<const BundledProgram>> load(std::shared_ptr<const DataSource> source) {
    const auto bytes = source->bytes();
    if (!is_bundled(bytes))
      return fail(Error::InvalidArgument, "bundled program: not a bundled program (identifier bytes 4..7 are not 'BP08')");
    fb::Reader r(bytes, "bundled program");
    const fb::Table root = r.root();
    auto bp = std::shared_ptr<BundledProgram>(new BundledProgram());
    bp->version_ = root.scalar<uint32_t>(0, 0, "BundledProgram.version");
    bool has_program = false;
    const auto program = root.vector<uint8_t>(2, "BundledProgram.program", &has_program);
    const auto suites = root.tables(1, "BundledProgram.method_test_suites");
    if (!r.ok()) return r.take_failure();
    if (!has_program || program.empty()) return fail(Error::InvalidProgram, "bundled program: no embedded program");
    const size_t offset = static_cast<size_t>(program.bytes() - bytes.data());
    bp->program_source_ = DataSource::slice(source, offset, program.size());
    for (uint32_t s = 0; s < suites.size(); ++s) {
      const fb::Table st = suites.at(s);
      BundledSuite suite;
      suite.method_name = std::string(st.string(0, "BundledMethodTestSuite.method_name"));
      const auto cases = st.tables(1, "BundledMethodTestSuite.test_cases");
      for (uint32_t c = 0; c < cases.size(); ++c) {
        const fb::Table ct = cases.at(c);
        BundledTestCase tc;
        ETRT_TRY(tc.inputs, read_values(ct.tables(0, "BundledMethodTestCase.inputs"), r));
        ETRT_TRY(tc.expected_outputs, read_values(ct.tables(1, "BundledMethodTestCase.expected_outputs"), r));
        suite.cases.push_back(std::move(tc));
      }
      if (!r.ok()) return r.take_failure();
      bp->suites_.push_back(std::move(suite));
    }
    return std::shared_ptr<const BundledProgram>(std::move(bp));
  }

  std::shared_ptr<const DataSource> program_source() const { return program_source_; }
  const std::vector<BundledSuite>& suites() const { return suites_; }
  uint32_t version() const { return version_; }

  Result<const BundledTestCase*> test_case(std::string_view method, size_t index) const {
    for (const auto& s : suites_) {
      if (s.method_name != method) continue;
      if (index >= s.cases.size())
        return fail(Error::InvalidArgument, "bundled program: test case ", index, " out of range for method '",
                    method, "' (", s.cases.size(), " cases)");
      return &s.cases[index];
    }
    return fail(Error::InvalidArgument, "bundled program: no test suite for method '", method, "'");
  }

  /// Sets every input of `method` from test case `index`.
  Status load_inputs(Method& method, size_t index) const {
    ETRT_TRY(const BundledTestCase* tc, test_case(method.name(), index));
    if (tc->inputs.size() != method.num_inputs())
      return fail(Error::InvalidArgument, "bundled program: test case ", index, " has ", tc->inputs.size(),
                  " inputs, method '", method.name(), "' takes ", method.num_inputs());
    for (size_t i = 0; i < tc->inputs.size(); ++i) {
      const BundledValue& v = tc->inputs[i];
      if (v.tensor) {
        const BundledTensor& t = *v.tensor;
        std::array<int64_t, kMaxDims> strides{};
        strides_from_dim_order(t.sizes, t.dim_order, std::span<int64_t>(strides.data(), t.sizes.size()));
        InputTensor in{t.data.data(), t.dtype, t.sizes, std::span<const int64_t>(strides.data(), t.sizes.size()),
                       Device{}, false};
        auto r = method.set_input(i, in);
        if (!r) return std::move(r).error();
      } else {
        ETRT_CHECK_OK(method.set_input(i, v.scalar));
      }
    }
    return {};
  }

  /// Compares the method's outputs with test case `index`: dtype and shape must match; floating dtypes compare with
  /// |a - b| <= atol + rtol * |b| (NaN equals NaN), everything else byte for byte.
  Status verify_outputs(const Method& method, size_t index, double rtol, double atol) const {
    ETRT_TRY(const BundledTestCase* tc, test_case(method.name(), index));
    if (tc->expected_outputs.empty())
      return fail(Error::NotSupported, "bundled program: test case ", index, " has no expected outputs");
    if (tc->expected_outputs.size() != method.num_outputs())
      return fail(Error::InvalidArgument, "bundled program: test case ", index, " expects ",
                  tc->expected_outputs.size(), " outputs, method has ", method.num_outputs());
    for (size_t i = 0; i < tc->expected_outputs.size(); ++i) {
      const BundledValue& e = tc->expected_outputs[i];
      if (!e.tensor) return fail(Error::NotSupported, "bundled program: output ", i, " is not a tensor");
      const EValue& got = method.output(i);
      if (!got.is_tensor()) return fail(Error::InvalidArgument, "output ", i, " is not a tensor");
      ETRT_CHECK_OK(compare(got.tensor_unchecked(), *e.tensor, i, rtol, atol));
    }
    return {};
  }

 private:
  BundledProgram() = default;

  static Result<std::vector<BundledValue>> read_values(const fb::Table::TableVector& vals, const fb::Reader& r) {
    std::vector<BundledValue> out;
    for (uint32_t i = 0; i < vals.size(); ++i) {
      const fb::Table v = vals.at(i);
      const uint8_t tag = v.scalar<uint8_t>(0, 0, "Value.val_type");
      const fb::Table t = v.table(1, "Value.val");
      if (!r.ok()) return r.take_failure();
      if (!t.present()) return fail(Error::InvalidProgram, "bundled program: value ", i, " has no table");
      BundledValue bv;
      switch (tag) {
        case 1: {
          BundledTensor bt;
          const int st = t.scalar<int8_t>(0, 0, "Tensor.scalar_type");
          if (!is_schema_scalar_type(st))
            return fail(Error::InvalidProgram, "bundled program: invalid scalar type ", st);
          bt.dtype = static_cast<ScalarType>(st);
          const auto sizes = t.vector<int32_t>(1, "Tensor.sizes");
          const auto data = t.vector<uint8_t>(2, "Tensor.data");
          const auto order = t.vector<uint8_t>(3, "Tensor.dim_order");
          if (!r.ok()) return r.take_failure();
          for (uint32_t k = 0; k < sizes.size(); ++k) {
            if (sizes[k] < 0) return fail(Error::InvalidProgram, "bundled program: negative size");
            bt.sizes.push_back(sizes[k]);
          }
          if (bt.sizes.size() > static_cast<size_t>(kMaxDims))
            return fail(Error::InvalidProgram, "bundled program: rank too large");
          for (uint32_t k = 0; k < order.size(); ++k) bt.dim_order.push_back(order[k]);
          if (bt.dim_order.empty())
            for (size_t k = 0; k < bt.sizes.size(); ++k) bt.dim_order.push_back(static_cast<uint8_t>(k));
          if (bt.dim_order.size() != bt.sizes.size() || !is_valid_dim_order(bt.dim_order))
            return fail(Error::InvalidProgram, "bundled program: invalid dim_order");
          const int64_t numel = checked_numel(bt.sizes);
          if (numel < 0 || static_cast<uint64_t>(numel) * element_size(bt.dtype) != data.size())
            return fail(Error::InvalidProgram, "bundled program: tensor data of ", data.size(), " bytes does not match ",
                        numpy_name(bt.dtype), shape_str(bt.sizes));
          bt.data = {data.bytes(), data.size()};
          bv.tensor = std::move(bt);
          break;
        }
        case 2: bv.scalar = EValue(t.scalar<int64_t>(0, 0, "Int.int_val")); break;
        case 3: bv.scalar = EValue(t.scalar<uint8_t>(0, 0, "Bool.bool_val") != 0); break;
        case 4: bv.scalar = EValue(t.scalar<double>(0, 0.0, "Double.double_val")); break;
        default: return fail(Error::InvalidProgram, "bundled program: invalid value tag ", static_cast<int>(tag));
      }
      out.push_back(std::move(bv));
    }
    return out;
  }

  static Status compare(const Tensor& got, const BundledTensor& exp, size_t i, double rtol, double atol) {
    if (got.dtype() != exp.dtype)
      return fail(Error::NotFound, "output ", i, ": dtype ", numpy_name(got.dtype()), " != expected ",
                  numpy_name(exp.dtype));
    if (!std::ranges::equal(got.sizes(), exp.sizes))
      return fail(Error::NotFound, "output ", i, ": shape ", shape_str(got.sizes()), " != expected ",
                  shape_str(exp.sizes));
    // Bundled tensors may be stored in another dim order than the method's output (the exporter writes them
    // contiguous): compare logical elements by bringing both into row-major order.
    const int64_t n = got.numel();
    const size_t es = element_size(got.dtype());
    std::vector<int64_t> row_major(got.dim()), exp_strides(got.dim());
    {
      std::vector<uint8_t> identity(got.dim());
      for (int d = 0; d < got.dim(); ++d) identity[d] = static_cast<uint8_t>(d);
      strides_from_dim_order(got.sizes(), identity, row_major);
    }
    strides_from_dim_order(exp.sizes, exp.dim_order, exp_strides);
    std::vector<uint8_t> got_rm(static_cast<size_t>(n) * es), exp_rm(static_cast<size_t>(n) * es);
    copy_strided(got_rm.data(), row_major, got.data(), got.strides(), got.sizes(), es);
    copy_strided(exp_rm.data(), row_major, exp.data.data(), exp_strides, exp.sizes, es);
    const auto* a = got_rm.data();
    const std::span<const uint8_t> expected_bytes(exp_rm);
    const auto close = [&](double x, double y) {
      if (std::isnan(x) && std::isnan(y)) return true;
      if (std::isinf(x) || std::isinf(y)) return x == y;
      if (rtol == 0 && atol == 0) return x == y;
      return std::abs(x - y) <= atol + rtol * std::abs(y);
    };
    for (int64_t k = 0; k < n; ++k) {
      double x = 0, y = 0;
      bool floating = true;
      switch (got.dtype()) {
        case ScalarType::Float: x = load<float>(got_rm, k); y = load<float>(expected_bytes, k); break;
        case ScalarType::Double: x = load<double>(got_rm, k); y = load<double>(expected_bytes, k); break;
        case ScalarType::Half: x = static_cast<float>(load<Half>(got_rm, k)); y = static_cast<float>(load<Half>(expected_bytes, k)); break;
        case ScalarType::BFloat16: x = static_cast<float>(load<BFloat16>(got_rm, k)); y = static_cast<float>(load<BFloat16>(expected_bytes, k)); break;
        default: floating = false;
      }
      if (floating) {
        if (!close(x, y))
          return fail(Error::NotFound, "output ", i, " element ", k, ": got ", x, ", expected ", y, " (rtol ", rtol,
                      ", atol ", atol, ")");
      }
    }
    if (!is_floating(got.dtype()) && n > 0 && std::memcmp(a, expected_bytes.data(), got.nbytes()) != 0)
      return fail(Error::NotFound, "output ", i, ": data differs from the expected output (exact comparison)");
    return {};
  }

  template <class T>
  static T load(std::span<const uint8_t> d, int64_t k) {
    T v;
    std::memcpy(&v, d.data() + k * sizeof(T), sizeof(T));
    return v;
  }

  uint32_t version_ = 0;
  std::shared_ptr<const DataSource> program_source_;
  std::vector<BundledSuite> suites_;
};

}  // namespace etrt
