# Catch2's runner (tests/main.cpp: CATCH_CONFIG_MAIN, the whole of Catch2's implementation), one
# library for every Catch2 test binary, compiled at -O0: it was about 30 s of -O3 in each of four
# binaries (65 s under ASan) for code that runs the tests and is not under test (13 s at -O0, 22 s
# under ASan, once). It neither builds nor imports a module, so its -O may differ from the tree's;
# the tests' own files keep the tree's flags. Included by tests/ and by tests/cuda (which
# scripts/gpu.sh also builds alone).
if(NOT TARGET attn_catch_main)
  add_library(attn_catch_main STATIC ${CMAKE_CURRENT_LIST_DIR}/main.cpp)
  target_link_libraries(attn_catch_main PUBLIC Catch2::Catch2)
  target_compile_options(attn_catch_main PRIVATE -O0)
  set_target_properties(attn_catch_main PROPERTIES CXX_SCAN_FOR_MODULES OFF)
endif()
