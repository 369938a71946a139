# Optional OpenBLAS for float matmul, decided once here for every target that
# compiles the library (the C library and the Python module share objects).
# Without it the build still succeeds, with a warning: float matmul then runs
# on our own kernel, an order of magnitude slower on large matrices.
#
# Sets EV_HAVE_BLAS (ON/OFF), EV_BLAS_OFF_ON_PURPOSE (1: EAGERVM_NO_BLAS or
# -DEV_WITH_BLAS=OFF), EV_BLAS_LIBRARY and EV_BLAS_INCLUDE_DIR, and defines
# ev_compile_with_blas(target) for targets whose sources call it and
# ev_link_blas(target) for the binaries that link those objects.
option(EV_WITH_BLAS "Use OpenBLAS for float32/float64 matmul when found" ON)

# EAGERVM_NO_BLAS is read at every configure and never cached: a build made
# with it set and the next one made without it differ, and CMake recompiles
# what the change touches (EV_HAVE_BLAS is a compile definition).
set(EV_BLAS_OFF_ON_PURPOSE 0)
if(NOT EV_WITH_BLAS OR (NOT "$ENV{EAGERVM_NO_BLAS}" STREQUAL "" AND
                        NOT "$ENV{EAGERVM_NO_BLAS}" STREQUAL "0"))
  set(EV_BLAS_OFF_ON_PURPOSE 1)
endif()

set(EV_HAVE_BLAS OFF)
if(NOT EV_BLAS_OFF_ON_PURPOSE)
  # A path found by an earlier configure may have gone since (package removed).
  foreach(v EV_BLAS_INCLUDE_DIR EV_BLAS_LIBRARY)
    if(${v} AND NOT EXISTS "${${v}}")
      unset(${v} CACHE)
    endif()
  endforeach()
  # Debian's libopenblas-*-dev keeps cblas.h in a per-variant folder; prefer
  # OpenBLAS's own header (it declares openblas_set_num_threads, which the
  # generic cblas.h of other BLAS packages lacks).
  find_path(EV_BLAS_INCLUDE_DIR NAMES cblas.h openblas_config.h
    PATH_SUFFIXES openblas-pthread openblas-openmp openblas openblas64-pthread
    HINTS /usr/include/x86_64-linux-gnu /usr/include/aarch64-linux-gnu /usr/include)
  find_library(EV_BLAS_LIBRARY NAMES openblas
    PATH_SUFFIXES openblas-pthread openblas-openmp)
  if(EV_BLAS_INCLUDE_DIR AND EV_BLAS_LIBRARY AND EXISTS "${EV_BLAS_INCLUDE_DIR}/openblas_config.h")
    set(EV_HAVE_BLAS ON)
  endif()
endif()

if(EV_HAVE_BLAS)
  message(STATUS "eagervm: OpenBLAS ${EV_BLAS_LIBRARY} (headers ${EV_BLAS_INCLUDE_DIR})")
elseif(EV_BLAS_OFF_ON_PURPOSE)
  message(STATUS "eagervm: built without BLAS on purpose (EAGERVM_NO_BLAS or EV_WITH_BLAS=OFF); "
    "float matmul uses the built-in kernel")
else()
  message(WARNING "eagervm: OpenBLAS not found: float matmul will run the built-in kernel, "
    "an order of magnitude slower on large matrices. Install libopenblas-dev "
    "(bash scripts/setup.sh does) and build again; set EAGERVM_NO_BLAS=1 to build "
    "without BLAS on purpose.")
endif()

function(ev_compile_with_blas target)
  if(EV_HAVE_BLAS)
    target_include_directories(${target} PRIVATE ${EV_BLAS_INCLUDE_DIR})
    target_compile_definitions(${target} PRIVATE EV_HAVE_BLAS)
  endif()
endfunction()

function(ev_link_blas target)
  if(EV_HAVE_BLAS)
    target_link_libraries(${target} PRIVATE ${EV_BLAS_LIBRARY})
  endif()
endfunction()
