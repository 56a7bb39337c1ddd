# Build settings for llama-cpp-python in CI (see .ci/run): included at llama-cpp-python's
# top-level project() through CMAKE_PROJECT_INCLUDE.
#
# The Python package loads only libllama and the libggml* libraries. llama.cpp's `common`
# library (and the cpp-httplib it links) is still compiled, because llama-cpp-python forces
# LLAMA_BUILD_COMMON on, but nothing in the wheel calls it once LLAVA_BUILD=OFF drops mtmd,
# its only user. It is 40% of the objects and most of the compile time, so compile it without
# optimisation. Inference code (llama, ggml) keeps the Release flags.
#
# ggml's AMX matrix kernels are left out: a native build on a Sapphire Rapids class CPU (AMX_INT8)
# compiles them in, and the first decode of the SmolLM2 Q4_1 model then crashes with SIGSEGV in
# ggml_backend_amx_mul_mat (seen on this project's CI machines; upstream llama.cpp issue #20824).
# Without AMX the same build uses its AVX-512/AVX2 kernels.
include_guard(GLOBAL)

function(_jeeves_unoptimised_common)
  foreach(target IN ITEMS llama-common llama-common-base cpp-httplib)
    if(TARGET ${target})
      set_property(TARGET ${target} APPEND PROPERTY COMPILE_OPTIONS -O0 -g0)
    endif()
  endforeach()
  # Appended after ggml's own -march=native, so these win.
  if(TARGET ggml-cpu AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64")
    set_property(TARGET ggml-cpu APPEND PROPERTY COMPILE_OPTIONS -mno-amx-tile -mno-amx-int8 -mno-amx-bf16)
  endif()
endfunction()

cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL _jeeves_unoptimised_common)
