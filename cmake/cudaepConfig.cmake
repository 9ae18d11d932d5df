# cudaepConfig.cmake — CMake package configuration for an installed cudaep.
#
#   find_package(cudaep 0.1 REQUIRED)
#   target_link_libraries(my_host PRIVATE cudaep::cudaep)
#
# Defines the imported target cudaep::cudaep (libcudaep.so plus the include directory holding
# cudaep.h) and cudaep_INCLUDE_DIR / cudaep_LIBRARY. The file locates the installation relative
# to itself (PREFIX/lib/cmake/cudaep), so an installed tree can be moved.
get_filename_component(_cudaep_prefix "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)

set(cudaep_INCLUDE_DIR "${_cudaep_prefix}/include")
set(cudaep_LIBRARY "${_cudaep_prefix}/lib/libcudaep.so")

if(NOT EXISTS "${cudaep_LIBRARY}" OR NOT EXISTS "${cudaep_INCLUDE_DIR}/cudaep.h")
  set(cudaep_FOUND FALSE)
  set(cudaep_NOT_FOUND_MESSAGE
      "cudaep is incomplete under ${_cudaep_prefix}: expected lib/libcudaep.so and include/cudaep.h")
  return()
endif()

if(NOT TARGET cudaep::cudaep)
  add_library(cudaep::cudaep SHARED IMPORTED)
  set_target_properties(cudaep::cudaep PROPERTIES
    IMPORTED_LOCATION "${cudaep_LIBRARY}"
    IMPORTED_SONAME "libcudaep.so"
    INTERFACE_INCLUDE_DIRECTORIES "${cudaep_INCLUDE_DIR}")
endif()

unset(_cudaep_prefix)
