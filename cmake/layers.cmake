# Layering enforced at configure time: infinipot_check_layer(dir above...) fails the configure
# when a source file in dir/ includes a header from a layer above it. The libraries also link
# only downward, so a symbol from a higher layer would not link either.
function(infinipot_check_layer dir)
  file(GLOB_RECURSE files ${CMAKE_SOURCE_DIR}/${dir}/*.h ${CMAKE_SOURCE_DIR}/${dir}/*.cpp)
  foreach(f ${files})
    file(STRINGS ${f} includes REGEX "^[ \t]*#[ \t]*include[ \t]+\"")
    foreach(line ${includes})
      foreach(above ${ARGN})
        if(line MATCHES "\"(\\.\\./)?${above}/")
          message(FATAL_ERROR "${f}: '${line}' reaches up from ${dir}/ into ${above}/; "
                  "the layers are model_loader <- runtime <- pot <- engine <- tools")
        endif()
      endforeach()
    endforeach()
  endforeach()
endfunction()
