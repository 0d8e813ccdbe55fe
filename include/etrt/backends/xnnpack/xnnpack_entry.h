// The XNNPACK delegate's entry point, for code that registers the delegate without compiling it.
//
// The Python module is built from two translation units: the bindings, which include only this declaration, and
// one that compiles the delegate (etrt/adapters/module_backends.h), so the executor and the kernels it calls are
// compiled once, beside the bindings rather than inside them. Header-only users include xnnpack_backend.h instead.
#pragma once

#include <string_view>

namespace etrt {
class BackendInterface;
}  // namespace etrt

namespace etrt::xnnpack {

/// The id upstream's XnnpackPartitioner writes into a program's delegate entries.
inline constexpr std::string_view kXnnpackBackendId = "XnnpackBackend";

/// The process-wide XnnpackBackend delegate (xnnpack_backend.h's xnnpack_delegate()), defined out of line.
const BackendInterface& xnnpack_delegate_entry();

}  // namespace etrt::xnnpack
