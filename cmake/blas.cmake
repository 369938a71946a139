# Optional OpenBLAS for float matmul (included by the top CMakeLists after the
# eagervm target exists). Without it the build still succeeds: float matmul
# then runs on our own kernel. Sets EV_BLAS_LIBRARY and EV_BLAS_INCLUDE_DIR for
# targets (bench_ops) that call OpenBLAS directly.
option(EV_WITH_BLAS "Use OpenBLAS for float32/float64 matmul when found" ON)

if(EV_WITH_BLAS)
  # Debian's libopenblas-*-dev keeps cblas.h in a per-variant folder; prefer
  # OpenBLAS's own header (it declares openblas_set_num_threads, which the
  # generic cblas.h of other BLAS packages lacks).
  find_path(EV_BLAS_INCLUDE_DIR NAMES cblas.h openblas_config.h
    PATH_SUFFIXES openblas-pthread openblas-openmp openblas openblas64-pthread
    HINTS /usr/include/x86_64-linux-gnu /usr/include/aarch64-linux-gnu /usr/include)
  find_library(EV_BLAS_LIBRARY NAMES openblas
    PATH_SUFFIXES openblas-pthread openblas-openmp)
endif()

if(EV_WITH_BLAS AND EV_BLAS_INCLUDE_DIR AND EV_BLAS_LIBRARY
   AND EXISTS "${EV_BLAS_INCLUDE_DIR}/openblas_config.h")
  message(STATUS "eagervm: OpenBLAS ${EV_BLAS_LIBRARY} (headers ${EV_BLAS_INCLUDE_DIR})")
  target_include_directories(eagervm PRIVATE ${EV_BLAS_INCLUDE_DIR})
  target_link_libraries(eagervm PRIVATE ${EV_BLAS_LIBRARY})
  target_compile_definitions(eagervm PRIVATE EV_HAVE_BLAS)
  set(EV_HAVE_BLAS ON)
else()
  message(STATUS "eagervm: OpenBLAS not found; float matmul uses the built-in kernel")
  set(EV_HAVE_BLAS OFF)
endif()
