// The core headers stand alone and never pull in Python: each compiles without Python.h on the include path.
#include "etrt/core/evalue.h"
#include "etrt/devtools/etdump_recorder.h"
#include "etrt/format/flatbuffer.h"
#include "etrt/method/method.h"
#include "etrt/program/program.h"
#include "etrt/runtime.h"

#ifdef Py_PYTHON_H
#error "the core runtime headers must not include Python.h"
#endif

#include <catch2/catch.hpp>

TEST_CASE("headers: Result built from Ok becomes Internal, so ok() never lies", "[core]") {
  etrt::Result<int> r(etrt::Failure{etrt::Error::Ok, "x"});
  CHECK_FALSE(r.has_value());
  CHECK(r.error().code == etrt::Error::Internal);
  CHECK(etrt::Failure{etrt::Error::InvalidArgument, "bad"}.describe() == "bad (Error::InvalidArgument 0x12)");
}
