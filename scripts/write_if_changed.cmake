# write_if_changed(PATH TEXT): writes TEXT to PATH unless PATH already holds it, so that generated sources keep their
# timestamps (and what depends on them is not rebuilt) when nothing changed.
function(write_if_changed path text)
  set(old "")
  if(EXISTS "${path}")
    file(READ "${path}" old)
  endif()
  if(NOT "${old}" STREQUAL "${text}")
    file(WRITE "${path}" "${text}")
  endif()
endfunction()
