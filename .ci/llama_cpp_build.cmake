# Build settings for llama-cpp-python in CI (see .ci/run): included at llama-cpp-python's
# top-level project() through CMAKE_PROJECT_INCLUDE.
#
# The Python package loads only libllama and the libggml* libraries. llama.cpp's `common`
# library (and the cpp-httplib it links) is still compiled, because llama-cpp-python forces
# LLAMA_BUILD_COMMON on, but nothing in the wheel calls it once LLAVA_BUILD=OFF drops mtmd,
# its only user. It is 40% of the objects and most of the compile time, so compile it without
# optimisation. Inference code (llama, ggml) keeps the Release flags.
include_guard(GLOBAL)

function(_jeeves_unoptimised_common)
  foreach(target IN ITEMS llama-common llama-common-base cpp-httplib)
    if(TARGET ${target})
      set_property(TARGET ${target} APPEND PROPERTY COMPILE_OPTIONS -O0 -g0)
    endif()
  endforeach()
endfunction()

cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL _jeeves_unoptimised_common)
