# Writes OUTPUT: a C++ table of every CUDA template under TEMPLATE_DIR (path relative to it → text), so NVRTC gets
# the project's headers from the binary itself. Run at build time; the table changes when a template does.
file(GLOB_RECURSE FILES RELATIVE "${TEMPLATE_DIR}" "${TEMPLATE_DIR}/*.cuh")
list(SORT FILES)
set(SOURCE_ROOT "${TEMPLATE_DIR}")
set(FUNCTION embedded_templates)
include(${CMAKE_CURRENT_LIST_DIR}/embed_sources.cmake)
