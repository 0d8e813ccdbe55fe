# The header-only ExecuTorch runtime installed with the Python package (executorch_portable_lib):
#   cmake -DCMAKE_PREFIX_PATH="$(python -m executorch_portable_lib --cmakedir)" ...
#   find_package(executorch-portable-lib CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE executorch_portable_lib::runtime)
# The target carries the include directory, C++20 and threads; there is no library to link.
include(CMakeFindDependencyMacro)
find_dependency(Threads)
get_filename_component(_etrt_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
if(NOT TARGET executorch_portable_lib::runtime)
  add_library(executorch_portable_lib::runtime INTERFACE IMPORTED)
  set_target_properties(executorch_portable_lib::runtime PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_etrt_prefix}/include"
    INTERFACE_COMPILE_FEATURES cxx_std_20
    INTERFACE_LINK_LIBRARIES Threads::Threads)
endif()
set(executorch-portable-lib_INCLUDE_DIR "${_etrt_prefix}/include")
unset(_etrt_prefix)
