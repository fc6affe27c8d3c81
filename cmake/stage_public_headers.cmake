# Copies the installed C++ API's headers (listed one per line, relative to the source tree, in LIST) into OUT/tessera:
# ops/include/tessera/x.hpp as tessera/x.hpp, generator/a/b.hpp as tessera/generator/a/b.hpp, with every
# `#include "generator/...` rewritten to `#include "tessera/generator/...`, so that a consumer's one include root
# (PREFIX/include) holds nothing outside tessera/.
file(STRINGS ${LIST} headers)
file(REMOVE_RECURSE ${OUT}/tessera)
foreach(header IN LISTS headers)
  file(READ ${SOURCE}/${header} text)
  string(REPLACE "#include \"generator/" "#include \"tessera/generator/" text "${text}")
  string(REGEX REPLACE "^ops/include/" "" destination "${header}")
  string(REGEX REPLACE "^generator/" "tessera/generator/" destination "${destination}")
  file(WRITE ${OUT}/${destination} "${text}")
endforeach()
file(TOUCH ${OUT}/tessera.stamp)
